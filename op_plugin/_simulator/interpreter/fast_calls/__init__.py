"""Fast calls: a kernel's work for one verified input signature, as the bare aten call eager makes.

A kernel checks its attrs and inputs and picks a path on every call; on a signature the executor has
verified (`executor.plan`), every one of those choices is fixed: input dtypes and shapes by the
signature, attrs by the node, the values of Const and folded inputs by the plan. A *specialiser*
makes the choices once, on the signature's first (checked) call, and returns the call that is left,
say `lambda x, w, b, o: torch.conv2d(x, w, b, (1, 1), (1, 1), (1, 1), 1)`, or None where it does not
cover the case (the kernel then runs as before).

    @specialises("Conv2D")                    # the op types whose built-in kernel it stands in for
    def conv2d_call(x, filter, bias, offset_w, *, strides, ..., node):   # the kernel's own arguments
        ...
        return lambda x, filter, bias, offset_w: ...

`reads_values` names the inputs whose values (not only dtype and shape) the specialiser bakes in
(ReduceMean's axes): the executor specialises only where those inputs are fixed for the signature
(a Const, a folded node's output or a small integer graph input, which the signature holds by value).

Trust is not assumed: on the first call the executor runs the fast call on the very arguments the
kernel just ran on and requires the same outputs bit for bit (dtype, shape, strides of the dims longer
than 1, every byte, memory shared with an input or not); a difference is an error naming the node
(`verify_fast_call`). Kernels replaced at run time (`register_ge_kernel(..., replace=True)`) have
no specialiser: they are looked up by function, not by op type.
"""
from __future__ import annotations

import importlib
from collections.abc import Callable

import torch

from ..errors import GeExecutionError
from ..kernels import builtin_kernels

# kernel function -> (specialiser, names of the inputs whose values it reads)
_SPECIALISERS: dict[Callable, tuple[Callable, tuple[str, ...]]] = {}


def specialises(*op_types: str, reads_values: tuple[str, ...] = ()):
    """Register the decorated function as the specialiser of the built-in kernel of each of `op_types`."""
    builtin = builtin_kernels()

    def decorate(specialiser: Callable) -> Callable:
        for op_type in op_types:
            kernel = builtin.get(op_type)
            if kernel is None:  # no built-in kernel for the type in this process (one removed or replaced)
                continue
            if _SPECIALISERS.get(kernel, (specialiser,))[0] is specialiser:  # one kernel for several types
                _SPECIALISERS[kernel] = (specialiser, tuple(reads_values))
                continue
            if kernel in _SPECIALISERS:
                raise ValueError(f"the kernel of {op_type} ({kernel.__name__}) already has a specialiser")
            _SPECIALISERS[kernel] = (specialiser, tuple(reads_values))
        return specialiser

    return decorate


def specialiser_of(kernel: Callable):
    """(specialiser, reads_values) of a built-in kernel function, or None."""
    return _SPECIALISERS.get(kernel)


def verify_fast_call(op, expected: list, fast: Callable, args: list) -> None:
    """Run `fast(*args)` and require exactly the kernel's `expected` outputs; raise naming `op`."""
    result = fast(*args)
    got = [result] if isinstance(result, torch.Tensor) else list(result)
    where = f"node {op.name!r} ({op.type})"
    if len(got) != len(expected):
        raise GeExecutionError(f"{where}: the fast call returned {len(got)} outputs, the kernel {len(expected)}")
    input_storages = {_storage(a) for a in _tensors(args) if a.numel() > 0}
    for index, (want, have) in enumerate(zip(expected, got, strict=True)):
        problem = _difference(want, have, input_storages)
        if problem:
            raise GeExecutionError(f"{where} output {index}: the simulator's fast call differs from the kernel "
                                   f"({problem}); a bug in op_plugin/_simulator/interpreter/fast_calls: report "
                                   "it, and set OP_PLUGIN_NO_FAST_CALLS=1 to run the kernels meanwhile")


def _difference(want, have, input_storages: set) -> str:
    if not isinstance(have, torch.Tensor):
        return f"a {type(have).__name__}, not a tensor"
    for what, a, b in (("dtype", want.dtype, have.dtype), ("shape", want.shape, have.shape),
                       ("strides", _layout(want), _layout(have))):
        if a != b:
            return f"{what} {b} where the kernel gives {a}"
    if want.numel() and (_storage(want) in input_storages) != (_storage(have) in input_storages):
        return "memory shared with an input where the kernel's is not, or the reverse"
    if want.numel() and not torch.equal(_bits(want), _bits(have)):
        return "values differ"
    return ""


def _layout(tensor: torch.Tensor) -> tuple:
    """The strides that place elements: those of dims longer than 1 (a size-1 dim's stride is arbitrary)."""
    return tuple(stride for size, stride in zip(tensor.shape, tensor.stride(), strict=True) if size > 1)


def _bits(tensor: torch.Tensor) -> torch.Tensor:
    """The tensor's bytes (NaNs compare equal to themselves, -0.0 differs from 0.0)."""
    flat = tensor.detach().contiguous().reshape(-1)
    return flat if flat.dtype == torch.bool else flat.view(torch.uint8)


def _tensors(args):
    for arg in args:
        if isinstance(arg, torch.Tensor):
            yield arg
        elif isinstance(arg, (list, tuple)):
            yield from (a for a in arg if isinstance(a, torch.Tensor))


def _storage(tensor: torch.Tensor) -> int:
    return tensor.untyped_storage().data_ptr()


# The specialisers, by the kernel families they stand in for.
for _module in ("nn", "elementwise", "transformer", "indexing"):
    importlib.import_module(f"{__name__}.{_module}")

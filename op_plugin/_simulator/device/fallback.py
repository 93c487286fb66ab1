"""The boxed PrivateUse1 fallback: every aten op on npu tensors that the C++ part does not own.

`implementation_for(op)` is the one place deciding what runs an op on the virtual NPU. It consults
`GE_KERNELS` first (`ge_eager`: aten op -> the GE kernel TorchAir lowers it to, for the ops whose
torch_npu eager kernel and GE lowering are the same CANN kernel; docs/virtual-npu.md), so eager runs
the kernel a graph runs; every other op runs `run_on_cpu`: the CPU kernel on the same memory (the
storage is host memory, so an npu tensor is seen as a CPU tensor over its bytes, without a copy).

`run_on_cpu` refuses mixed devices as a real NPU does (an npu tensor with a non-scalar CPU tensor,
or tensors on two npu devices: "Expected all tensors to be on the same device"); an out= tensor is
resized first to the shape the op's Meta kernel gives (a CPU view of npu memory cannot grow); the
results go back as npu tensors: an input itself for an in-place or out= return, a view of an
input's storage when the CPU result aliases it, else the CPU result's own memory borrowed (no
copy, counted in `torch.npu.memory_allocated`).
"""
from __future__ import annotations

import functools
from typing import Callable

import torch
from torch.utils._pytree import tree_flatten, tree_map

_LIBRARY = None
# Ops that take CPU index tensors beside device tensors on a real device too.
_CPU_INDICES_ALLOWED = frozenset({"aten::index", "aten::index_put", "aten::index_put_", "aten::_index_put_impl_"})


def implementation_for(op: torch._ops.OpOverload) -> Callable:
    """What runs `op` on npu tensors: the GE kernel of `ge_eager.GE_KERNELS` where it has one, else the CPU
    kernel on the same memory."""
    from .ge_eager import GE_KERNELS  # imported on first dispatch: activation inside `import torch` stays small

    adapter = GE_KERNELS.get(op.name() + "." + op._overloadname)
    if adapter is not None:
        return functools.partial(run_adapter, adapter)
    return run_on_cpu


def _fallback(op, *args, **kwargs):
    return implementation_for(op)(op, args, kwargs)


def install(native) -> None:
    """Register the fallback for the PrivateUse1 key (once per process)."""
    global _LIBRARY, _NATIVE
    if _LIBRARY is not None:
        return
    _NATIVE = native
    _LIBRARY = torch.library.Library("_", "IMPL")  # kept for the process: dropping it unregisters
    _LIBRARY.fallback(_fallback, dispatch_key="PrivateUse1")
    _register_ge_kernels()


_ATEN_LIBRARY = None


def _register_ge_kernels() -> None:
    """A PrivateUse1 kernel for each op of `ge_eager.GE_KERNELS`, as torch_npu registers its own: without one
    the dispatcher decomposes the op before the fallback sees it (aten.layer_norm into batch_norm through
    native_layer_norm's CompositeImplicit kernel; aten.mm, gelu, _softmax into their .out overloads)."""
    global _ATEN_LIBRARY
    from .ge_eager import GE_KERNELS

    _ATEN_LIBRARY = torch.library.Library("aten", "IMPL")  # kept for the process
    for key in GE_KERNELS:
        name, overload = key.split("::", 1)[1].split(".")
        op = getattr(getattr(torch.ops.aten, name), overload)

        def kernel(*args, _op=op, **kwargs):
            return implementation_for(_op)(_op, args, kwargs)

        _ATEN_LIBRARY.impl(name if overload == "default" else f"{name}.{overload}", kernel, "PrivateUse1")


_NATIVE = None


def _is_npu(value) -> bool:
    return isinstance(value, torch.Tensor) and value.device.type == "npu"


def _device_of(op, args, kwargs) -> tuple[int, list[torch.Tensor]]:
    """The npu device index the op runs on and its npu tensor inputs; refuses mixed devices."""
    leaves, _ = tree_flatten((args, kwargs))
    npu = [leaf for leaf in leaves if _is_npu(leaf)]
    devices = {leaf.device for leaf in npu}
    if len(devices) > 1:
        first, second = sorted(devices, key=str)[:2]
        raise RuntimeError(f"Expected all tensors to be on the same device, but found at least two devices, "
                           f"{first} and {second}! ({op} on the virtual NPU)")
    if npu and op._schema.name not in _CPU_INDICES_ALLOWED:
        for leaf in leaves:
            if isinstance(leaf, torch.Tensor) and leaf.device.type == "cpu" and leaf.dim() > 0:
                raise RuntimeError(f"Expected all tensors to be on the same device, but found at least two "
                                   f"devices, {npu[0].device} and cpu! ({op} on the virtual NPU)")
    if npu:
        return npu[0].device.index, npu
    for leaf in leaves:
        if isinstance(leaf, torch.device) and leaf.type == "npu" and leaf.index is not None:
            return leaf.index, npu
    return _NATIVE.current_device(), npu


def _to_host(value):
    if _is_npu(value):
        return _NATIVE.cpu_alias(value)
    if isinstance(value, torch.device) and value.type == "npu":
        return torch.device("cpu")
    return value


def _to_meta(value):
    if isinstance(value, torch.Tensor):
        return torch.empty_strided(value.shape, value.stride(), dtype=value.dtype, device="meta")
    if isinstance(value, torch.device):
        return torch.device("meta")
    return value


def _resize_outs(op, args, kwargs) -> None:
    """Resize out= npu tensors to the shapes the op's Meta kernel gives them (as the op would)."""
    outs = [kwargs.get(a.name) for a in op._schema.arguments
            if a.kwarg_only and a.alias_info is not None and a.alias_info.is_write]
    leaves = [t for t in tree_flatten(outs)[0] if _is_npu(t)]
    if not leaves:
        return
    meta_args, meta_kwargs = tree_map(_to_meta, (args, kwargs))
    try:
        op(*meta_args, **meta_kwargs)
    except Exception:  # no Meta kernel: the CPU kernel refuses a wrong out= shape itself
        return
    meta_outs = [meta_kwargs.get(a.name) for a in op._schema.arguments
                 if a.kwarg_only and a.alias_info is not None and a.alias_info.is_write]
    metas = [t for t in tree_flatten(meta_outs)[0] if isinstance(t, torch.Tensor)]
    for real, meta in zip(leaves, metas, strict=False):
        if real.shape != meta.shape:
            real.resize_(meta.shape)


def _run_with_host_outs(op, kwargs, host_args, host_kwargs):
    """An out= kernel that resizes its out beyond the final shape on the way (mse_loss.out does): run it into
    fresh CPU outs, then resize the npu outs and copy the results in."""
    names = [a.name for a in op._schema.arguments
             if a.kwarg_only and a.alias_info is not None and a.alias_info.is_write and a.name in kwargs]

    def fresh(value):
        return torch.empty(0, dtype=value.dtype) if isinstance(value, torch.Tensor) else value

    for name in names:
        host_kwargs[name] = tree_map(fresh, kwargs[name])
    op(*host_args, **host_kwargs)
    for name in names:
        for real, host in zip(tree_flatten(kwargs[name])[0], tree_flatten(host_kwargs[name])[0], strict=True):
            if _is_npu(real):
                if real.shape != host.shape:
                    real.resize_(host.shape)
                real.copy_(host)
    return tuple(kwargs[name] for name in names)


def run_adapter(adapter: Callable, op, args, kwargs):
    """Run `adapter(*args, **kwargs)` (a GE kernel call) on CPU views of the npu tensors' memory; its CPU
    results go back as npu tensors (borrowed memory, or a view of an input's storage when they alias one).
    An adapter answering `ge_eager.DECLINE` leaves the op to `run_on_cpu`. Also used for torch_npu's own ops
    (`torch.ops.npu.*`), whose eager kernels are adapters over GE kernels."""
    device, npu_inputs = _device_of(op, args, kwargs)
    host_args, host_kwargs = tree_map(_to_host, (args, kwargs))
    from .ge_eager import DECLINE

    result = adapter(*host_args, **host_kwargs)
    if result is DECLINE:
        return run_on_cpu(op, args, kwargs)
    return _hand_back(result, device, npu_inputs)


def _hand_back(result, device: int, npu_inputs):
    def back(value):
        if isinstance(value, torch.Tensor) and value.device.type == "cpu":
            return _NATIVE.to_npu(value, npu_inputs, device)
        return value

    return tree_map(back, result)


def run_on_cpu(op, args, kwargs):
    """Run `op`'s CPU kernel over the npu tensors' own memory; results as npu tensors."""
    device, npu_inputs = _device_of(op, args, kwargs)
    schema = op._schema
    has_out = any(a.kwarg_only and a.alias_info is not None and a.alias_info.is_write for a in schema.arguments)
    if has_out:
        _resize_outs(op, args, kwargs)
    host_args, host_kwargs = tree_map(_to_host, (args, kwargs))
    try:
        result = op(*host_args, **host_kwargs)
    except RuntimeError as error:
        # An out= kernel that uses its out as scratch (mse_loss.out) cannot grow a view of npu memory;
        # it runs again into fresh CPU outs. (Its resize warning, buffered by torch's C++ side, still shows.)
        if not has_out or "not resizable" not in str(error):
            raise
        result = _run_with_host_outs(op, kwargs, host_args, host_kwargs)

    written = {}
    for index, argument in enumerate(schema.arguments):
        if argument.alias_info is not None and argument.alias_info.is_write:
            value = kwargs.get(argument.name) if argument.kwarg_only or index >= len(args) else args[index]
            written[frozenset(argument.alias_info.before_set)] = value

    def back(value):
        if isinstance(value, torch.Tensor) and value.device.type == "cpu":
            return _NATIVE.to_npu(value, npu_inputs, device)
        return value

    returns = schema.returns
    if not returns:
        return result
    if len(returns) == 1:
        result = (result,)
    converted = []
    for declared, value in zip(returns, result, strict=True):
        alias = declared.alias_info
        if alias is not None and alias.is_write and frozenset(alias.before_set) in written:
            converted.append(written[frozenset(alias.before_set)])
        else:
            converted.append(tree_map(back, value))
    return converted[0] if len(returns) == 1 else tuple(converted)


_NPU_LIBRARY = None


def register_npu_ops() -> None:
    """A PrivateUse1 kernel for each torch_npu op (`torch.ops.npu.*`) with an eager kernel (`npu.ops.CPU_KERNELS`:
    adapters over GE kernels): the same adapter, run by `run_on_cpu` on CPU views of the npu tensors' memory,
    results handed back as npu tensors (in-place and out= results are the npu inputs themselves). Ops that
    op_plugin did not define (the wheel missing) are skipped. Once per process."""
    global _NPU_LIBRARY
    if _NPU_LIBRARY is not None:
        return
    from ..npu import ops as npu_ops

    _NPU_LIBRARY = torch.library.Library(npu_ops.NAMESPACE, "IMPL")  # kept for the process
    for name in npu_ops.CPU_KERNELS:
        base, _, overload = name.partition(".")
        try:
            torch._C._dispatch_find_schema_or_throw(f"{npu_ops.NAMESPACE}::{base}", overload)
        except RuntimeError:
            continue
        op = npu_ops.overload_of(name)

        def kernel(*args, _op=op, **kwargs):
            return run_on_cpu(_op, args, kwargs)

        _NPU_LIBRARY.impl(name, kernel, "PrivateUse1")

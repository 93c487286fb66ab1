"""What runs an aten op on npu tensors, from Python: the GE-kernel ops' kernels and the bridge to the C++ part.

Every aten op without a kernel of its own goes through the C++ boxed fallback (`csrc/cpu_fallback.cpp`): its CPU
kernel on the same memory (the storage is host memory, so an npu tensor is seen as a CPU tensor over its bytes,
without a copy), mixed devices refused as a real NPU refuses them, results handed back as npu tensors (an input
itself for an in-place or out= return, a view of an input's storage when the CPU result aliases it, else the CPU
result's own memory borrowed, counted in `torch.npu.memory_allocated`).

The ops of `ge_eager.GE_KERNELS` (whose torch_npu eager kernel and GE lowering are the same CANN kernel) get
PrivateUse1 kernels here (`_register_ge_kernels`); `implementation_for(op)` is the one place deciding what
runs them: the GE kernel a graph runs (`run_adapter`), or, for inputs the GE kernel does not take,
`run_on_cpu` (the C++ fallback, called from Python). torch_npu's own ops get kernels too
(`register_npu_ops`): their CPU kernels, adapters over GE kernels, run by `run_on_cpu` on the npu memory.
"""
from __future__ import annotations

import functools
from typing import Callable

import torch

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


def install(native) -> None:
    """Bind the loaded C++ part, whose boxed fallback (csrc/cpu_fallback.cpp) runs every aten op without a
    kernel of its own, and register the GE-kernel ops' kernels (once per process)."""
    global _NATIVE
    if _NATIVE is not None:
        return
    _NATIVE = native
    _register_ge_kernels()


_ATEN_LIBRARY = None

def _register_ge_kernels() -> None:
    """A PrivateUse1 kernel for each op of `ge_eager.GE_KERNELS`, as torch_npu registers its own: without one
    the dispatcher decomposes the op before the fallback sees it (aten.layer_norm into batch_norm through
    native_layer_norm's CompositeImplicit kernel; aten.mm, gelu, _softmax into their .out overloads)."""
    global _ATEN_LIBRARY, _DECLINE
    from .ge_eager import DECLINE, GE_KERNELS

    _DECLINE = DECLINE

    _ATEN_LIBRARY = torch.library.Library("aten", "IMPL")  # kept for the process
    for key in GE_KERNELS:
        name, overload = key.split("::", 1)[1].split(".")
        op = getattr(getattr(torch.ops.aten, name), overload)
        _ATEN_LIBRARY.impl(name if overload == "default" else f"{name}.{overload}", _kernel(op), "PrivateUse1")


def _kernel(op):
    """op's PrivateUse1 kernel: what `implementation_for` decides, decided once."""
    run = implementation_for(op)

    def kernel(*args, **kwargs):
        return run(op, args, kwargs)

    return kernel


_NATIVE = None
_DECLINE = None  # ge_eager.DECLINE, bound at install: ge_eager loads with the first kernel registration


_CPU = torch.device("cpu")


class _Hosted:
    """One call's arguments as the CPU sees them (npu tensors as CPU views of their memory, an npu device as the
    CPU), the npu inputs and the device the call runs on; mixed devices refused as a real NPU refuses them. One
    pass over the arguments (tensors, and tensors inside lists: aten's argument shapes)."""

    __slots__ = ("args", "kwargs", "npu", "device", "_cpu_array", "_device_arg")

    def __init__(self, op, args, kwargs):
        self.npu: list[torch.Tensor] = []
        self._cpu_array = False
        self._device_arg = None
        self.args = [self._host(value) for value in args]
        self.kwargs = {name: self._host(value) for name, value in kwargs.items()} if kwargs else {}
        self.device = self._place(op)

    def _host(self, value):
        if isinstance(value, torch.Tensor):
            if value.device.type == "npu":
                self.npu.append(value)
                return _NATIVE.cpu_alias(value)
            if value.dim() > 0 and value.device.type == "cpu":
                self._cpu_array = True
            return value
        if isinstance(value, (list, tuple)) and any(isinstance(item, (torch.Tensor, list, tuple)) for item in value):
            return type(value)(self._host(item) for item in value)
        if isinstance(value, torch.device) and value.type == "npu":
            self._device_arg = value
            return _CPU
        return value

    def _place(self, op) -> int:
        if not self.npu:
            if self._device_arg is not None and self._device_arg.index is not None:
                return self._device_arg.index
            return _NATIVE.current_device()
        first = self.npu[0].device
        other = next((t.device for t in self.npu if t.device != first), None)
        if other is not None:
            low, high = sorted((first, other), key=str)
            raise RuntimeError(f"Expected all tensors to be on the same device, but found at least two devices, "
                               f"{low} and {high}! ({op} on the virtual NPU)")
        if self._cpu_array and op._schema.name not in _CPU_INDICES_ALLOWED:
            raise RuntimeError(f"Expected all tensors to be on the same device, but found at least two devices, "
                               f"{first} and cpu! ({op} on the virtual NPU)")
        return first.index

    def hand_back(self, result):
        """A GE kernel's CPU results as npu tensors (its memory borrowed, or a view of an npu input's storage
        when a result aliases one)."""
        if isinstance(result, torch.Tensor):
            return _NATIVE.to_npu(result, self.npu, self.device) if result.device.type == "cpu" else result
        if isinstance(result, (list, tuple)):
            return type(result)(self.hand_back(item) for item in result)
        return result


def run_adapter(adapter: Callable, op, args, kwargs):
    """Run `adapter(*args, **kwargs)` (a GE kernel call) on CPU views of the npu tensors' memory; its CPU
    results go back as npu tensors (borrowed memory, or a view of an input's storage when they alias one).
    An adapter answering `ge_eager.DECLINE` leaves the op to `run_on_cpu`."""
    hosted = _Hosted(op, args, kwargs)
    result = adapter(*hosted.args, **hosted.kwargs)
    if result is _DECLINE:
        return run_on_cpu(op, args, kwargs)
    return hosted.hand_back(result)


def run_on_cpu(op, args, kwargs):
    """`op`'s CPU kernel on the npu tensors' own memory, results as npu tensors: the C++ boxed fallback
    (csrc/cpu_fallback.cpp), called from Python for an op whose Python kernel hands an input back (a GE adapter
    declining it) and for torch_npu's ops, whose CPU kernels are Python adapters."""
    return _NATIVE.run_on_cpu(op._schema.name, op._schema.overload_name, *args, **kwargs)


def as_handed_back(tensor: torch.Tensor) -> torch.Tensor:
    """What the C++ fallback hands back for a CPU result over the memory of `tensor`, an npu tensor passed inside a
    tensor list (torch_npu's `Tensor[] out`): an npu tensor borrowing that memory (the fallback matches a result
    to an input's storage only for tensor arguments, not list members)."""
    return _NATIVE.to_npu(_NATIVE.cpu_alias(tensor), [], tensor.device.index)


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

"""The eager NPU kernel of an op that declares `aclnn: {function, library}`.

Registered at the PrivateUse1 (NPU) key, so on an Ascend host NPU tensors reach it instead of the
reference kernel (CompositeExplicitAutograd); CPU tensors never do. A call:

1. binds the arguments (`binding.bind`) and allocates the returns from the op's Meta function on
   the inputs' device (an in-place op writes its mutated arguments);
2. builds the aclnn arguments in the order msOpGen gives the op's aclnn API: the GE inputs, the GE
   attrs, then the GE outputs (the schema's order for an op without `ge:`): tensors as aclTensor
   (view sizes, strides, storage offset, storage dims, base address), `Tensor[]` as aclTensorList,
   int/float/bool lists as aclIntArray/aclFloatArray/aclBoolArray, Scalar as aclScalar, int as
   int64, float as double, bool as bool, str as char*, ScalarType as its aclDataType, None as NULL;
3. calls `<function>GetWorkspaceSize`, allocates the workspace through torch on the device, calls
   `<function>` on the current NPU stream, and destroys every handle it made.

Everything device-specific goes through `Runtime` (the current stream, the workspace, the
libraries), which tests replace to run the binding against a stub library on host memory. On the
virtual NPU (no CANN) the kernel runs the op's reference kernel instead (`on_a_device_without_cann`).
"""
from __future__ import annotations

import ctypes
import functools
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field

import torch

from .._spec.model import OpSpec
from .._spec.schema import ArgKind
from .aclnn_abi import ACL_DTYPES, AclApi, AclnnError, CallHandles, load_library, two_phase_call
from .binding import bind


@dataclass
class Runtime:
    """Where aclnn calls go. The default is an Ascend host's: CANN's libraries, torch_npu's current
    stream, workspaces from torch's NPU allocator."""

    api_libraries: tuple[str, ...] = ("libnnopbase.so", "libascendcl.so")
    _loaded: dict = field(default_factory=dict)

    def stream(self, device: torch.device) -> ctypes.c_void_p:
        return ctypes.c_void_p(torch.npu.current_stream(device).npu_stream)

    def workspace(self, size: int, device: torch.device) -> torch.Tensor | None:
        return torch.empty(size, dtype=torch.uint8, device=device) if size else None

    def library(self, name: str) -> ctypes.CDLL:
        if name not in self._loaded:
            self._loaded[name] = load_library(name, "the op's aclnn API")
        return self._loaded[name]

    @functools.cached_property
    def api(self) -> AclApi:
        return AclApi([load_library(name, "aclCreateTensor & co.") for name in self.api_libraries])


_runtime = Runtime()
# The virtual NPU (op_plugin._simulator.device) has no CANN, so no op's aclnn library: there an op's NPU kernel is
# its reference kernel on the device's memory. Set by the device.
_device_without_cann: str | None = None


def on_a_device_without_cann(name: str) -> None:
    """Make every op's NPU kernel run its reference kernel (`name`: the device, said in errors): the virtual
    NPU's `activate()` calls this; an Ascend host never does, and there NPU tensors reach the aclnn API."""
    global _device_without_cann
    _device_without_cann = name


def set_runtime(runtime: Runtime) -> Runtime:
    """Replace where aclnn calls go (tests); returns the previous runtime."""
    global _runtime
    previous, _runtime = _runtime, runtime
    return previous


def aclnn_kernel(spec: OpSpec, reference_kernel: Callable):
    """The PrivateUse1 kernel of `spec`, which declares `aclnn:`; on a device without CANN it calls
    `reference_kernel` (the op's CompositeExplicitAutograd kernel) instead."""
    where = f"{spec.qualname} ({spec.aclnn.function} from {spec.aclnn.library})"

    def kernel(*args, **kwargs):
        if _device_without_cann is not None:
            return reference_kernel(*args, **kwargs)
        args, kwargs, bound = bind(spec, args, kwargs)
        device = next(t.device for t in _tensors(bound.values()))
        outputs, returned = _outputs(spec, args, kwargs, bound, device)
        runtime = _runtime
        library = runtime.library(spec.aclnn.library)
        with ExitStack() as stack:
            handles = CallHandles(runtime.api, stack)
            arguments = [_convert(handles, spec.schema.arg(name).kind, value) for name, value in _inputs(spec, bound)]
            arguments += [handles.tensor(t) for t in outputs]
            two_phase_call(runtime.api, library, spec.aclnn.function, arguments,
                           lambda size: runtime.workspace(size, device), runtime.stream(device), where)
        return returned

    kernel.__name__ = f"{spec.name}_aclnn_kernel"
    return kernel


def _tensors(values):
    for value in values:
        if isinstance(value, torch.Tensor):
            yield value
        elif isinstance(value, (list, tuple)):
            yield from (v for v in value if isinstance(v, torch.Tensor))


def _inputs(spec: OpSpec, bound: dict) -> list[tuple[str, object]]:
    if spec.ge is None:
        return [(arg.name, bound.get(arg.name)) for arg in spec.schema.args]
    names = [i.arg for i in spec.ge.inputs] + [a.arg for a in spec.ge.attrs if a.arg is not None]
    return [(name, bound.get(name)) for name in names]


def _outputs(spec: OpSpec, args, kwargs, bound, device) -> tuple[list[torch.Tensor], object]:
    """The output tensors the API writes, and what the op returns."""
    schema = spec.schema
    mutated = [bound[a.name] for a in schema.args if a.mutated]
    if not schema.returns:
        return mutated, None
    if all(r.alias_set for r in schema.returns):
        returned = [bound[schema.aliased_arg(r).name] for r in schema.returns]
    else:  # shapes and dtypes from the op's Meta function, the allocation on the device
        meta = getattr(getattr(torch.ops, spec.namespace), spec.name)
        meta = getattr(meta, schema.overload or "default")
        to_meta = lambda v: v.to("meta") if isinstance(v, torch.Tensor) else v  # noqa: E731
        result = meta(*torch.utils._pytree.tree_map(to_meta, args), **torch.utils._pytree.tree_map(to_meta, kwargs))
        results = list(result) if isinstance(result, (tuple, list)) else [result]
        returned = [torch.empty(r.shape, dtype=r.dtype, device=device) for r in results]
    written = returned + [t for t in mutated if not any(t is r for r in returned)]
    return written, (returned[0] if len(returned) == 1 else tuple(returned))


def _convert(handles: CallHandles, kind: ArgKind, value):
    if value is None:
        return ctypes.c_void_p(None)
    if kind in (ArgKind.TENSOR, ArgKind.OPTIONAL_TENSOR):
        return handles.tensor(value)
    if kind is ArgKind.TENSOR_LIST:
        return handles.tensor_list(list(value))
    if kind is ArgKind.SCALAR:
        return handles.scalar(value)
    if kind is ArgKind.INT_LIST:
        return handles.int_array(list(value))
    if kind is ArgKind.FLOAT_LIST:
        return handles.float_array(list(value))
    if kind is ArgKind.BOOL_LIST:
        return handles.bool_array(list(value))
    if kind is ArgKind.SCALAR_TYPE:
        return ctypes.c_int(ACL_DTYPES[value])
    if kind is ArgKind.BOOL:
        return ctypes.c_bool(value)
    if kind is ArgKind.INT:
        return ctypes.c_int64(value)
    if kind is ArgKind.FLOAT:
        return ctypes.c_double(value)
    if kind is ArgKind.STR:
        return ctypes.c_char_p(value.encode())
    raise AclnnError(f"an argument of kind {kind.value} has no aclnn form")

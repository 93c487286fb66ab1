"""The aclnn C ABI through ctypes: the handle constructors and destructors, the dtype and format
enums, and the two-phase call of one aclnn API.

Signatures are those of torch_npu's `op_api_common_base.h` (`_aclCreateTensor` & co.) and
`acl/acl_rt.h` (`aclGetRecentErrMsg`); enum values those of `acl/acl_base_rt.h` (tests compile
static_asserts against the wheel's headers). Every handle made for a call is destroyed when the
call ends, also when a status is non-zero.
"""
from __future__ import annotations

import ctypes
from contextlib import ExitStack

import torch

from .._base.errors import OpPluginError

# aclDataType (acl/acl_base_rt.h): the values ACL_FLOAT .. ACL_BF16 by torch dtype.
ACL_DTYPES = {
    torch.float32: 0, torch.float16: 1, torch.int8: 2, torch.int32: 3, torch.uint8: 4, torch.int16: 6,
    torch.uint16: 7, torch.uint32: 8, torch.int64: 9, torch.uint64: 10, torch.float64: 11, torch.bool: 12,
    torch.complex64: 16, torch.complex128: 17, torch.bfloat16: 27,
}
ACL_FORMAT_ND = 2  # aclFormat: a plain row-major tensor (torch's layout; private NPU formats are not made here)

_I64P = ctypes.POINTER(ctypes.c_int64)
# name: (restype, argtypes), as declared in op_api_common_base.h / acl_rt.h
_SIGNATURES = {
    "aclCreateTensor": (ctypes.c_void_p, [_I64P, ctypes.c_uint64, ctypes.c_int, _I64P, ctypes.c_int64, ctypes.c_int,
                                          _I64P, ctypes.c_uint64, ctypes.c_void_p]),
    "aclCreateScalar": (ctypes.c_void_p, [ctypes.c_void_p, ctypes.c_int]),
    "aclCreateIntArray": (ctypes.c_void_p, [_I64P, ctypes.c_uint64]),
    "aclCreateFloatArray": (ctypes.c_void_p, [ctypes.POINTER(ctypes.c_float), ctypes.c_uint64]),
    "aclCreateBoolArray": (ctypes.c_void_p, [ctypes.POINTER(ctypes.c_bool), ctypes.c_uint64]),
    "aclCreateTensorList": (ctypes.c_void_p, [ctypes.POINTER(ctypes.c_void_p), ctypes.c_uint64]),
    "aclDestroyTensor": (ctypes.c_int, [ctypes.c_void_p]),
    "aclDestroyScalar": (ctypes.c_int, [ctypes.c_void_p]),
    "aclDestroyIntArray": (ctypes.c_int, [ctypes.c_void_p]),
    "aclDestroyFloatArray": (ctypes.c_int, [ctypes.c_void_p]),
    "aclDestroyBoolArray": (ctypes.c_int, [ctypes.c_void_p]),
    "aclDestroyTensorList": (ctypes.c_int, [ctypes.c_void_p]),
    "aclGetRecentErrMsg": (ctypes.c_char_p, []),
}


class AclnnError(OpPluginError):
    """An aclnn call failed (library or symbol missing, or a non-zero status)."""


def load_library(name: str, purpose: str) -> ctypes.CDLL:
    try:
        return ctypes.CDLL(name)
    except OSError as error:
        raise AclnnError(f"cannot load {name} ({purpose}): {error}. On an Ascend host, source CANN's set_env.sh "
                         "and install the op package that builds it; op_plugin never falls back to the Python "
                         "reference kernel for an op that declares `aclnn:`") from None


class AclApi:
    """aclCreate*/aclDestroy* and aclGetRecentErrMsg, from the libraries that export them
    (CANN: libnnopbase.so and libascendcl.so)."""

    def __init__(self, libraries: list[ctypes.CDLL]):
        for name, (restype, argtypes) in _SIGNATURES.items():
            fn = _symbol(libraries, name)
            fn.restype, fn.argtypes = restype, argtypes
            setattr(self, name, fn)

    def recent_error(self) -> str:
        message = self.aclGetRecentErrMsg()
        return message.decode(errors="replace") if message else "(no message from aclGetRecentErrMsg)"


def _symbol(libraries, name):
    for library in libraries:
        try:
            return getattr(library, name)
        except AttributeError:
            continue
    raise AclnnError(f"none of {[lib._name for lib in libraries]} exports {name}")


def _int64s(values) -> ctypes.Array:
    return (ctypes.c_int64 * max(len(values), 1))(*values)


class CallHandles:
    """The aclTensor/aclScalar/... handles of one call, destroyed (in reverse) when it ends."""

    def __init__(self, api: AclApi, stack: ExitStack):
        self.api, self.stack, self.keep = api, stack, []

    def _owned(self, handle, destroy: str, what: str):
        if not handle:
            raise AclnnError(f"{what} returned NULL: {self.api.recent_error()}")
        self.stack.callback(getattr(self.api, destroy), handle)
        return ctypes.c_void_p(handle)

    def tensor(self, t: torch.Tensor):
        """aclCreateTensor as torch_npu's ConvertType does: view sizes and strides, the storage offset,
        the storage's dims and its base address (not data_ptr, which already includes the offset)."""
        if t.dtype not in ACL_DTYPES:
            raise AclnnError(f"dtype {t.dtype} has no aclDataType")
        sizes, strides = _int64s(list(t.shape)), _int64s(list(t.stride()))
        storage = [t.untyped_storage().nbytes() // t.element_size()]
        storage_dims = _int64s(storage)
        self.keep += [sizes, strides, storage_dims]
        handle = self.api.aclCreateTensor(sizes, t.dim(), ACL_DTYPES[t.dtype], strides, t.storage_offset(),
                                          ACL_FORMAT_ND, storage_dims, len(storage),
                                          ctypes.c_void_p(t.untyped_storage().data_ptr()))
        return self._owned(handle, "aclDestroyTensor", "aclCreateTensor")

    def tensor_list(self, tensors):
        handles = (ctypes.c_void_p * max(len(tensors), 1))(*[self.tensor(t).value for t in tensors])
        self.keep.append(handles)
        return self._owned(self.api.aclCreateTensorList(handles, len(tensors)), "aclDestroyTensorList",
                           "aclCreateTensorList")

    def scalar(self, value):
        """aclCreateScalar of a Python number: a double for floats, an int64 for ints, a bool for bools."""
        if isinstance(value, bool):
            box, dtype = ctypes.c_bool(value), ACL_DTYPES[torch.bool]
        elif isinstance(value, int):
            box, dtype = ctypes.c_int64(value), ACL_DTYPES[torch.int64]
        else:
            box, dtype = ctypes.c_double(float(value)), ACL_DTYPES[torch.float64]
        self.keep.append(box)
        return self._owned(self.api.aclCreateScalar(ctypes.cast(ctypes.pointer(box), ctypes.c_void_p), dtype),
                           "aclDestroyScalar", "aclCreateScalar")

    def int_array(self, values):
        array = _int64s(list(values))
        self.keep.append(array)
        return self._owned(self.api.aclCreateIntArray(array, len(values)), "aclDestroyIntArray", "aclCreateIntArray")

    def float_array(self, values):
        array = (ctypes.c_float * max(len(values), 1))(*values)
        self.keep.append(array)
        return self._owned(self.api.aclCreateFloatArray(array, len(values)), "aclDestroyFloatArray",
                           "aclCreateFloatArray")

    def bool_array(self, values):
        array = (ctypes.c_bool * max(len(values), 1))(*values)
        self.keep.append(array)
        return self._owned(self.api.aclCreateBoolArray(array, len(values)), "aclDestroyBoolArray",
                           "aclCreateBoolArray")


def two_phase_call(api: AclApi, library: ctypes.CDLL, function: str, arguments: list, workspace, stream,
                   where: str) -> None:
    """`<function>GetWorkspaceSize(*arguments, &size, &executor)`, then `<function>(workspace(size),
    size, executor, stream)`; a non-zero status raises with aclGetRecentErrMsg's text."""
    try:
        get_size, run = getattr(library, function + "GetWorkspaceSize"), getattr(library, function)
    except AttributeError as error:
        raise AclnnError(f"{where}: {library._name} does not export {error.args[0].split(' ')[-1]} "
                         f"({function}GetWorkspaceSize and {function} are both needed)") from None
    get_size.restype = run.restype = ctypes.c_int
    size, executor = ctypes.c_uint64(0), ctypes.c_void_p()
    status = get_size(*arguments, ctypes.byref(size), ctypes.byref(executor))
    if status != 0:
        raise AclnnError(f"{where}: {function}GetWorkspaceSize returned {status}: {api.recent_error()}")
    buffer = workspace(size.value)
    address = ctypes.c_void_p(buffer.data_ptr() if buffer is not None and size.value else None)
    run.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_void_p, ctypes.c_void_p]
    status = run(address, size.value, executor, stream)
    if status != 0:
        raise AclnnError(f"{where}: {function} returned {status}: {api.recent_error()}")

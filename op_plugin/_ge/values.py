"""GE dtypes, tensor values and attributes, decoded into torch and Python values.

GE has two dtype numberings, both used in a GraphDef:

* the **GE enum** (``ge::DataType``; ``torchair.ge.DataType``): DT_FLOAT = 0, DT_FLOAT16 = 1, ...
  Used in attributes: ``Cast.dst_type``, ``Shape.dtype``, the graph attr ``_output_dtypes``,
  and ``AttrDef.dt`` values.
* the **protobuf enum** (``ge_ir.proto`` ``DataType``): DT_UNDEFINED = 0, DT_FLOAT = 1, ...
  Used in every ``TensorDescriptor.dtype`` (input/output descs, Const values).

Both tables below were checked against TorchAir's own (``torchair/ge/_ge_graph.py``:
``DataType``, ``_ge_dtype_to_ge_proto_dtype``) and the generated ``ge_ir_pb2`` enum.
"""

from __future__ import annotations

import re
from typing import NamedTuple

import torch

# One row per dtype: (torch dtype, ge::DataType number (GE enum), ge_ir.proto DataType number).
_DTYPE_NUMBERS = (
    (torch.float32, 0, 1), (torch.float16, 1, 2), (torch.int8, 2, 3), (torch.int32, 3, 7),
    (torch.uint8, 4, 4), (torch.int16, 6, 5), (torch.uint16, 7, 6), (torch.uint32, 8, 9),
    (torch.int64, 9, 8), (torch.uint64, 10, 10), (torch.float64, 11, 12), (torch.bool, 12, 11),
    (torch.complex64, 16, 16), (torch.complex128, 17, 17), (torch.bfloat16, 27, 27), (torch.complex32, 33, 32),
    # fp8 (CANN's casts to them: op_plugin/_simulator/npu/formats.py); DT_INT4 as torch.int4, one value per
    # byte (GE packs two per byte: Bitcast to a wider type packs the nibbles, kernels/shape.py)
    (torch.float8_e5m2, 35, 34), (torch.float8_e4m3fn, 36, 35), (torch.int4, 29, 28),
    # MX formats, as TorchAir maps them (torchair/ge/_ge_graph.py): the e8m0 block scale, and DT_FLOAT4_E2M1 carried
    # as torch.float4_e2m1fn_x2 holding ONE code per byte in its low nibble (GE shapes count elements; Bitcast to
    # uint8 packs two per byte). DT_FLOAT4_E1M2 has no torch dtype to carry it: refused by name.
    (torch.float8_e8m0fnu, 37, 36), (torch.float4_e2m1fn_x2, 40, 39),
)
# ge::DataType enumerator names (include/graph/types.h), by torch dtype: C++ code names a dtype this way.
TORCH_TO_GE_NAME = {
    torch.float32: "DT_FLOAT", torch.float16: "DT_FLOAT16", torch.int8: "DT_INT8", torch.int32: "DT_INT32",
    torch.uint8: "DT_UINT8", torch.int16: "DT_INT16", torch.uint16: "DT_UINT16", torch.uint32: "DT_UINT32",
    torch.int64: "DT_INT64", torch.uint64: "DT_UINT64", torch.float64: "DT_DOUBLE", torch.bool: "DT_BOOL",
    torch.complex64: "DT_COMPLEX64", torch.complex128: "DT_COMPLEX128", torch.bfloat16: "DT_BF16",
    torch.complex32: "DT_COMPLEX32", torch.float8_e5m2: "DT_FLOAT8_E5M2", torch.float8_e4m3fn: "DT_FLOAT8_E4M3FN",
    torch.int4: "DT_INT4", torch.float8_e8m0fnu: "DT_FLOAT8_E8M0", torch.float4_e2m1fn_x2: "DT_FLOAT4_E2M1",
}
GE_TO_TORCH = {ge: dtype for dtype, ge, _ in _DTYPE_NUMBERS}
TORCH_TO_GE = {dtype: ge for dtype, ge, _ in _DTYPE_NUMBERS}
PROTO_TO_TORCH = {proto: dtype for dtype, _, proto in _DTYPE_NUMBERS}
TORCH_TO_PROTO = {dtype: proto for dtype, _, proto in _DTYPE_NUMBERS}
PROTO_DT_UNDEFINED = 0
PROTO_DT_FLOAT = 1

# Every dtype name of the protobuf enum (ge_ir.proto DataType, TorchAir's ge_ir_pb2), so a dtype with no torch
# counterpart here (DT_FLOAT4_E1M2 = 40 from npu_dynamic_mx_quant's dst_type 297, DT_HIFLOAT8 ...) is named.
PROTO_DTYPE_NAMES = dict(enumerate((
    "DT_UNDEFINED", "DT_FLOAT", "DT_FLOAT16", "DT_INT8", "DT_UINT8", "DT_INT16", "DT_UINT16", "DT_INT32",
    "DT_INT64", "DT_UINT32", "DT_UINT64", "DT_BOOL", "DT_DOUBLE", "DT_STRING", "DT_DUAL_SUB_INT8",
    "DT_DUAL_SUB_UINT8", "DT_COMPLEX64", "DT_COMPLEX128", "DT_QINT8", "DT_QINT16", "DT_QINT32", "DT_QUINT8",
    "DT_QUINT16", "DT_RESOURCE", "DT_STRING_REF", "DT_DUAL", "DT_VARIANT", "DT_BF16", "DT_INT4", "DT_UINT1",
    "DT_INT2", "DT_UINT2", "DT_COMPLEX32", "DT_HIFLOAT8", "DT_FLOAT8_E5M2", "DT_FLOAT8_E4M3FN", "DT_FLOAT8_E8M0",
    "DT_FLOAT6_E3M2", "DT_FLOAT6_E2M3", "DT_FLOAT4_E2M1", "DT_FLOAT4_E1M2", "DT_HIFLOAT4")))
# The GE enum's names (torchair.ge.DataType) of the dtypes with no torch dtype in _DTYPE_NUMBERS.
GE_DTYPE_NAMES = {
    13: "DT_STRING", 14: "DT_DUAL_SUB_INT8", 15: "DT_DUAL_SUB_UINT8", 18: "DT_QINT8", 19: "DT_QINT16",
    20: "DT_QINT32", 21: "DT_QUINT8", 22: "DT_QUINT16", 23: "DT_RESOURCE", 24: "DT_STRING_REF", 25: "DT_DUAL",
    26: "DT_VARIANT", 28: "DT_UNDEFINED", 30: "DT_UINT1", 31: "DT_INT2", 32: "DT_UINT2",
    34: "DT_HIFLOAT8", 38: "DT_FLOAT6_E3M2", 39: "DT_FLOAT6_E2M3", 41: "DT_FLOAT4_E1M2", 42: "DT_HIFLOAT4",
}


class UnsupportedGeDtype(ValueError):
    """A GE dtype (a number of either enum) that has no torch dtype on the simulator; the message
    names it. Callers that know the node add its name (the executor raises GeExecutionError)."""


UNKNOWN_DIM = -1  # one dimension of unknown size
UNKNOWN_RANK = -2  # a shape [-2]: rank and sizes unknown


def ge_dtype_to_torch(number: int, where: str = "") -> torch.dtype:
    """A GE-enum dtype number (Cast.dst_type, _output_dtypes...) as a torch dtype."""
    try:
        return GE_TO_TORCH[int(number)]
    except KeyError:
        name = GE_DTYPE_NAMES.get(int(number), "not a GE dtype")
        raise UnsupportedGeDtype(f"{where}unsupported GE dtype {name} (number {number} of the GE enum, DT_FLOAT = 0): "
                                 "the simulator has no torch dtype for it") from None


def proto_dtype_to_torch(number: int, where: str = "") -> torch.dtype:
    """A protobuf-enum dtype number (TensorDescriptor.dtype) as a torch dtype."""
    try:
        return PROTO_TO_TORCH[int(number)]
    except KeyError:
        name = PROTO_DTYPE_NAMES.get(int(number), "not a GE dtype")
        raise UnsupportedGeDtype(f"{where}unsupported GE tensor dtype {name} (number {number} of the protobuf enum, "
                                 "DT_FLOAT = 1): the simulator has no torch dtype for it") from None


def proto_dtype_name(number: int) -> str:
    dtype = PROTO_TO_TORCH.get(int(number))
    if dtype is not None:
        return str(dtype).replace("torch.", "")
    return PROTO_DTYPE_NAMES.get(int(number), f"proto dtype {number}")


def decode_tensor_def(tensor_def, where: str = "") -> torch.Tensor:
    """A TensorDef (Const value, tensor attr) as a CPU tensor.

    TorchAir writes the tensor's raw storage bytes (little-endian, contiguous) into ``data``.
    """
    dtype = proto_dtype_to_torch(tensor_def.desc.dtype, where)
    if dtype == torch.float4_e2m1fn_x2:  # GE packs two per byte; the simulator carries one code per byte
        raise UnsupportedGeDtype(f"{where}a DT_FLOAT4_E2M1 constant (two values per byte) is not decoded")
    shape = [int(dim) for dim in tensor_def.desc.shape.dim]
    numel = 1
    for dim in shape:
        if dim < 0:
            raise ValueError(f"{where}constant with unknown dimension in shape {shape}")
        numel *= dim
    item_size = torch.empty((), dtype=dtype).element_size()
    data = bytes(tensor_def.data)
    if len(data) != numel * item_size:
        raise ValueError(
            f"{where}constant of shape {shape} and dtype {dtype} needs {numel * item_size} bytes, "
            f"its data holds {len(data)}"
        )
    if numel == 0:
        return torch.empty(shape, dtype=dtype)
    flat = torch.frombuffer(bytearray(data), dtype=dtype)
    return flat.reshape(shape).clone() if shape else flat.reshape(()).clone()


def _decode_list(list_value):
    # TorchAir marks list.s with val_type 0 (VT_LIST_NONE), so the filled field decides.
    for field in ("i", "f", "b", "dt"):
        values = getattr(list_value, field)
        if len(values):
            return [int(v) if field in ("i", "dt") else (float(v) if field == "f" else bool(v)) for v in values]
    if len(list_value.s):
        return [_decode_bytes(v) for v in list_value.s]
    if len(list_value.t):
        return [decode_tensor_def(t) for t in list_value.t]
    if len(list_value.td):
        return list(list_value.td)
    return []


def _decode_bytes(value: bytes):
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        return bytes(value)


def decode_attr(attr_def):
    """One AttrDef as a Python value: int, float, bool, str, list, tensor, or the raw message."""
    kind = attr_def.WhichOneof("value")
    if kind is None:
        return None
    if kind == "s":
        return _decode_bytes(attr_def.s)
    if kind == "i" or kind == "dt":
        return int(getattr(attr_def, kind))
    if kind == "f":
        return float(attr_def.f)
    if kind == "b":
        return bool(attr_def.b)
    if kind == "list":
        return _decode_list(attr_def.list)
    if kind == "t":
        return decode_tensor_def(attr_def.t)
    if kind == "list_list_int":
        return [[int(x) for x in row.list_i] for row in attr_def.list_list_int.list_list_i]
    if kind == "list_list_float":
        return [[float(x) for x in row.list_f] for row in attr_def.list_list_float.list_list_f]
    if kind == "expression":
        return str(attr_def.expression)
    return getattr(attr_def, kind)  # bt, td, g, func: handed over undecoded


def decode_attrs(op_def) -> dict:
    """All attributes of an OpDef, decoded; names starting with "_" are TorchAir bookkeeping but kept."""
    return {name: decode_attr(value) for name, value in op_def.attr.items()}


class FxTensorMeta(NamedTuple):
    """The FX fake tensor TorchAir recorded on a GE output desc (its `_meta` attr)."""

    dtype: str                 # e.g. "float32"
    dims: tuple[str, ...]      # e.g. ("s0", "16"): ints, or SymInt expressions as text


_FX_TENSOR_META = re.compile(r"Tensor\(dtype=torch\.(\w+), shape=torch\.Size\(\[(.*?)\]\)")


def fx_tensor_meta(desc) -> FxTensorMeta | None:
    """The `_meta` of an output desc when it describes a tensor (not a SymInt or a list), else None."""
    if "_meta" not in desc.attr:
        return None
    match = _FX_TENSOR_META.match(desc.attr["_meta"].s.decode("utf-8", "replace"))
    if match is None:
        return None
    dims = tuple(d.strip() for d in match.group(2).split(",") if d.strip())
    return FxTensorMeta(match.group(1), dims)

"""Low-bit formats of torch_npu's quantised outputs, as CANN's kernels write them on a CPU host.

fp8 (``to_fp8``): CANN's quantisers (QuantMax, GroupedQuantMax: ops-nn ``quant_max_common.h``) cast float32 to
fp8 with ``CastTrait{SatMode::SAT, RoundMode::CAST_RINT}``. asc-devkit's asc_float2e5m2 doc defines the
saturating cast: round half to even; a finite value beyond the format's largest becomes that largest (57344 for
float8_e5m2, 448 for float8_e4m3fn); +-inf becomes +-largest; NaN becomes 0. Subnormals are kept (gradual
underflow). torch's own CPU cast differs at the edges (measured on torch 2.13: float8_e5m2 turns 61440 and inf
into inf, float8_e4m3fn keeps NaN), so values are clamped and NaN zeroed first; in range, torch's cast rounds half
to even (tests/simulator/npu/test_quant_lowbit.py checks it against a nearest-value search over every code).

int4 packed into int32 (``pack_int4``): 8 values per int32, value i of a group of 8 in bits 4i..4i+3 as a
two's-complement nibble (so the first value is the low nibble of the lowest byte). Sources: ops-nn's goldens
``matmul/common/tests/st/arch35/matmul_quant_util.py`` (``packed |= (w[..., i] & 0xF) << (i * 4)``) and
``quant/dynamic_quant_update_scatter_v2/tests/assets/golden.py`` (even index in the low nibble of a byte);
TorchAir's converters reshape an int4 [..., 8n] to [..., n, 8] and Bitcast it to int32 (npu_rotate_quant,
npu_kronecker_quant), which is that layout on a little-endian device.

hifloat8 is not emulated: its 'hybrid' rounding is stochastic (asc_float2hif8: 随机舍入), so an output has no
single right value; ops that ask for it refuse it by name (``refuse_hifloat8``).
"""
from __future__ import annotations


import torch

from ..._ge.values import TORCH_TO_GE
from ..interpreter.lowbit_formats import pack_int4 as ge_pack_int4

FP8_LARGEST = {torch.float8_e5m2: 57344.0, torch.float8_e4m3fn: 448.0}
# torch's ScalarType numbers and torch_npu's own dtype numbers (what an `int dst_dtype` carries) for fp8.
FP8_BY_NUMBER = {23: torch.float8_e5m2, 291: torch.float8_e5m2, 24: torch.float8_e4m3fn, 292: torch.float8_e4m3fn}
HIFLOAT8_NUMBER = 290
INT4_LOW, INT4_HIGH = -8, 7


def to_fp8(values: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """float32 `values` as `dtype` (float8_e5m2 / float8_e4m3fn) by CANN's saturating round-half-even cast."""
    if values.dtype != torch.float32:
        raise TypeError(f"to_fp8 takes the float32 values the vector unit casts, got {values.dtype}")
    largest = FP8_LARGEST[dtype]
    return torch.where(torch.isnan(values), 0.0, values).clamp(-largest, largest).to(dtype)


def refuse_hifloat8(op: str, what: str):
    raise NotImplementedError(f"npu::{op}: {what}={HIFLOAT8_NUMBER} (torch_npu.hifloat8) is not emulated: its "
                              "'hybrid' rounding is stochastic; use torch.float8_e5m2 or torch.float8_e4m3fn")


def saturate_int4(values: torch.Tensor) -> torch.Tensor:
    """Integer-valued float `values` saturated to int4's range, as int8 (CANN's casts to integers saturate)."""
    return values.clamp(INT4_LOW, INT4_HIGH).to(torch.int8)


def pack_int4(values: torch.Tensor) -> torch.Tensor:
    """int values in [-8, 7], last dim a multiple of 8, as int32 [..., n / 8]: value i of each 8 in bits 4i..4i+3."""
    if values.shape[-1] % 8:
        raise ValueError(f"int4 packing needs a last dim that is a multiple of 8, got shape {tuple(values.shape)}")
    if bool(((values < INT4_LOW) | (values > INT4_HIGH)).any()):
        raise ValueError("int4 packing takes values in [-8, 7]")
    groups = values.to(torch.int64).reshape(*values.shape[:-1], -1, 8)
    word = torch.zeros(groups.shape[:-1], dtype=torch.int64)
    for index in range(8):
        word |= (groups[..., index] & 0xF) << (4 * index)
    return (word - ((word >> 31) << 32)).to(torch.int32)   # the top nibble's sign bit is int32's sign bit


def unpack_int4(words: torch.Tensor) -> torch.Tensor:
    """The inverse of `pack_int4`: int32 [..., n] -> int8 [..., 8n] in [-8, 7]."""
    nibbles = torch.stack([(words.to(torch.int64) >> (4 * index)) & 0xF for index in range(8)], dim=-1)
    return torch.where(nibbles > INT4_HIGH, nibbles - 16, nibbles).to(torch.int8).flatten(-2)


# ---- shared by the quantisation adapters (quant.py, quant_fused.py, quant_lowbit.py) --------------------------

# torch's ScalarType numbers (what an `int dtype` argument carries) for the dtypes these ops name.
SCALAR_TYPES = {0: torch.uint8, 1: torch.int8, 3: torch.int32, 5: torch.float16, 6: torch.float32,
                12: torch.qint8, 13: torch.quint8, 14: torch.qint32, 15: torch.bfloat16, 16: torch.quint4x2,
                23: torch.float8_e5m2, 24: torch.float8_e4m3fn}
# torch_npu's own dtype numbers (ints on a CPU host; docs/torch-npu-ops.md).
NPU_DTYPES = {285: "int4", 290: "hifloat8", 291: "float8_e5m2", 292: "float8_e4m3fn", 296: "float4_e2m1fn_x2",
              297: "float4_e1m2fn_x2", 293: "float8_e8m0fnu"}
_PLAIN = {torch.qint8: torch.int8, torch.quint8: torch.uint8, torch.qint32: torch.int32}


def fail(op, message, kind=ValueError):
    raise kind(f"npu::{op}: {message}")


def scalar_dtype(op, what, value, default):
    """An `int dtype` argument (a torch.dtype or its ScalarType number) as a torch.dtype."""
    if value is None:
        return default
    if isinstance(value, torch.dtype):
        return value
    if int(value) in NPU_DTYPES:
        fail(op, f"{what}={value} (torch_npu.{NPU_DTYPES[int(value)]}) is a format the CPU simulator does not "
                 "emulate; use int8", NotImplementedError)
    if int(value) not in SCALAR_TYPES:
        fail(op, f"{what}={value} is not a dtype this op takes")
    return SCALAR_TYPES[int(value)]


def int_out(op, what, value, default=torch.int8, int4=False):
    """The integer dtype of a quantised output (torch.int4 for torch.quint4x2 when `int4`); refuses formats the
    simulator does not emulate (NotImplementedError) and non-integer dtypes (ValueError)."""
    dtype = scalar_dtype(op, what, value, default)
    plain = _PLAIN.get(dtype, dtype)
    if plain == torch.quint4x2:
        if int4:
            return torch.int4
        fail(op, f"{what}=torch.quint4x2 (8 int4 values packed into an int32): not emulated for this op; use "
                 "torch.int8", NotImplementedError)
    if plain in (torch.float8_e5m2, torch.float8_e4m3fn):
        fail(op, f"{what}={plain} (fp8 output, Ascend 950 only) is not emulated by the CPU simulator",
             NotImplementedError)
    if plain not in (torch.int8, torch.uint8, torch.int32):
        fail(op, f"{what}={dtype} is not an integer output dtype of this op")
    return plain


def ge_number(dtype: torch.dtype) -> int:
    """A torch dtype's ge::DataType number (what a GE dtype attr carries)."""
    return TORCH_TO_GE[dtype]


def packed_int4(y: torch.Tensor) -> torch.Tensor:
    """A DT_INT4 output (torch.int4, one per byte) as torch_npu's eager ops return it: 8 per int32 along the last
    dim, as TorchAir's converters Bitcast it (the same GE Bitcast kernel: ``interpreter/lowbit_formats.py``)."""
    return ge_pack_int4(y, torch.int32, keep_dim=True)



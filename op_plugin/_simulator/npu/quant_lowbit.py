"""torch_npu's quantisers with fp8 and int4 outputs as adapters over the GE kernels their TorchAir converters lower
them to: npu_quant_max (fp8), npu_rotate_quant (int8 / int4 packed into int32) and npu_kronecker_quant (int4
packed into int32).

On an NPU these eager ops call the same CANN kernels their GE types run in graph mode, so each maps its arguments
onto the GE op (semantics, rounding and refusals in ``interpreter/kernels/quant/quant_max.py`` and
``quant/rotate_quant.py``; the formats in ``interpreter/lowbit_formats.py``), packs int4 outputs 8 per int32 as
the converters' Bitcast does (``formats.packed_int4``) and names the op in every refusal:

* ``npu_quant_max`` -> QuantMax, or GroupedQuantMax with a group_list of more than one element (torch_npu's doc:
  one group is no grouping); dst_dtype torch_npu's 291/292 (or torch's 23/24) fp8, 290 hifloat8 (refused).
* ``npu_rotate_quant`` -> RotateQuant (y_dtype DT_INT8 / DT_INT4); MX dst_dtypes (Ascend 950) are refused.
* ``npu_kronecker_quant`` -> FlatQuant (dst_dtype int32: int4 packed 8 per int32; fp4 refused).
"""
from __future__ import annotations

import torch

from ..interpreter.calls import ge_op
from .checks import named_refusals
from .formats import HIFLOAT8_NUMBER, fail, packed_int4

# torch_npu's / torch's dtype numbers of fp8 (and hifloat8) -> ge::DataType
_FP8_GE = {291: 35, 23: 35, 292: 36, 24: 36, HIFLOAT8_NUMBER: 34,
           torch.float8_e5m2: 35, torch.float8_e4m3fn: 36}
_MX_NUMBERS = {291: "float8_e5m2", 292: "float8_e4m3fn", 296: "float4_e2m1fn_x2", 23: "float8_e5m2",
               24: "float8_e4m3fn"}


@named_refusals("npu_quant_max")
def npu_quant_max(x, scale, *, round_mode="rint", dst_dtype=291, group_list=None):
    op = "npu_quant_max"
    key = dst_dtype if isinstance(dst_dtype, torch.dtype) else int(dst_dtype)
    if key not in _FP8_GE:
        fail(op, f"dst_dtype={dst_dtype} is not torch.float8_e5m2, torch.float8_e4m3fn or torch_npu.hifloat8")
    if group_list is None or group_list.numel() <= 1:
        return ge_op("QuantMax")(x, scale, None, round_mode=round_mode, dst_type=_FP8_GE[key])
    return ge_op("GroupedQuantMax")(x, scale, group_list, round_mode=round_mode, dst_type=_FP8_GE[key])


def _rotate_y_dtype(op, dst_dtype):
    """npu_rotate_quant's dst_dtype as RotateQuant's y_dtype (DT_INT8 2, DT_INT4 29)."""
    if dst_dtype is None or dst_dtype in (1, torch.int8, torch.qint8):
        return 2
    if dst_dtype in (16, torch.quint4x2):
        return 29
    if not isinstance(dst_dtype, torch.dtype) and int(dst_dtype) in _MX_NUMBERS:
        fail(op, f"dst_dtype={dst_dtype} ({_MX_NUMBERS[int(dst_dtype)]}): MX outputs (Ascend 950) are not emulated",
             NotImplementedError)
    fail(op, f"dst_dtype={dst_dtype} is not torch.int8 or torch.quint4x2 (A2/A3)")


@named_refusals("npu_rotate_quant")
def npu_rotate_quant(x, rotation, *, alpha=None, dst_dtype=None, axis=-1, round_mode="rint", scale_alg=0,
                     dst_type_max=0.0, transpose_y=False):
    y_dtype = _rotate_y_dtype("npu_rotate_quant", dst_dtype)
    y, scale = ge_op("RotateQuant")(x, rotation, alpha, y_dtype=y_dtype, axis=axis, round_mode=round_mode,
                                    scale_alg=scale_alg, dst_type_max=dst_type_max, transpose_y=transpose_y)
    return (packed_int4(y) if y_dtype == 29 else y), scale


@named_refusals("npu_kronecker_quant")
def npu_kronecker_quant(x, kronecker_p1, kronecker_p2, clip_ratio=None, dst_dtype=None, dst_type_max=None):
    op = "npu_kronecker_quant"
    if dst_dtype not in (None, 3, torch.int32):
        kind = NotImplementedError if dst_dtype in (296, getattr(torch, "float4_e2m1fn_x2", None)) else ValueError
        fail(op, f"dst_dtype={dst_dtype}: only torch.int32 (int4 packed 8 per int32) is emulated", kind)
    if dst_type_max not in (None, 0.0):
        fail(op, f"dst_type_max={dst_type_max} applies to float4_e2m1 outputs only")
    y, quant_scale = ge_op("FlatQuant")(x, kronecker_p1, kronecker_p2, None,
                                        clip_ratio=1.0 if clip_ratio is None else float(clip_ratio))
    return packed_int4(y), quant_scale


KERNELS: dict = {
    "npu_quant_max": npu_quant_max,
    "npu_rotate_quant": npu_rotate_quant,
    "npu_kronecker_quant": npu_kronecker_quant,
}

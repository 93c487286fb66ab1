"""Quantisation GE ops (CANN ops-nn ``quant/`` and ``matmul/``): DynamicQuant, DynamicQuantV2,
AscendQuantV2, Quantize, QuantBatchMatmulV3, WeightQuantBatchMatmulV2.

Written from the ops' CANN definitions (ops-nn READMEs, the A2/A3 kernels' arithmetic), not from
op_plugin's torch_npu reference kernels, so a compiled graph is checked against CANN's semantics:

* float inputs are widened to float32; a float-to-int cast rounds half to even (the kernels'
  ``Cast(..., RoundMode::CAST_RINT)``, also for AscendQuantV2's ``round_mode="round"``) and
  saturates to the output dtype;
* DynamicQuant multiplies by ``127 / rowmax|x|`` (it does not divide by the scale); its asymmetric
  variant floors the scale at 1e-12, as the kernels' ``GetScaleAndOffset`` does;
* QuantBatchMatmulV3 accumulates int8 x int8 in int32 exactly, then applies the README's order of
  bias, scale and per-token scale in float32 and rounds once to the output dtype; an int64 scale is
  the FP19 TransQuantParam packs (top 19 bits of the float32), CANN's dtype combinations are enforced.

DynamicQuant(V2) also write DT_INT4 (7 / 15 / 7 for 127 / 255 / 127; TorchAir packs it 8 per int32); other
outputs CANN defines in int4, fp8, hifloat8 or MX formats, int8/int32 matmul outputs (rounded in the
cube's fixpipe, undocumented) and rows of zeros in symmetric DynamicQuant (127 / 0) are refused.
DynamicQuantV2 and WeightQuantBatchMatmulV2 take their prototypes from ops-nn's ``op_graph``
``*_proto.h``: the pinned TorchAir's docstrings drop DynamicQuantV2's last three attrs and misspell
two of WeightQuantBatchMatmulV2's (``ATRR``).
"""
from __future__ import annotations

import torch

from ...._ge.reg_op import parse_reg_ops
from ..registry import ge_kernel, refuse
from .common import attr_dtype
from .quantize_lowbit import as_int4

_HALF = (torch.float16, torch.bfloat16)
_FLOATS = (torch.float16, torch.bfloat16, torch.float32)
_RANGES = {torch.int8: (-128, 127), torch.uint8: (0, 255), torch.int32: (-2**31, 2**31 - 1)}
_GE_INT8, _GE_INT4 = 2, 29

# ops-nn quant/dynamic_quant_v2/op_graph/dynamic_quant_v2_proto.h and
# matmul/weight_quant_batch_matmul_v2/op_graph/weight_quant_batch_matmul_v2_proto.h, as CANN writes them.
_PROTOTYPES = parse_reg_ops('''
"""REG_OP(DynamicQuantV2)
    .INPUT(x, TensorType({DT_FLOAT16, DT_BF16}))
    .OPTIONAL_INPUT(smooth_scales, TensorType({DT_FLOAT16, DT_BF16}))
    .OPTIONAL_INPUT(group_index, TensorType({DT_INT32}))
    .OUTPUT(y, TensorType({DT_INT8, DT_INT4, DT_FLOAT8_E5M2, DT_FLOAT8_E4M3FN, DT_HIFLOAT8}))
    .OUTPUT(scale, TensorType({DT_FLOAT}))
    .OUTPUT(offset, TensorType({DT_FLOAT}))
    .ATTR(dst_type, Int, DT_INT8)
    .ATTR(is_symmetrical, Bool, false)
    .ATTR(quant_mode, String, "pertoken")
    .ATTR(dst_type_max, Float, 0.0)
    .OP_END_FACTORY_REG(DynamicQuantV2)
"""
"""REG_OP(WeightQuantBatchMatmulV2)
    .INPUT(x, TensorType({DT_FLOAT16, DT_BF16}))
    .INPUT(weight, TensorType({DT_INT8, DT_INT4, DT_INT32, DT_FLOAT8_E4M3FN, DT_HIFLOAT8, DT_FLOAT4_E2M1}))
    .INPUT(antiquant_scale, TensorType({DT_FLOAT16, DT_BF16, DT_UINT64, DT_INT64, DT_FLOAT8_E8M0}))
    .OPTIONAL_INPUT(antiquant_offset, TensorType({DT_FLOAT16, DT_BF16, DT_INT32}))
    .OPTIONAL_INPUT(quant_scale, TensorType({DT_FLOAT, DT_UINT64}))
    .OPTIONAL_INPUT(quant_offset, TensorType({DT_FLOAT}))
    .OPTIONAL_INPUT(bias, TensorType({DT_FLOAT16, DT_FLOAT, DT_BF16}))
    .OUTPUT(y, TensorType({DT_FLOAT16, DT_BF16, DT_INT8}))
    .ATTR(transpose_x, Bool, false)
    .ATTR(transpose_weight, Bool, false)
    .ATTR(antiquant_group_size, Int, 0)
    .ATTR(dtype, Int, -1)
    .ATTR(inner_precise, Int, 0)
    .OP_END_FACTORY_REG(WeightQuantBatchMatmulV2)
"""
''', {"DT_INT8": _GE_INT8})
_INNER_PRECISE = "chooses the NPU's high-precision or high-performance kernel; the CPU computes in float32 either way"


def _to_int(values, dtype):
    """Integer-valued float32 `values` saturated to `dtype` (CANN's float -> int casts saturate)."""
    low, high = _RANGES[dtype]
    return values.double().clamp(low, high).to(dtype)   # float64: int32's bounds are not float32 values


def _smoothed(x, smooth_scales, group_index):
    wide = x.float()
    if smooth_scales is None:
        return wide
    if group_index is None:
        return wide * smooth_scales.float()
    rows, ends = wide.reshape(-1, x.shape[-1]), [int(v) for v in group_index.reshape(-1).tolist()]
    starts = [0, *ends[:-1]]
    if any(end < start for start, end in zip(starts, ends, strict=True)) or (ends and ends[-1] != rows.shape[0]):
        refuse(f"group_index {ends} must rise to the token count {rows.shape[0]} (other values are undefined)")
    scaled = torch.cat([rows[start:end] * smooth_scales[group].float()
                        for group, (start, end) in enumerate(zip(starts, ends, strict=True))])
    return scaled.reshape(wide.shape)


# DT_INT8 / DT_INT4 -> the A2/A3 kernels' constants (dynamic_quant_base.h): symmetric C, asymmetric range R and
# offset O; int4 results are DT_INT4 tensors (torch.int4, one per byte: kernels/quantize_lowbit.py)
_DYNAMIC_OUT = {_GE_INT8: (127.0, 255.0, 127.0), _GE_INT4: (7.0, 15.0, 7.0)}


def _int8_or_int4(dst_type):
    if int(dst_type) not in _DYNAMIC_OUT:
        refuse(f"dst_type={dst_type}: only DT_INT8 and DT_INT4 outputs are simulated (fp8/hifloat8 are Ascend 950 "
               "formats)")
    return int(dst_type)


def _saturated(levels, dst_type):
    if dst_type == _GE_INT4:
        return as_int4(levels.clamp(-8, 7))
    return _to_int(levels, torch.int8)


def _symmetric(wide, dims, dst_type):
    absmax = wide.abs().amax(dim=dims, keepdim=True)
    if bool((absmax == 0).any()):
        refuse("a row of zeros: the kernel's C / rowmax is inf and 0 * inf is not defined by CANN")
    factor = torch.tensor(_DYNAMIC_OUT[dst_type][0]) / absmax   # dynamic_quant.h: Div(C, max), x * that, scale
    one = torch.tensor(1.0)   # written as 1 / that; 0-d tensors: torch makes `float / tensor` a reciprocal product
    return _saturated(torch.round(wide * factor), dst_type), one / factor


def _asymmetric(wide, dims, dst_type):
    _, span, base = _DYNAMIC_OUT[dst_type]
    high, low = wide.amax(dim=dims, keepdim=True), wide.amin(dim=dims, keepdim=True)
    scale = torch.clamp_min((high - low) / span, 1e-12)
    offset = base - high / scale
    return _saturated(torch.round(wide * (torch.tensor(1.0) / scale) + offset), dst_type), scale, offset


@ge_kernel("DynamicQuant", accepts={"x": _HALF, "smooth_scales": _HALF})
def dynamic_quant(x, smooth_scales, group_index, *, dst_type):
    """Per-token symmetric: scale = rowmax|x·s| / C, y = rint(x·s · C / rowmax|x·s|) (C 127 int8, 7 int4)."""
    y, scale = _symmetric(_smoothed(x, smooth_scales, group_index), (-1,), _int8_or_int4(dst_type))
    return y, scale.squeeze(-1)


@ge_kernel("DynamicQuantV2", prototype=_PROTOTYPES["DynamicQuantV2"], accepts={"x": _HALF, "smooth_scales": _HALF})
def dynamic_quant_v2(x, smooth_scales, group_index, *, dst_type, is_symmetrical, quant_mode, dst_type_max):
    """Per-token or per-tensor; symmetric as DynamicQuant, or asymmetric: scale = max((max - min) / R,
    1e-12), offset = O - max / scale, y = rint(x·s · (1 / scale) + offset) (int8 R 255, O 127; int4 R 15, O 7).
    The offset output of a symmetric run is not documented: zeros here (TorchAir's npu_dynamic_quant lowering
    never reads it)."""
    dst_type = _int8_or_int4(dst_type)
    if dst_type_max:
        refuse(f"dst_type_max={dst_type_max} applies to fp8/hifloat8 outputs, which are not simulated")
    if quant_mode not in ("pertoken", "pertensor"):
        refuse(f"quant_mode={quant_mode!r} is not 'pertoken' or 'pertensor'")
    if quant_mode == "pertensor" and group_index is not None:
        refuse("group_index with quant_mode='pertensor' is not defined")
    wide = _smoothed(x, smooth_scales, group_index)
    dims = (-1,) if quant_mode == "pertoken" else tuple(range(x.dim()))
    if is_symmetrical:
        y, scale = _symmetric(wide, dims, dst_type)
        offset = torch.zeros_like(scale)
    else:
        y, scale, offset = _asymmetric(wide, dims, dst_type)
    if quant_mode == "pertoken":
        return y, scale.squeeze(-1), offset.squeeze(-1)
    return y, scale.reshape(1), offset.reshape(1)


def _along(param, x, axis):
    """A 1-D scale/offset laid along x's dim `axis` (others broadcast); an x-ranked one as it is."""
    if param.dim() != 1:
        return param
    if param.shape[0] not in (1, x.shape[axis]):
        refuse(f"a scale/offset of {param.shape[0]} values does not fit dim {axis} of x ({x.shape[axis]})")
    shape = [1] * x.dim()
    shape[axis] = param.shape[0]
    return param.reshape(shape)


_ROUNDING = {"round": torch.round, "floor": torch.floor, "ceil": torch.ceil, "trunc": torch.trunc}


@ge_kernel("AscendQuantV2", accepts={"x": _FLOATS, "scale": _FLOATS, "offset": _FLOATS})
def ascend_quant_v2(x, scale, offset, *, sqrt_mode, round_mode, dst_type, axis):
    """y = cast(x * scale [* scale] + offset): round_mode "round" is half to even (CAST_RINT in the A2
    kernel), floor/ceil/trunc as named; saturated to int8, or to int4 (the A2 kernel: rounded to int32, then
    half, then int4; DT_INT4 is packed 8 per int32 by TorchAir's graph); axis -1 or -2 (the last two dims)."""
    dst_type = _int8_or_int4(dst_type)
    if round_mode not in _ROUNDING:
        refuse(f"round_mode={round_mode!r} is not round, floor, ceil or trunc (hybrid is hifloat8 only)")
    if axis not in (-1, -2, x.dim() - 1, x.dim() - 2) or x.dim() < 1:
        refuse(f"axis={axis} is not one of x's last two dims")
    wide_scale = _along(scale, x, axis).float()
    result = x.float() * wide_scale * (wide_scale if sqrt_mode else 1.0)
    if offset is not None:
        result = result + _along(offset, x, axis).float()
    return _saturated(_ROUNDING[round_mode](result), dst_type)


_QUANTIZE_OUT = {"torch.qint8": torch.int8, "torch.quint8": torch.uint8, "torch.qint32": torch.int32}


@ge_kernel("Quantize", accepts={"x": _FLOATS, "scales": (torch.float32, torch.bfloat16)})
def quantize(x, scales, zero_points, *, dtype, axis):
    """y = rint(x / scales + zero_points) saturated to `dtype` ("torch.qint8" int8, "torch.quint8"
    uint8, "torch.qint32" int32); scales/zero_points broadcast against x (TorchAir unsqueezes them)."""
    if dtype not in _QUANTIZE_OUT:
        refuse(f"dtype={dtype!r}: only torch.qint8, torch.quint8 and torch.qint32 are simulated")
    if bool((scales == 0).any()):
        refuse("a scale of 0: x / 0 is not defined by CANN")
    result = x.float() / scales.float()
    if zero_points is not None:
        result = result + zero_points.float()
    return _to_int(torch.round(result), _QUANTIZE_OUT[dtype])


def _scale(scale, out, pertoken_scale, bias, offset):
    """The scale as float32, for CANN's A2/A3 combinations (ops-nn aclnnQuantMatmulV4.md): float16 output
    with an int64/uint64 scale and no pertoken_scale reads its FP19 (bits 13-31, as TransQuantParam packs
    it; bit 46 is its flag), or a float32 scale with pertoken_scale; bfloat16 output a float32/bfloat16 scale."""
    if offset is not None:
        refuse("offset goes with int8 outputs only (not simulated)")
    if bias is not None and bias.dtype not in (torch.int32, torch.float32, out):
        refuse(f"a {bias.dtype} bias with {out} output is not one of CANN's combinations")
    if scale.dtype in (torch.int64, torch.uint64):
        bits = scale.to(torch.int64) if scale.dtype != torch.int64 else scale
        if out != torch.float16 or pertoken_scale is not None or (bias is not None and bias.dtype != torch.int32):
            refuse("an int64/uint64 scale goes with float16 output, no pertoken_scale and an int32 bias or none")
        if bool(((bits & ~(0xFFFFFFFF | (1 << 46))) != 0).any()):
            refuse("an int64 scale with offset bits (37-45): an int8 requantisation, not simulated")
        return (bits & 0xFFFFE000).to(torch.int32).view(torch.float32)
    if out == torch.float16 and (scale.dtype != torch.float32 or pertoken_scale is None):
        refuse("float16 output takes an int64 scale (npu_trans_quant_param), or a float32 scale with pertoken_scale: "
               "a float scale without pertoken_scale is not a graph-mode combination (torch_npu's docs)")
    return scale.float()


@ge_kernel("QuantBatchMatmulV3",
           accepts={"x1": (torch.int8,), "x2": (torch.int8,), "pertoken_scale": (torch.float32,)})
def quant_batch_matmul_v3(x1, x2, scale, offset, bias, pertoken_scale, *, dtype, transpose_x1, transpose_x2):
    """ops-nn QuantBatchMatmulV3 README (A2/A3): acc = x1 @ x2 in int32 (+ int32 bias);
    out = acc * scale [* pertoken_scale] (+ float bias), rounded once to float16/bfloat16 (scales: _scale)."""
    out = attr_dtype("dtype", dtype)
    if out not in _HALF:
        refuse(f"output dtype {out}: only float16/bfloat16 are simulated (int8 requantisation and int32 outputs "
               "are done in the cube's fixpipe, whose rounding CANN does not document)")
    a = x1.transpose(-1, -2) if transpose_x1 else x1
    b = x2.transpose(-1, -2) if transpose_x2 else x2
    if a.shape[-1] != b.shape[-2]:
        refuse(f"x1 {list(a.shape)} and x2 {list(b.shape)} do not multiply")
    acc = torch.matmul(a.to(torch.int64), b.to(torch.int64))
    int_bias = bias is not None and bias.dtype == torch.int32
    if int_bias:
        acc = acc + bias.to(torch.int64)
    if bool((acc.abs() > 2**31 - 1).any()):
        refuse("the int32 accumulator overflows")
    result = acc.to(torch.float32) * _scale(scale, out, pertoken_scale, bias, offset)
    if pertoken_scale is not None:
        result = result * pertoken_scale.float().unsqueeze(-1)
    if bias is not None and not int_bias:
        result = result + bias.float()
    return result.to(out)


@ge_kernel("WeightQuantBatchMatmulV2", prototype=_PROTOTYPES["WeightQuantBatchMatmulV2"],
           accepts={"x": _HALF, "weight": (torch.int8,), "antiquant_offset": _HALF + (torch.int32,)},
           layout_only={"inner_precise": _INNER_PRECISE})
def weight_quant_batch_matmul_v2(x, weight, antiquant_scale, antiquant_offset, quant_scale, quant_offset, bias, *,
                                 transpose_x, transpose_weight, antiquant_group_size, dtype):
    """y = x @ ((weight + antiquant_offset) * antiquant_scale) + bias: the weight dequantised as ops-nn's
    A2/A3 kernel does (weight_quant_batch_matmul_v2_common.h: float16 x in float16 arithmetic, each step
    rounded; bfloat16 x in float32, cast with CAST_RINT), the product accumulated in float32 and rounded
    once (per-tensor, per-channel (n,)/(1, n), per-group (ceil(k / g), n) parameters)."""
    if quant_scale is not None or quant_offset is not None or dtype not in (-1, None):
        refuse("quant_scale/quant_offset (an int8 output) are not simulated")
    if antiquant_scale.dtype != x.dtype:
        refuse(f"antiquant_scale of dtype {antiquant_scale.dtype}: only x's dtype is simulated (not int64/e8m0)")
    a = x.transpose(-1, -2) if transpose_x else x
    w = weight.transpose(-1, -2) if transpose_weight else weight
    k, n = w.shape[-2], w.shape[-1]
    if a.shape[-1] != k:
        refuse(f"x {list(a.shape)} and weight {list(w.shape)} do not multiply")
    wide = w.float()
    if antiquant_offset is not None:
        wide = wide + _antiquant(antiquant_offset, k, n, antiquant_group_size)
        if x.dtype == torch.float16:
            wide = wide.half().float()   # the kernel adds the offset in float16 (bfloat16: in float32)
    wide = wide * _antiquant(antiquant_scale, k, n, antiquant_group_size)
    result = torch.matmul(a.float(), wide.to(x.dtype).float())
    if bias is not None:
        result = result + bias.float()
    return result.to(x.dtype)


def _antiquant(param, k, n, group_size):
    if group_size:
        groups = (k + group_size - 1) // group_size
        if tuple(param.shape) != (groups, n):
            refuse(f"a per-group parameter of shape {list(param.shape)} is not [{groups}, {n}]")
        return param.float().repeat_interleave(group_size, dim=0)[:k]
    if param.numel() not in (1, n):
        refuse(f"an antiquant parameter of shape {list(param.shape)} is not per-tensor or per-channel ({n})")
    return param.float().reshape(1, -1)

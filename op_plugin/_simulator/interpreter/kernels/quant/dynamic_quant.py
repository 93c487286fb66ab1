"""Quantisation GE ops (CANN ops-nn ``quant/``): DynamicQuant, DynamicQuantV2, AscendQuantV2, Quantize, the
dequantisation AscendAntiQuantV2 and TransQuantParamV2.

Written from the ops' CANN definitions (ops-nn READMEs, the A2/A3 kernels' arithmetic), not from
op_plugin's torch_npu reference kernels, so a compiled graph is checked against CANN's semantics:

* float inputs are widened to float32; a float-to-int cast rounds half to even (the kernels'
  ``Cast(..., RoundMode::CAST_RINT)``, also for AscendQuantV2's ``round_mode="round"``) and
  saturates to the output dtype;
* DynamicQuant multiplies by ``127 / rowmax|x|`` (it does not divide by the scale); its asymmetric
  variant floors the scale at 1e-12, as the kernels' ``GetScaleAndOffset`` does;
* AscendAntiQuantV2 (ops-nn ``quant/ascend_anti_quant_v2`` aclnn doc): y = dst_type((x + offset) · scale),
  · scale twice with sqrt_mode, in float32; int8, int4 and fp8 x (hifloat8 x is refused).
* TransQuantParamV2 (ops-nn ``quant/trans_quant_param_v2`` README): y = (bits(scale) & 0xFFFFE000) | 1 << 46,
  the offset's 9 bits (rounded, clamped to [-256, 255]) at bits 37-45; round_mode 1 and offsets at .5 refused
  (the README gives neither rounding bit-exactly).

DynamicQuant(V2) also write DT_INT4 (7 / 15 / 7 for 127 / 255 / 127; TorchAir packs it 8 per int32); other
outputs CANN defines in int4, fp8, hifloat8 or MX formats and rows of zeros in symmetric DynamicQuant (127 / 0)
are refused. DynamicQuantV2 takes its prototype from ops-nn's ``op_graph`` ``*_proto.h``: the pinned TorchAir's
docstring drops its last three attrs.
"""
from __future__ import annotations

import torch

from ....._ge.reg_op import parse_reg_ops
from ...registry import ge_kernel, refuse
from ..common import attr_dtype
from ...lowbit_formats import as_int4

_HALF = (torch.float16, torch.bfloat16)
_FLOATS = (torch.float16, torch.bfloat16, torch.float32)
_RANGES = {torch.int8: (-128, 127), torch.uint8: (0, 255), torch.int32: (-2**31, 2**31 - 1)}
_GE_INT8, _GE_INT4 = 2, 29

# ops-nn quant/dynamic_quant_v2/op_graph/dynamic_quant_v2_proto.h, as CANN writes it.
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
''', {"DT_INT8": _GE_INT8})


def _to_int(values, dtype):
    """Integer-valued float32 `values` saturated to `dtype` (CANN's float -> int casts saturate)."""
    low, high = _RANGES[dtype]
    return values.double().clamp(low, high).to(dtype)   # float64: int32's bounds are not float32 values


def _smoothed(x, smooth_scales, group_index):
    """x in float32 times smooth_scales ([H], or [G, H] with group_index: one row per group of tokens). The
    aclnnDynamicQuant(V2) constraints: x of more than one dim; smooth_scales x's dtype; group_index only with
    smooth_scales, its cumulative ends rising to the token count."""
    if x.dim() < 2:
        refuse(f"x must have more than one dim (got shape {tuple(x.shape)})")
    wide = x.float()
    if smooth_scales is None:
        if group_index is not None:
            refuse("group_index is given without smooth_scales")
        return wide
    if smooth_scales.dtype != x.dtype:
        refuse(f"smooth_scales has dtype {smooth_scales.dtype}, x {x.dtype}: they must match")
    if group_index is None:
        if smooth_scales.shape != x.shape[-1:]:
            refuse(f"smooth_scales of shape {tuple(smooth_scales.shape)} is not ({x.shape[-1]},)")
        return wide * smooth_scales.float()
    rows, ends = wide.reshape(-1, x.shape[-1]), [int(v) for v in group_index.reshape(-1).tolist()]
    if smooth_scales.dim() != 2 or smooth_scales.shape[1] != x.shape[-1] or smooth_scales.shape[0] != len(ends):
        refuse(f"smooth_scales of shape {tuple(smooth_scales.shape)} with {len(ends)} groups is not "
               f"({len(ends)}, {x.shape[-1]})")
    starts = [0, *ends[:-1]]
    if any(end < start for start, end in zip(starts, ends, strict=True)) or (ends and ends[-1] != rows.shape[0]):
        refuse(f"group_index {ends} must rise from 0 to the token count {rows.shape[0]} (CANN leaves any other "
               "value undefined)")
    scaled = torch.cat([rows[start:end] * smooth_scales[group].float()
                        for group, (start, end) in enumerate(zip(starts, ends, strict=True))])
    return scaled.reshape(wide.shape)


# DT_INT8 / DT_INT4 -> the A2/A3 kernels' constants (dynamic_quant_base.h): symmetric C, asymmetric range R and
# offset O; int4 results are DT_INT4 tensors (torch.int4, one per byte: interpreter/lowbit_formats.py)
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
        if param.dim() != x.dim() or any(n != 1 for d, n in enumerate(param.shape) if d != axis % x.dim()):
            refuse(f"a scale/offset of shape {tuple(param.shape)} is not 1-D nor 1 everywhere but dim {axis} of x")
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
    if x.dim() < 1 or not -x.dim() <= axis < x.dim() or axis % x.dim() < x.dim() - 2:
        refuse(f"axis={axis} is not one of x's last two dims (x has {x.dim()})")
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
    for what, param in (("scales", scales), ("zero_points", zero_points)):
        if param is not None and torch.broadcast_shapes(param.shape, x.shape) != x.shape:
            refuse(f"{what} of shape {tuple(param.shape)} does not fit x {tuple(x.shape)} along axis {axis}")
    if bool((scales == 0).any()):
        refuse("a scale of 0: x / 0 is not defined by CANN (its docs require non-zero scales)")
    result = x.float() / scales.float()
    if zero_points is not None:
        result = result + zero_points.float()
    return _to_int(torch.round(result), _QUANTIZE_OUT[dtype])
_ANTI_QUANT_X = (torch.int8, torch.int4, torch.float8_e5m2, torch.float8_e4m3fn)


@ge_kernel("AscendAntiQuantV2", accepts={"scale": (torch.float32, torch.bfloat16),
                                         "offset": (torch.float32, torch.bfloat16)})
def ascend_anti_quant_v2(x, scale, offset, *, dst_type, sqrt_mode):
    """y = dst_type((x + offset) * scale) (* scale again with sqrt_mode), computed in float32; x int8, int4
    (DT_INT4, unpacked by TorchAir's Bitcast) or fp8 (exact in float32)."""
    if x.dtype not in _ANTI_QUANT_X:
        refuse(f"x of dtype {x.dtype}: int8, int4, float8_e5m2 and float8_e4m3fn x are simulated; hifloat8 (and any "
               "other) is not simulated")
    if x.dtype == torch.int4:
        x = x.view(torch.int8)   # one int4 value per byte
    if x.dtype in (torch.float8_e5m2, torch.float8_e4m3fn) and any(
            t is not None and t.dtype != torch.float32 for t in (scale, offset)):
        refuse("an fp8 x takes float32 scale and offset (torch_npu's Meta)")
    if offset is not None and (offset.dtype, offset.shape) != (scale.dtype, scale.shape):
        refuse("offset must have scale's dtype and shape (CANN's constraint)")
    out_dtype = attr_dtype("dst_type", dst_type)
    if out_dtype not in _HALF:
        refuse(f"dst_type={dst_type} ({out_dtype}): CANN writes float16 (1) or bfloat16 (27) only")
    width = x.shape[-1] if x.dim() else 1
    for what, tensor in (("scale", scale), ("offset", offset)):
        if tensor is not None and (tensor.dim() != 1 or tensor.numel() not in (1, width)):
            refuse(f"{what} of shape {tuple(tensor.shape)}: must be 1-D with 1 or x's last-axis size {width} elements")
    value = x.float() if offset is None else x.float() + offset.float()
    value = value * scale.float()
    return (value * scale.float() if sqrt_mode else value).to(out_dtype)


@ge_kernel("TransQuantParamV2", accepts={"scale": (torch.float32,), "offset": (torch.float32,)})
def trans_quant_param_v2(scale, offset, *, round_mode):
    """The FP19 scale (float32's top 19 bits) at bits 0-31, bit 46 set, the int9 offset at bits 37-45."""
    if round_mode != 0:
        refuse(f"round_mode={round_mode}: not simulated (only 0, truncation to the top 19 bits; the README does not "
               "give mode 1's rounding bit-exactly)")
    if not (scale.dim() == 1 or (scale.dim() == 2 and scale.shape[0] == 1)) or (
            offset is not None and (offset.dim() != 1 if scale.dim() == 1 else offset.shape != scale.shape)):
        given = None if offset is None else tuple(offset.shape)
        refuse(f"scale {tuple(scale.shape)} must be (n,) or (1, n), offset {given} (n,) or (1,) beside an (n,) "
               "scale and scale's shape beside a (1, n) one (torch_npu's Meta)")
    out = torch.bitwise_or(torch.bitwise_and(scale.view(torch.int32).to(torch.int64), 0xFFFFE000), 1 << 46)
    if offset is None:
        return out
    if bool(((offset - offset.trunc()).abs() == 0.5).any()):
        refuse("an offset exactly halfway between integers: the README does not say how Round breaks the tie")
    nine = torch.bitwise_and(torch.clamp(torch.round(offset), -256, 255).to(torch.int64), 0x1FF)
    out, nine = torch.broadcast_tensors(out, nine)
    return torch.bitwise_or(torch.bitwise_and(out, 0x4000FFFFFFFF), torch.bitwise_left_shift(nine, 37)).contiguous()

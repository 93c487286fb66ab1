"""Fused quantisation GE ops (CANN ops-nn): DequantSwigluQuant, AddRmsNormDynamicQuant, AddRmsNormQuant,
and the dequantisation AscendAntiQuantV2.

Written from the ops-nn READMEs / aclnn docs (not from op_plugin's torch_npu reference kernels), in float32,
float-to-int8 casts saturating:

* DequantSwigluQuant: dequantOut = x · weight_scale · activation_scale (int32 x; weight_scale per group
  with count-mode group_index), SwiGLU on the halves (activate_left: Swish of the first), then the dynamic
  quantisation scale = rowmax|out · quant_scale| / 127, y = round_mode(out · quant_scale / scale)
  ("rint" half to even, "round" half away from zero, floor, ceil, trunc). quant_mode "static", a bias,
  quant_offset and swiglu_mode != 0 are refused: the docs do not give those formulas or orders.
* AddRmsNormDynamicQuant: x = x1 + x2 in float32 (output x: its rounding), y = x / Rms(x) · gamma (+ beta)
  in float32, per output i: input = y · smooth_scale_i, y_i = rint(input · (127 / rowmax|input|)),
  scale_i = 1 / (127 / rowmax); an output output_mask (or, without a mask, a missing smooth_scale2) marks
  invalid is returned empty, as TorchAir's lowering replaces it by an empty Const.
* AddRmsNormQuant (no TorchAir converter; op_plugin's lowering emits it): y with its kernel's precision
  (float16 steps rounded in float16, bfloat16 in float32), y_i = rint(y / scales_i +
  zero_points_i) (div_mode) or rint(y · scales_i + zero_points_i); y2 without scales2 is zeros (undefined in
  CANN). Its prototype is ops-nn's ``norm/add_rms_norm_quant/op_graph/add_rms_norm_quant_proto.h``.
* AscendAntiQuantV2 (ops-nn ``quant/ascend_anti_quant_v2`` aclnn doc): y = dst_type((x + offset) · scale),
  · scale twice with sqrt_mode, in float32; int8, int4 and fp8 x (hifloat8 x is refused).
* TransQuantParamV2 (ops-nn ``quant/trans_quant_param_v2`` README): y = (bits(scale) & 0xFFFFE000) | 1 << 46,
  the offset's 9 bits (rounded, clamped to [-256, 255]) at bits 37-45; round_mode 1 and offsets at .5 refused
  (the README gives neither rounding bit-exactly).
"""
from __future__ import annotations

import torch

from ...._ge.reg_op import parse_reg_ops
from ..registry import ge_kernel, refuse
from .common import attr_dtype
from .quantize_lowbit import as_int4

_HALF = (torch.float16, torch.bfloat16)
_ANTI_QUANT_X = (torch.int8, torch.int4, torch.float8_e5m2, torch.float8_e4m3fn)
_GE_INT8, _GE_INT4 = 2, 29
_ROUNDING = {"rint": torch.round, "round": lambda v: torch.sign(v) * torch.floor(v.abs() + 0.5),
             "floor": torch.floor, "ceil": torch.ceil, "trunc": torch.trunc}

_PROTOTYPES = parse_reg_ops('''
"""REG_OP(AddRmsNormQuant)
    .INPUT(x1, TensorType({DT_FLOAT16, DT_FLOAT, DT_BF16}))
    .INPUT(x2, TensorType({DT_FLOAT16, DT_FLOAT, DT_BF16}))
    .INPUT(gamma, TensorType({DT_FLOAT16, DT_FLOAT, DT_BF16}))
    .INPUT(scales1, TensorType({DT_FLOAT16, DT_FLOAT, DT_BF16}))
    .OPTIONAL_INPUT(scales2, TensorType({DT_FLOAT16, DT_FLOAT, DT_BF16}))
    .OPTIONAL_INPUT(zero_points1, TensorType({DT_INT32, DT_FLOAT16, DT_FLOAT, DT_BF16}))
    .OPTIONAL_INPUT(zero_points2, TensorType({DT_INT32, DT_FLOAT16, DT_FLOAT, DT_BF16}))
    .OPTIONAL_INPUT(beta, TensorType({DT_FLOAT16, DT_FLOAT, DT_BF16}))
    .OUTPUT(y1, TensorType({DT_INT8, DT_HIFLOAT8, DT_FP8_E5M2, DT_FP8_E4M3FN}))
    .OUTPUT(y2, TensorType({DT_INT8, DT_HIFLOAT8, DT_FP8_E5M2, DT_FP8_E4M3FN}))
    .OUTPUT(x, TensorType({DT_FLOAT16, DT_FLOAT, DT_BF16}))
    .ATTR(axis, Int, -1)
    .ATTR(epsilon, Float, 1e-6f)
    .ATTR(div_mode, Bool, true)
    .ATTR(dst_type, Int, DT_INT8)
    .OP_END_FACTORY_REG(AddRmsNormQuant)
"""
''', {"DT_INT8": _GE_INT8})
ADD_RMS_NORM_QUANT = _PROTOTYPES["AddRmsNormQuant"]


def _int8(values):
    return values.clamp(-128, 127).to(torch.int8)


def _require_int8(dst_type):
    if int(dst_type) != _GE_INT8:
        refuse(f"dst_type={dst_type}: only DT_INT8 outputs are simulated (int4/fp8/hifloat8 are not)")


def _rowmax_scale(wide):
    absmax = wide.abs().amax(dim=-1, keepdim=True)
    if bool((absmax == 0).any()):
        refuse("a row of zeros: its scale is 0 and round(0 / 0) is not defined by CANN")
    return absmax * torch.tensor(1.0 / 127.0, dtype=torch.float32)   # Muls(max, DYNAMIC_QUANT_FACTOR)


def _groups(group_index, rows):
    counts = [int(v) for v in group_index.reshape(-1).tolist()]
    if any(c < 0 for c in counts) or sum(counts) != rows:
        refuse(f"group_index {counts} must be token counts summing to {rows} (rows past the sum are unwritten)")
    return torch.repeat_interleave(torch.arange(len(counts)), torch.tensor(counts, dtype=torch.int64))


@ge_kernel("DequantSwigluQuant", accepts={"x": (torch.int32, torch.float16, torch.bfloat16), **{
    name: (torch.float32,) for name in ("weight_scale", "activation_scale", "quant_scale", "quant_offset")}})
def dequant_swiglu_quant(x, weight_scale, activation_scale, bias, quant_scale, quant_offset, group_index, *,
                         activate_left, quant_mode, dst_type, round_mode, activate_dim, swiglu_mode, clamp_limit,
                         glu_alpha, glu_bias):
    _require_int8(dst_type)
    if quant_mode != "dynamic":
        refuse(f"quant_mode={quant_mode!r}: only 'dynamic' is simulated (the static formula is not documented)")
    if swiglu_mode != 0 or bias is not None or quant_offset is not None:
        refuse("swiglu_mode != 0, bias and quant_offset are not simulated (their order is not documented)")
    if activate_dim not in (-1, x.dim() - 1) or x.dim() != 2 or x.shape[-1] % 2:
        refuse(f"x {list(x.shape)} with activate_dim {activate_dim}: a 2-D x activated on its even last dim only")
    if round_mode not in _ROUNDING:
        refuse(f"round_mode={round_mode!r} is not rint, round, floor, ceil or trunc")
    rows = None if group_index is None else _groups(group_index, x.shape[0])
    wide = x.float()
    if x.dtype == torch.int32:
        if weight_scale is None or activation_scale is None:
            refuse("an int32 x needs weight_scale and activation_scale")
        per_channel = weight_scale.float().reshape(-1, x.shape[-1])
        wide = wide * (per_channel if rows is None else per_channel[rows]) * activation_scale.float().reshape(-1, 1)
    half = x.shape[-1] // 2
    a, b = wide[:, :half], wide[:, half:]
    gate, linear = (a, b) if activate_left else (b, a)
    out = gate / (1.0 + torch.exp(-gate)) * linear   # Swish as the kernel computes it
    if quant_scale is not None:
        smooth = quant_scale.float().reshape(-1, half)
        out = out * (smooth if rows is None else smooth[rows])
    scale = _rowmax_scale(out)
    return _int8(_ROUNDING[round_mode](out / scale)), scale.squeeze(-1)


def _inv_rms(x, epsilon):
    return 1.0 / torch.sqrt((x * x).sum(dim=-1, keepdim=True) * (1.0 / x.shape[-1]) + epsilon)


@ge_kernel("AddRmsNormDynamicQuant", one_dtype=("x1", "x2", "gamma"),
           accepts={"x1": _HALF, "x2": _HALF, "gamma": _HALF})
def add_rms_norm_dynamic_quant(x1, x2, gamma, smooth_scale1, smooth_scale2, beta, *, epsilon, output_mask, dst_type):
    if int(dst_type) not in (_GE_INT8, _GE_INT4):
        refuse(f"dst_type={dst_type}: only DT_INT8 and DT_INT4 outputs are simulated (fp8/hifloat8 are not)")
    int4 = int(dst_type) == _GE_INT4   # the kernel's quantMaxVal: 7 for int4, 127 for int8 (its _base.h)
    # add_rms_norm_dynamic_quant_normal_kernel.h: the float32 sum is normalised; x is its rounding
    total = x1.float() + x2.float()
    y = total * _inv_rms(total, epsilon) * gamma.float()
    y = y if beta is None else y + beta.float()
    x = total.to(x1.dtype)
    valid = (list(output_mask) if output_mask else
             [True, smooth_scale1 is not None and smooth_scale2 is not None])
    results = []
    for keep, smooth in zip(valid, (smooth_scale1, smooth_scale2), strict=True):
        if not keep:
            empty = torch.empty(0, dtype=torch.int8)
            results.append((as_int4(empty) if int4 else empty, torch.empty(0, dtype=torch.float32)))
            continue
        value = y if smooth is None else y * smooth.float()
        absmax = value.abs().amax(dim=-1, keepdim=True)
        if bool((absmax == 0).any()):
            refuse("a row of zeros: C / 0 is not defined by CANN")
        # ScaleTensor: y * (C / max), scale written as 1 / (C / max); 0-d tensors, as `float / tensor` is a
        # reciprocal product in torch, not a division
        multiplier = torch.tensor(7.0 if int4 else 127.0) / absmax
        levels = torch.round(value * multiplier)
        quantised = as_int4(levels.clamp(-8, 7)) if int4 else _int8(levels)
        results.append((quantised, (torch.tensor(1.0) / multiplier).squeeze(-1)))
    (y1, scale1), (y2, scale2) = results
    return y1, y2, x, scale1, scale2


@ge_kernel("AddRmsNormQuant", prototype=ADD_RMS_NORM_QUANT, one_dtype=("x1", "x2", "gamma"),
           accepts={"x1": _HALF, "x2": _HALF, "gamma": _HALF, "scales1": _HALF + (torch.float32,),
                    "scales2": _HALF + (torch.float32,)})
def add_rms_norm_quant(x1, x2, gamma, scales1, scales2, zero_points1, zero_points2, beta, *, axis, epsilon, div_mode,
                       dst_type):
    _require_int8(dst_type)
    if axis not in (-1, x1.dim() - 1):
        refuse(f"axis={axis}: CANN takes -1 only")
    if x1.shape != x2.shape or gamma.shape != x1.shape[-1:]:
        refuse(f"x1 {list(x1.shape)} and x2 {list(x2.shape)} must be equal (no broadcasting) and gamma "
               f"{list(gamma.shape)} their last dim")
    # add_rms_norm_quant.h (per-channel scales): float16 in float16 (x1 + x2, x * rstd, * gamma each rounded);
    # bfloat16 in float32 (the sum rounded to bfloat16 first only when beta is given)
    if x1.dtype == torch.float16:
        x = (x1.float() + x2.float()).to(torch.float16)
        normed = (x.float() * _inv_rms(x.float(), epsilon)).to(torch.float16)
        y = (normed.float() * gamma.float()).to(torch.float16).float()
    else:
        total = x1.float() + x2.float()
        x = total.to(x1.dtype)
        source = total if beta is None else x.float()
        y = source * _inv_rms(source, epsilon) * gamma.float()
    y = y if beta is None else y + beta.float()
    outputs = []
    for scales, zero_points in ((scales1, zero_points1), (scales2, zero_points2)):
        if scales is None:
            outputs.append(torch.zeros(x.shape, dtype=torch.int8))
            continue
        if div_mode and bool((scales == 0).any()):
            refuse("a scale of 0 with div_mode: CANN requires non-zero scales (y / 0 is undefined)")
        value = y / scales.float() if div_mode else y * scales.float()
        outputs.append(_int8(torch.round(value if zero_points is None else value + zero_points.float())))
    return outputs[0], outputs[1], x


@ge_kernel("AscendAntiQuantV2", accepts={"scale": (torch.float32, torch.bfloat16),
                                         "offset": (torch.float32, torch.bfloat16)})
def ascend_anti_quant_v2(x, scale, offset, *, dst_type, sqrt_mode):
    """y = dst_type((x + offset) * scale) (* scale again with sqrt_mode), computed in float32; x int8, int4
    (DT_INT4, unpacked by TorchAir's Bitcast) or fp8 (exact in float32)."""
    if x.dtype not in _ANTI_QUANT_X:
        refuse(f"x of dtype {x.dtype}: int8, int4, float8_e5m2 and float8_e4m3fn are simulated (hifloat8 is not)")
    if x.dtype == torch.int4:
        x = x.view(torch.int8)   # one int4 value per byte
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
        refuse(f"round_mode={round_mode}: only 0 (truncation) is simulated; the README does not give mode 1's rounding")
    out = torch.bitwise_or(torch.bitwise_and(scale.view(torch.int32).to(torch.int64), 0xFFFFE000), 1 << 46)
    if offset is None:
        return out
    if bool(((offset - offset.trunc()).abs() == 0.5).any()):
        refuse("an offset exactly halfway between integers: the README does not say how Round breaks the tie")
    nine = torch.bitwise_and(torch.clamp(torch.round(offset), -256, 255).to(torch.int64), 0x1FF)
    out, nine = torch.broadcast_tensors(out, nine)
    return torch.bitwise_or(torch.bitwise_and(out, 0x4000FFFFFFFF), torch.bitwise_left_shift(nine, 37))

"""RMS norms fused with a quantisation (CANN ops-nn ``norm/``): AddRmsNormQuant, AddRmsNormDynamicQuant,
RmsNormDynamicMxQuant and AddRmsNormDynamicMxQuant. (RmsNormGradQuant shares RmsNormGrad's float32 gradient
and sits beside it in ``rms_norm.py``.)

Written from the ops-nn READMEs / aclnn docs and arch35 kernels (not from op_plugin's torch_npu reference
kernels), in float32, float-to-int8 casts saturating:

* AddRmsNormDynamicQuant: x = x1 + x2 in float32 (output x: its rounding), y = x / Rms(x) · gamma (+ beta)
  in float32, per output i: input = y · smooth_scale_i, y_i = rint(input · (127 / rowmax|input|)),
  scale_i = 1 / (127 / rowmax); an output output_mask (or, without a mask, a missing smooth_scale2) marks
  invalid is returned empty, as TorchAir's lowering replaces it by an empty Const.
* AddRmsNormQuant (no TorchAir converter; op_plugin's lowering emits it): y with its kernel's precision
  (float16 steps rounded in float16, bfloat16 in float32), y_i = rint(y / scales_i +
  zero_points_i) (div_mode) or rint(y · scales_i + zero_points_i); y2 without scales2 is zeros (undefined in
  CANN). Its prototype is ops-nn's ``norm/add_rms_norm_quant/op_graph/add_rms_norm_quant_proto.h``.
* RmsNormDynamicMxQuant, AddRmsNormDynamicMxQuant: ``x = x1 + x2`` in float32 (``x`` output rounded to x1's dtype;
  the norm reads the float32 sum), ``rstd = 1 / sqrt(sum(x^2) * (1/n) + epsilon)`` over the last dim in
  float32, ``y = x * rstd * gamma (+ beta)`` rounded to x's dtype (the kernels store it as T_X), then
  DynamicMxQuant of y along the last axis in blocks of 32 (``formats.py``). gamma (and beta, same shape and
  dtype) are 1-D over x's last dim. rstd: TorchAir asks ``output_rstd=False``, for which CANN marks the output
  invalid (contents undefined); the simulator returns the computed rstd either way, in the wheel Meta's shape
  [..., 1]. The rstd is computed with torch's sqrt, not the kernel's Newton-Raphson reciprocal square root, so it
  can differ from an NPU's in the last float32 bit. Inf/NaN inputs are refused (CANN's doc gives y 0 and the NaN
  scale, but not over which elements).
"""
from __future__ import annotations

import torch

from ....._ge.reg_op import parse_reg_ops
from ...registry import ge_kernel, refuse
from ... import lowbit_formats as mx
from ..common import require_int8, saturate_int8
from ...lowbit_formats import as_e8m0, as_ge, as_int4, check_fp4_last_dim, check_modes, mx_along

_HALF = (torch.float16, torch.bfloat16)
_GE_INT8, _GE_INT4 = 2, 29

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


def _inv_rms(x, epsilon):
    return 1.0 / torch.sqrt((x * x).sum(dim=-1, keepdim=True) * (1.0 / x.shape[-1]) + epsilon)


@ge_kernel("AddRmsNormDynamicQuant", one_dtype=("x1", "x2", "gamma"),
           accepts={"x1": _HALF, "x2": _HALF, "gamma": _HALF})
def add_rms_norm_dynamic_quant(x1, x2, gamma, smooth_scale1, smooth_scale2, beta, *, epsilon, output_mask, dst_type):
    if int(dst_type) not in (_GE_INT8, _GE_INT4):
        refuse(f"dst_type={dst_type}: only DT_INT8 and DT_INT4 outputs are simulated (fp8/hifloat8 are not)")
    int4 = int(dst_type) == _GE_INT4   # the kernel's quantMaxVal: 7 for int4, 127 for int8 (its _base.h)
    if x1.shape != x2.shape or gamma.shape != x1.shape[-1:]:
        refuse(f"x1 {list(x1.shape)} and x2 {list(x2.shape)} must be equal (CANN does not broadcast them) and gamma "
               f"{list(gamma.shape)} their last dim")
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
        quantised = as_int4(levels.clamp(-8, 7)) if int4 else saturate_int8(levels)
        results.append((quantised, (torch.tensor(1.0) / multiplier).squeeze(-1)))
    (y1, scale1), (y2, scale2) = results
    return y1, y2, x, scale1, scale2


@ge_kernel("AddRmsNormQuant", prototype=ADD_RMS_NORM_QUANT, one_dtype=("x1", "x2", "gamma"),
           accepts={"x1": _HALF, "x2": _HALF, "gamma": _HALF, "scales1": _HALF + (torch.float32,),
                    "scales2": _HALF + (torch.float32,)})
def add_rms_norm_quant(x1, x2, gamma, scales1, scales2, zero_points1, zero_points2, beta, *, axis, epsilon, div_mode,
                       dst_type):
    require_int8(dst_type)
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
        outputs.append(saturate_int8(torch.round(value if zero_points is None else value + zero_points.float())))
    return outputs[0], outputs[1], x


def check_norm_args(x, gamma, beta, fmt, round_mode, scale_alg):
    if x.dtype not in _HALF:
        refuse(f"x of dtype {x.dtype}: CANN takes float16 or bfloat16")
    if gamma.dim() != 1 or x.dim() == 0 or gamma.shape[0] != x.shape[-1]:
        refuse(f"gamma must be 1-D over x's last dim; gamma {list(gamma.shape)}, x {list(x.shape)}")
    if gamma.dtype not in (x.dtype, torch.float32):
        refuse(f"gamma of dtype {gamma.dtype}: CANN takes x's dtype or float32")
    if beta is not None and (beta.shape != gamma.shape or beta.dtype != gamma.dtype):
        refuse("beta must have gamma's shape and dtype")
    check_modes(fmt, round_mode, scale_alg, scale_algs=(0, 1))
    check_fp4_last_dim(x, fmt)
    if not bool(torch.isfinite(x).all()):
        refuse("x holds inf/NaN: CANN's doc gives y 0 and the NaN scale without saying over which elements")


def rms_norm_mx(wide, dtype, gamma, beta, epsilon, fmt, round_mode, scale_alg):
    """(elements, mxscale codes, rstd) of the float32 `wide` normalised, rounded to `dtype`, MX-quantised."""
    n = wide.shape[-1]
    inv_n = torch.tensor(1.0 / n, dtype=torch.float32)
    rstd = 1.0 / torch.sqrt((wide * wide).sum(dim=-1, keepdim=True) * inv_n + float(epsilon))
    y = wide * rstd * gamma.float()
    if beta is not None:
        y = y + beta.float()
    elements, codes = mx_along(y.to(dtype), -1, 32, fmt, round_mode, scale_alg)
    return elements, codes, rstd


@ge_kernel("RmsNormDynamicMxQuant")
def rms_norm_dynamic_mx_quant(x, gamma, beta, *, epsilon, scale_alg, round_mode, dst_type, output_rstd):
    fmt = mx.element_format("dst_type", dst_type)
    check_norm_args(x, gamma, beta, fmt, round_mode, scale_alg)
    y, codes, rstd = rms_norm_mx(x.float(), x.dtype, gamma, beta, epsilon, fmt, round_mode, scale_alg)
    return as_ge(y, fmt), as_e8m0(codes), rstd


@ge_kernel("AddRmsNormDynamicMxQuant")
def add_rms_norm_dynamic_mx_quant(x1, x2, gamma, beta, *, epsilon, scale_alg, round_mode, dst_type,
                                  output_rstd):
    fmt = mx.element_format("dst_type", dst_type)
    if x1.shape != x2.shape or x1.dtype != x2.dtype:
        refuse(f"x1 and x2 must share shape and dtype; got {x1.dtype}{list(x1.shape)}, {x2.dtype}{list(x2.shape)}")
    check_norm_args(x1, gamma, beta, fmt, round_mode, scale_alg)
    check_norm_args(x2, gamma, beta, fmt, round_mode, scale_alg)
    wide = x1.float() + x2.float()
    y, codes, rstd = rms_norm_mx(wide, x1.dtype, gamma, beta, epsilon, fmt, round_mode, scale_alg)
    return as_ge(y, fmt), wide.to(x1.dtype), as_e8m0(codes), rstd

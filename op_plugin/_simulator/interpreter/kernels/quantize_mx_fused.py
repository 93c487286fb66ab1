"""Fused MX quantisation GE ops (hicann ops-nn ``norm/``, ``quant/swiglu_mx_quant``): RmsNormDynamicMxQuant,
AddRmsNormDynamicMxQuant and SwigluMxQuant.

From the ops' aclnn docs and arch35 kernels: ``x = x1 + x2`` in float32 (``x`` output rounded to x1's dtype;
the norm reads the float32 sum), ``rstd = 1 / sqrt(sum(x^2) * (1/n) + epsilon)`` over the last dim in
float32, ``y = x * rstd * gamma (+ beta)`` rounded to x's dtype (the kernels store it as T_X), then
DynamicMxQuant of y along the last axis in blocks of 32 (``mx_formats.py``). gamma (and beta, same shape and
dtype) are 1-D over x's last dim. rstd: TorchAir asks ``output_rstd=False``, for which CANN marks the output
invalid (contents undefined); the simulator returns the computed rstd either way, in the wheel Meta's shape
[..., 1]. The rstd is computed with torch's sqrt, not the kernel's Newton-Raphson reciprocal square root, so it
can differ from an NPU's in the last float32 bit. Inf/NaN inputs are refused (CANN's doc gives y 0 and the NaN
scale, but not over which elements).

SwigluMxQuant (aclnnSwigluMxQuant doc, arch35 kernel): in float32, swiglu_mode 0 ``a / (1 + exp(-a)) * b`` with
a the right half along activate_dim (the left with activate_left), b the other; swiglu_mode 1 (last dim only)
``g = min(x[..., 0::2], clamp_limit)``, ``g / (1 + exp(-glu_alpha * g)) * (clamp(x[..., 1::2], +-clamp_limit)
+ glu_bias)``; the result is rounded to x's dtype (RINT) and DynamicMxQuant'ed along ``axis`` in blocks of 32.
group_index (count mode, 2-D x, activate_dim -1, counts summing to the rows): no effect with axis -1; with
axis -2 blocks restart at each group and the scale pairs of the groups follow one another (the kernel's
cumulative ceil(rows / 64)), the rest of mxscale is zeros (unwritten by CANN). Other group_index uses are refused.

DynamicDualLevelMxQuant (aclnnDynamicDualLevelMxQuant doc, arch35 kernel), fp4 e2m1 along the last dim: x times
smooth_scale (in x's dtype); per level0 block (512) ``s0 = float32(amax) * float32(1/6)`` (0 when below 2^-126);
``temp = x's dtype(float32(x) / s0)`` (a zero x stays itself); then DynamicMxQuant of temp in level1 blocks of 32.
A nonzero x whose level0 scale is 0 (x / 0) is refused: the doc does not define it.
"""
from __future__ import annotations

import torch

from ..registry import ge_kernel, refuse
from . import mx_formats as mx
from .quantize_mx import as_e8m0, as_ge, check_fp4_last_dim, check_modes, mx_along

_HALF = (torch.float16, torch.bfloat16)


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


def swiglu_out(x, activate_dim, activate_left, swiglu_mode, clamp_limit, glu_alpha, glu_bias):
    """SwigluMxQuant's activation, rounded to x's dtype."""
    if x.dtype not in _HALF or not 2 <= x.dim() <= 7:
        refuse(f"x must be float16/bfloat16 of 2-7 dims; got {x.dtype}{list(x.shape)}")
    if activate_dim not in (-1, -2, x.dim() - 1, x.dim() - 2):
        refuse(f"activate_dim={activate_dim} is not the last or second-to-last dim")
    dim = activate_dim % x.dim()
    if x.shape[dim] % 2:
        refuse(f"x's activate_dim size {x.shape[dim]} must be even")
    wide = x.float()
    if swiglu_mode == 0:
        first, second = wide.chunk(2, dim=dim)
        a, b = (first, second) if activate_left else (second, first)
        out = a / (1.0 + torch.exp(-a)) * b
    elif swiglu_mode == 1:
        if dim != x.dim() - 1:
            refuse("swiglu_mode=1 takes the last dim as activate_dim")
        glu = torch.clamp(wide[..., 0::2], max=float(clamp_limit))
        linear = torch.clamp(wide[..., 1::2], -float(clamp_limit), float(clamp_limit)) + float(glu_bias)
        out = glu / (1.0 + torch.exp(glu * -float(glu_alpha))) * linear
    else:
        refuse(f"swiglu_mode={swiglu_mode} is not 0 or 1")
    return out.to(x.dtype)


def _group_counts(x, group_index, group_mode, activate_dim):
    """group_index as row counts (count mode), checked to cover x's rows exactly."""
    if group_mode != 0:
        refuse("group_mode=1 (cumsum): the arch35 kernel reads group_index as row counts; not simulated")
    if x.dim() != 2 or activate_dim not in (-1, 1) or group_index.dim() != 1:
        refuse("group_index is simulated for a 2-D x with activate_dim -1 and a 1-D group_index")
    counts = [int(v) for v in group_index.tolist()]
    if any(c < 0 for c in counts) or sum(counts) != x.shape[0]:
        refuse(f"group_index counts {counts} must be non-negative and sum to x's {x.shape[0]} rows (rows past the "
               "groups are left unwritten by CANN)")
    return counts


def _grouped_rows_mx(out, counts, fmt, round_mode, scale_alg):
    """axis -2 with groups: blocks of 32 from each group's first row; group g's scale pairs follow the previous
    groups' ceil(rows / 64) pairs (the kernel's cumuScaleOffset); mxscale rows past them (Meta: rows // 64 +
    groups) are unwritten by CANN: zeros here."""
    values = torch.zeros(out.shape, dtype=torch.uint8 if fmt.torch_dtype is None else fmt.torch_dtype)
    scales = torch.zeros(out.shape[0] // 64 + len(counts), out.shape[1], 2, dtype=torch.uint8)
    start = offset = 0
    for rows in counts:
        if rows:
            elements, pairs = mx_along(out[start:start + rows], 0, 32, fmt, round_mode, scale_alg)
            values[start:start + rows] = elements
            scales[offset:offset + pairs.shape[0]] = pairs
            offset += pairs.shape[0]
        start += rows
    return values, scales


def swiglu_mx(x, group_index, *, activate_dim, activate_left, swiglu_mode, clamp_limit, glu_alpha, glu_bias, axis,
              fmt, round_mode, scale_alg, max_dtype_value, group_mode=0):
    """(elements, mxscale codes) of SwigluMxQuant."""
    counts = None if group_index is None else _group_counts(x, group_index, group_mode, activate_dim)
    check_modes(fmt, round_mode, scale_alg, scale_algs=(0, 1))
    if float(max_dtype_value) < 0:
        refuse(f"max_dtype_value={max_dtype_value} must be non-negative")
    if not bool(torch.isfinite(x).all()):
        refuse("x holds inf/NaN: CANN leaves the MX elements of such a block undefined")
    out = swiglu_out(x, activate_dim, activate_left, swiglu_mode, clamp_limit, glu_alpha, glu_bias)
    if axis not in (-1, -2, x.dim() - 1, x.dim() - 2):
        refuse(f"axis={axis} is not the last or second-to-last dim")
    check_fp4_last_dim(out, fmt)
    if counts is not None and axis % x.dim() == 0:
        return _grouped_rows_mx(out, counts, fmt, round_mode, scale_alg)
    return mx_along(out, axis, 32, fmt, round_mode, scale_alg)


@ge_kernel("SwigluMxQuant")
def swiglu_mx_quant(x, group_index, *, activate_dim, activate_left, swiglu_mode, clamp_limit, glu_alpha, glu_bias,
                    group_mode, axis, dst_type, round_mode, scale_alg, max_dtype_value):
    fmt = mx.element_format("dst_type", dst_type)
    if group_mode not in (0, 1):
        refuse(f"group_mode={group_mode} is not 0 (count) or 1 (cumsum)")
    y, codes = swiglu_mx(x, group_index, activate_dim=activate_dim, activate_left=activate_left,
                         swiglu_mode=swiglu_mode, clamp_limit=clamp_limit, glu_alpha=glu_alpha, glu_bias=glu_bias,
                         axis=axis, fmt=fmt, round_mode=round_mode, scale_alg=scale_alg,
                         max_dtype_value=max_dtype_value, group_mode=group_mode)
    return as_ge(y, fmt), as_e8m0(codes)


_INV_FP4_MAX = torch.tensor(0x3E2AAAAB, dtype=torch.int32).view(torch.float32)   # the kernel's float32 1/6


def dual_level_mx(x, smooth_scale, round_mode, level0_block_size, level1_block_size):
    """(fp4 codes, level0 scales float32 [..., ceil(n / 512)], level1 mxscale codes) of DynamicDualLevelMxQuant."""
    if x.dtype not in _HALF or x.dim() == 0:
        refuse(f"x must be float16/bfloat16 of at least 1 dim; got {x.dtype}{list(x.shape)}")
    if (level0_block_size, level1_block_size) != (512, 32):
        refuse(f"level0/level1 block sizes {level0_block_size}/{level1_block_size}: CANN supports 512/32")
    mx.check_round_mode(mx.E2M1, round_mode)
    check_fp4_last_dim(x, mx.E2M1)
    if not bool(torch.isfinite(x).all()):
        refuse("x holds inf/NaN: CANN leaves the MX elements of such a block undefined")
    if smooth_scale is not None:
        if smooth_scale.dtype != x.dtype or smooth_scale.shape[-1:] != x.shape[-1:] or smooth_scale.dim() != 1:
            refuse(f"smooth_scale must be 1-D of x's last dim and dtype; got {smooth_scale.dtype}"
                   f"{list(smooth_scale.shape)}")
        x = x * smooth_scale                          # the kernel multiplies in x's dtype
    n = x.shape[-1]
    nb = -(-n // 512)
    blocks = torch.nn.functional.pad(x.float(), (0, nb * 512 - n)).reshape(*x.shape[:-1], nb, 512)
    level0 = blocks.abs().amax(dim=-1) * _INV_FP4_MAX
    level0 = torch.where(level0 < 2.0 ** -126, torch.zeros_like(level0), level0)
    if bool(((level0 == 0).unsqueeze(-1) & (blocks != 0)).any()):
        refuse("a level0 block whose scale underflows to 0 holds nonzero values (x / 0): undefined in CANN's doc")
    temp = torch.where(blocks == 0, blocks, blocks / level0.unsqueeze(-1)).flatten(-2)[..., :n].to(x.dtype)
    codes, scale = mx_along(temp, -1, 32, mx.E2M1, round_mode)
    return codes, level0, scale


@ge_kernel("DynamicDualLevelMxQuant")
def dynamic_dual_level_mx_quant(x, smooth_scale, *, round_mode, level0_block_size, level1_block_size):
    codes, level0, scale = dual_level_mx(x, smooth_scale, round_mode, level0_block_size, level1_block_size)
    return as_ge(codes, mx.E2M1), level0, as_e8m0(scale)

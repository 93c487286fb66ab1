"""Group normalisation GE ops (hicann ops-nn ``norm/``), forward and backward: GroupNorm, GroupNormV2,
GroupNormGrad, and the fused GroupNormSilu.

Formulas from CANN's operator definitions (REG_OP docs; the ops-nn ``norm/*`` READMEs); TorchAir's converters
are ``ge_converter/aten/native_group_norm*.py``. Statistics of 16-bit float inputs are computed in float32, as
the NPU kernels do.

* GroupNormSilu (ops-nn ``norm/group_norm_silu``): y = silu(group_norm(x) · gamma + beta) computed in
  float32 and rounded once to x's dtype; mean and rstd = 1 / sqrt(population variance + eps) of shape
  (N, num_groups) in gamma's dtype (x's without gamma and beta), as the wheel's Meta gives them. TorchAir's prototype
  names the third output ``variance``; CANN's current prototype and torch_npu's docs call it rstdOut.
"""
from __future__ import annotations

import torch
from ...registry import ge_kernel, refuse
from ..common import opmath

_FLOATS = (torch.float16, torch.float32, torch.bfloat16)


# ---- group norm -----------------------------------------------------------------------------------

def _group_norm(second_output):
    def group_norm(x, gamma, beta, *, num_groups, eps):
        """x read as (N, C, *): C in num_groups groups, statistics per sample and group (population
        variance); mean and the third output have shape (N, num_groups)."""
        if x.dim() < 2:
            refuse(f"x must be (N, C, *), got shape {list(x.shape)}")
        n, c = x.shape[0], x.shape[1]
        if num_groups <= 0 or c % num_groups:
            refuse(f"num_groups {num_groups} must divide the {c} channels")
        if list(gamma.shape) != [c] or list(beta.shape) != [c]:
            refuse(f"gamma and beta must have shape [{c}]")
        grouped = x.reshape(n, num_groups, -1)
        mean = grouped.mean(dim=-1)
        variance = ((grouped - mean.unsqueeze(-1)) ** 2).mean(dim=-1)
        rstd = torch.rsqrt(variance + eps)
        normed = ((grouped - mean.unsqueeze(-1)) * rstd.unsqueeze(-1)).reshape(x.shape)
        affine = [1] * x.dim()
        affine[1] = c
        y = normed * gamma.reshape(affine) + beta.reshape(affine)
        return y, mean, variance if second_output == "variance" else rstd

    group_norm.__name__ = "group_norm" if second_output == "variance" else "group_norm_v2"
    return group_norm


# ops-nn norm/group_norm(_v2) READMEs: data_format and is_training exist for interface compatibility
# only and take no part in the computation; x is always (N, C, *).
_GROUP_NORM_UNREAD = {"data_format": "CANN: interface compatibility only, x is read as (N, C, *)",
                      "is_training": "CANN: interface compatibility only, statistics come from x in both modes"}
_F16_F32 = (torch.float16, torch.float32)
# GroupNorm's third output is the variance, GroupNormV2's the reciprocal std; the eps defaults
# (1e-4, 1e-5) are the prototypes'.
group_norm = ge_kernel("GroupNorm", layout_only=_GROUP_NORM_UNREAD, widen=True,
                       accepts={"x": _F16_F32, "gamma": _F16_F32, "beta": _F16_F32})(_group_norm("variance"))
group_norm_v2 = ge_kernel("GroupNormV2", layout_only=_GROUP_NORM_UNREAD, widen=True,
                          accepts={"x": _FLOATS, "gamma": _FLOATS, "beta": _FLOATS})(_group_norm("rstd"))


_NOT_REQUIRED = "every output is computed; an output not required is simply unused"


@ge_kernel("GroupNormGrad", layout_only={"dx_is_require": _NOT_REQUIRED, "dgamma_is_require": _NOT_REQUIRED,
                                         "dbeta_is_require": _NOT_REQUIRED},
           accepts={"dy": _FLOATS, "mean": _FLOATS, "rstd": _FLOATS, "x": _FLOATS, "gamma": _FLOATS})
def group_norm_grad(dy, mean, rstd, x, gamma, *, num_groups, data_format):
    """Gradients of group norm over x [N, C, *] with mean/rstd [N, num_groups] (NCHW data_format)."""
    if data_format != "NCHW":
        refuse(f"data_format {data_format!r} is not supported (NCHW)")
    groups = num_groups
    if x.dim() < 2 or dy.shape != x.shape or groups <= 0 or x.shape[1] % groups:
        refuse(f"x {list(x.shape)} / dy {list(dy.shape)} need C divisible by num_groups={groups}")
    n, c = x.shape[0], x.shape[1]
    if mean.numel() != n * groups or rstd.numel() != n * groups or gamma.numel() != c:
        refuse(f"mean/rstd need {n * groups} entries and gamma {c}")
    grouped = [n, groups, -1]
    wide_x = opmath(x).float().reshape(grouped)
    wide_dy = opmath(dy).float()
    g_rstd = rstd.float().reshape(n, groups, 1)
    x_hat = (wide_x - mean.float().reshape(n, groups, 1)) * g_rstd
    channel_shape = [1, c] + [1] * (x.dim() - 2)
    scaled = (wide_dy * gamma.float().reshape(channel_shape)).reshape(grouped)
    if n * c == 0 or x.numel() == 0:
        dx = torch.zeros_like(wide_x)
    else:
        dx = g_rstd * (scaled - scaled.mean(dim=2, keepdim=True) - x_hat * (scaled * x_hat).mean(dim=2, keepdim=True))
    reduce = [0] + list(range(2, x.dim()))
    dgamma = (wide_dy * x_hat.reshape(x.shape)).sum(dim=reduce)
    dbeta = wide_dy.sum(dim=reduce)
    return dx.reshape(x.shape).to(x.dtype), dgamma.to(gamma.dtype), dbeta.to(gamma.dtype)
_SILU_FLOATS = (torch.float16, torch.bfloat16, torch.float32)


@ge_kernel("GroupNormSilu", accepts={"x": _SILU_FLOATS, "gamma": _SILU_FLOATS, "beta": _SILU_FLOATS})
def group_norm_silu(x, gamma, beta, *, num_groups, eps):
    """x read as (N, C, *), statistics per sample and group over float32 values."""
    if x.dim() < 2:
        refuse(f"x must be (N, C, *), got shape {list(x.shape)}")
    n, c = x.shape[0], x.shape[1]
    if num_groups <= 0 or c % num_groups:
        refuse(f"num_groups {num_groups} must divide the {c} channels")
    for name, tensor in (("gamma", gamma), ("beta", beta)):
        if tensor is not None and list(tensor.shape) != [c]:
            refuse(f"{name} must have shape [{c}], got {list(tensor.shape)}")
    grouped = x.float().reshape(n, num_groups, -1)
    mean = grouped.mean(dim=-1, keepdim=True)
    centred = grouped - mean
    rstd = 1.0 / torch.sqrt((centred * centred).mean(dim=-1, keepdim=True) + eps)
    channel = [1, c] + [1] * (x.dim() - 2)
    y = (centred * rstd).reshape(x.shape)
    if gamma is not None:
        y = y * gamma.float().reshape(channel)
    if beta is not None:
        y = y + beta.float().reshape(channel)
    y = y * torch.sigmoid(y)
    stats_dtype = gamma.dtype if gamma is not None and beta is not None else x.dtype  # the wheel's Meta
    return y.to(x.dtype), mean.reshape(n, num_groups).to(stats_dtype), rstd.reshape(n, num_groups).to(stats_dtype)

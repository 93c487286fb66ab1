"""Normalisation GE ops over a sample's features (hicann ops-nn ``norm/``), forward and backward:
LayerNorm, LayerNormV3, LayerNormV4, LayerNormGradV3, RmsNorm, AddRmsNorm (what the shipped YAML
op npu_custom_add_rms_norm maps onto), GroupNorm, GroupNormV2, GroupNormGrad.

The per-channel batch norms (BatchNormV3, BNInfer, the BN*Grad ops, SyncBatchNorm*), which CANN
also files under ``norm/``, are in `norm_batch.py`: their statistics run across the batch and they
read x's layout, a concern of their own.

Formulas from CANN's operator definitions (REG_OP docs; the ops-nn ``norm/*`` READMEs); TorchAir's
converters are ``ge_converter/aten/native_layer_norm*.py``, ``native_group_norm*.py`` and
``custom/npu_add_rms_norm.py``. Statistics of 16-bit float inputs are computed in float32, as the
NPU kernels do.
"""
from __future__ import annotations

import torch

from ..registry import ge_kernel, refuse
from .common import int_list, opmath

_FLOATS = (torch.float16, torch.float32, torch.bfloat16)


# ---- layer norm -----------------------------------------------------------------------------------

def _normalise(wide, dims, epsilon):
    """Normalised x, mean, variance and rstd (kept dims) over ``dims`` of an already widened x."""
    mean = wide.mean(dim=dims, keepdim=True)
    variance = ((wide - mean) ** 2).mean(dim=dims, keepdim=True)
    rstd = torch.rsqrt(variance + epsilon)
    return (wide - mean) * rstd, mean, variance, rstd


def _affine(normed, gamma, beta):
    if gamma is not None:
        normed = normed * gamma
    if beta is not None:
        normed = normed + beta
    return normed


@ge_kernel("LayerNormV4", widen=True)
def layer_norm_v4(x, normalized_shape, gamma, beta, *, epsilon):
    """The one aten op eager calls (aten.native_layer_norm lowers to LayerNormV4), on float32 for
    16-bit inputs as the NPU kernel computes its statistics; mean/rstd in x's dtype, as
    aten.native_layer_norm's meta (and so the graph) declares them."""
    return torch.native_layer_norm(x, int_list(normalized_shape), gamma, beta, epsilon)


def _layer_norm_v1_v3(returns_rstd):
    def layer_norm(x, gamma, beta, *, begin_norm_axis, begin_params_axis, epsilon):
        """y = (x - mean) * rstd * gamma + beta over the dims from begin_norm_axis; the third output
        is the variance (LayerNorm) or the reciprocal std (LayerNormV3)."""
        begin_norm_axis %= x.dim()
        if begin_params_axis % x.dim() != begin_norm_axis:
            refuse("begin_params_axis != begin_norm_axis is not supported by the simulator")
        normed, mean, variance, rstd = _normalise(x, list(range(begin_norm_axis, x.dim())), epsilon)
        return _affine(normed, gamma, beta), mean, rstd if returns_rstd else variance

    layer_norm.__name__ = "layer_norm_v3" if returns_rstd else "layer_norm"
    return layer_norm


# The prototypes' epsilon defaults differ (1e-7 for LayerNorm, 1e-5 for LayerNormV3): the binder
# gives each its own.
layer_norm = ge_kernel("LayerNorm", widen=True)(_layer_norm_v1_v3(returns_rstd=False))
layer_norm_v3 = ge_kernel("LayerNormV3", widen=True)(_layer_norm_v1_v3(returns_rstd=True))


@ge_kernel("LayerNormGradV3", one_dtype=("dy", "x"),
           accepts={"dy": _FLOATS, "x": _FLOATS, "rstd": _FLOATS, "mean": _FLOATS, "gamma": _FLOATS})
def layer_norm_grad_v3(dy, x, rstd, mean, gamma):
    """Gradients of y = (x - mean) * rstd * gamma (+ beta) over the trailing gamma.dim() dims of x.

    mean/rstd hold x's leading dims (with or without kept 1-dims); pd_gamma/pd_beta sum over the leading
    dims and have gamma's shape and dtype.
    """
    norm_rank = gamma.dim()
    if norm_rank > x.dim() or list(x.shape[x.dim() - norm_rank:]) != list(gamma.shape) or dy.shape != x.shape:
        refuse(f"x {list(x.shape)}, dy {list(dy.shape)} and gamma {list(gamma.shape)} do not match "
               "(gamma is x's trailing dims)")
    lead = x.dim() - norm_rank
    if rstd.numel() != mean.numel() or rstd.numel() != x.shape[:lead].numel():
        refuse(f"mean {list(mean.shape)} / rstd {list(rstd.shape)} must hold one value per leading "
               f"position of x {list(x.shape[:lead])}")
    stat_shape = list(x.shape[:lead]) + [1] * norm_rank
    wide_x, wide_dy = opmath(x).float(), opmath(dy).float()
    wide_rstd = rstd.float().reshape(stat_shape)
    x_hat = (wide_x - mean.float().reshape(stat_shape)) * wide_rstd
    scaled = wide_dy * gamma.float()
    norm_dims = list(range(lead, x.dim()))
    if norm_dims:
        pd_x = wide_rstd * (scaled - scaled.mean(dim=norm_dims, keepdim=True)
                            - x_hat * (scaled * x_hat).mean(dim=norm_dims, keepdim=True))
    else:  # no normalised dims: y = gamma * (x - mean) * rstd per element
        pd_x = wide_rstd * scaled
    lead_dims = list(range(lead))
    pd_gamma = (wide_dy * x_hat).sum(dim=lead_dims) if lead_dims else wide_dy * x_hat
    pd_beta = wide_dy.sum(dim=lead_dims) if lead_dims else wide_dy
    return pd_x.to(x.dtype), pd_gamma.to(gamma.dtype), pd_beta.to(gamma.dtype)


# ---- rms norm -------------------------------------------------------------------------------------

@ge_kernel("RmsNorm")
def rms_norm(x, gamma, *, epsilon):
    """y = x * rstd * gamma, rstd = rsqrt(mean(x^2) + epsilon) over gamma's trailing dims of x;
    rstd is float32 whatever x is (so the output dtypes are explicit, not the decorator's widening)."""
    dims = list(range(x.dim() - gamma.dim(), x.dim()))
    wide = opmath(x)
    rstd = torch.rsqrt(wide.pow(2).mean(dim=dims, keepdim=True) + epsilon)
    return (wide * rstd * opmath(gamma)).to(x.dtype), rstd.float()


@ge_kernel("AddRmsNorm")
def add_rms_norm(x1, x2, gamma, *, epsilon):
    """y = rmsnorm(x1 + x2) * gamma, rstd (float32), x = x1 + x2 (in the input dtype)."""
    x = (opmath(x1) + opmath(x2)).to(x1.dtype)
    y, rstd = rms_norm(x, gamma, epsilon=epsilon)   # the RmsNorm kernel on the sum
    return y, rstd, x


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

"""Layer normalisation GE ops (hicann ops-nn ``norm/``), forward and backward: LayerNorm, LayerNormV3,
LayerNormV4, LayerNormGradV3. The RMS norms are in `rms_norm.py`, the group norms in `group_norm.py`.

The per-channel batch norms (BatchNormV3, BNInfer, the BN*Grad ops, SyncBatchNorm*), which CANN
also files under ``norm/``, are in `batch_norm.py`: their statistics run across the batch and they
read x's layout, a concern of their own.

Formulas from CANN's operator definitions (REG_OP docs; the ops-nn ``norm/*`` READMEs); TorchAir's
converters are ``ge_converter/aten/native_layer_norm*.py``. Statistics of 16-bit float inputs are computed in
float32, as the
NPU kernels do.
"""
from __future__ import annotations

import torch
from ...registry import ge_kernel, refuse
from ..common import int_list, opmath

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


@ge_kernel("LayerNormV4", widen=True, prepared=True)
def layer_norm_v4(x, normalized_shape, gamma, beta, *, epsilon):
    """The one aten op eager calls (aten.native_layer_norm lowers to LayerNormV4), on float32 for
    16-bit inputs as the NPU kernel computes its statistics; mean/rstd in x's dtype, as
    aten.native_layer_norm's meta (and so the graph) declares them. A fixed normalized_shape is read once."""
    norm = torch.native_layer_norm
    if normalized_shape.value is not None:
        shape = int_list(normalized_shape.value)
        return lambda x, normalized_shape, gamma, beta: norm(x, shape, gamma, beta, epsilon)
    return lambda x, normalized_shape, gamma, beta: norm(x, int_list(normalized_shape), gamma, beta, epsilon)


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

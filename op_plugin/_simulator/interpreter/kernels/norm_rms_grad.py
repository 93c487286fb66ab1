"""RmsNormGrad (CANN ops-nn ``norm/rms_norm_grad``): the gradient of RmsNorm, what TorchAir lowers
torch_npu's npu_rms_norm_backward to.

From CANN's definition: with ``xr = x * rstd`` (rstd the float32 forward output, with size-1 normalized
dims) and ``g = dy * gamma``, ``dx = rstd * (g - xr * mean(g * xr))`` over the normalized dims (the last
``gamma.dim()``), ``dgamma = sum(dy * xr)`` over the others, in float32; dx in x's dtype, dgamma float32.
"""
from __future__ import annotations

import torch

from ..registry import ge_kernel, refuse
from .common import opmath

_FLOATS = (torch.float16, torch.float32, torch.bfloat16)


@ge_kernel("RmsNormGrad", one_dtype=("dy", "x"), accepts={"dy": _FLOATS, "x": _FLOATS, "gamma": _FLOATS,
                                                          "rstd": (torch.float32,)})
def rms_norm_grad(dy, x, rstd, gamma):
    k = gamma.dim()
    if k > x.dim() or tuple(x.shape[x.dim() - k:]) != tuple(gamma.shape):
        refuse(f"gamma {tuple(gamma.shape)} is not the trailing shape of x {tuple(x.shape)}")
    norm_dims = tuple(range(x.dim() - k, x.dim()))
    batch_dims = tuple(range(x.dim() - k))
    try:
        xr = opmath(x).float() * rstd
    except RuntimeError:
        refuse(f"rstd {tuple(rstd.shape)} does not broadcast against x {tuple(x.shape)}")
    grad = opmath(dy).float()
    g = grad * opmath(gamma).float()
    dx = rstd * (g - xr * (g * xr).mean(dim=norm_dims, keepdim=True))
    dgamma = grad * xr
    if batch_dims:
        dgamma = dgamma.sum(dim=batch_dims)
    return dx.to(x.dtype), dgamma

"""SwiGluGrad (CANN ops-nn ``activation/swi_glu_grad``): the gradient of SwiGlu, what TorchAir lowers
torch_npu's npu_swiglu_backward to.

SwiGlu splits x along ``dim`` into ``A, B`` and computes ``A * sigmoid(A) * B``; its gradient, with
``s = sigmoid(A)``: ``dA = dy * B * (s + A * s * (1 - s))``, ``dB = dy * A * s``, concatenated along ``dim``
(float32 inside, rounded to x's dtype).
"""
from __future__ import annotations

import torch

from ..registry import ge_kernel, refuse
from .common import opmath

_FLOATS = (torch.float16, torch.float32, torch.bfloat16)


@ge_kernel("SwiGluGrad", one_dtype=("y_grad", "x"), accepts={"x": _FLOATS})
def swi_glu_grad(y_grad, x, *, dim):
    if x.dim() == 0 or not -x.dim() <= dim < x.dim() or x.shape[dim] % 2:
        refuse(f"dim={dim} of x {tuple(x.shape)} must exist and have an even size")
    left, right = torch.split(opmath(x).float(), x.shape[dim] // 2, dim=dim)
    grad = opmath(y_grad).float()
    if tuple(grad.shape) != tuple(left.shape):
        refuse(f"y_grad {tuple(y_grad.shape)} must have the shape of half of x, {tuple(left.shape)}")
    sig = torch.sigmoid(left)
    d_left = grad * right * (sig + left * sig * (1 - sig))
    d_right = grad * left * sig
    return torch.cat((d_left, d_right), dim=dim).to(x.dtype)

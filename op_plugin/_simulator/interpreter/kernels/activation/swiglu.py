"""The gated linear units (CANN ops-nn ``activation/``), forward and backward: GLU (dim), GLUGrad, SwiGlu (what
TorchAir lowers torch_npu's npu_swiglu to) and SwiGluGrad (``activation/swi_glu_grad``, what TorchAir lowers
npu_swiglu_backward to).

SwiGlu splits x along ``dim`` into ``A, B`` and computes ``A * sigmoid(A) * B``; its gradient, with
``s = sigmoid(A)``: ``dA = dy * B * (s + A * s * (1 - s))``, ``dB = dy * A * s``, concatenated along ``dim``
(float32 inside, rounded to x's dtype). 16-bit float inputs are computed in float32 and rounded once.
"""
from __future__ import annotations

import torch
from ...registry import ge_kernel, refuse
from ..common import opmath
_FLOATS = (torch.float16, torch.float32, torch.bfloat16)


@ge_kernel("GLU", accepts={"x": (torch.float16, torch.bfloat16, torch.float32, torch.float64)}, widen=True)
def glu(x, *, dim):
    """Split x in two halves a, b along dim; y = a * sigmoid(b)."""
    if x.dim() == 0 or not -x.dim() <= dim < x.dim():
        refuse(f"dim {dim} is out of range for x of shape {tuple(x.shape)}")
    if x.shape[dim] % 2:
        refuse(f"dim {dim} of x {tuple(x.shape)} has odd size {x.shape[dim]}; GLU halves it")
    first, second = x.chunk(2, dim=dim)
    return first * torch.sigmoid(second)


@ge_kernel("SwiGlu", accepts={"x": _FLOATS}, widen=True)
def swi_glu(x, *, dim):
    """CANN SwiGlu: x split in halves A, B along `dim`; y = A * sigmoid(A) * B (float32, rounded once)."""
    if x.dim() == 0 or not -x.dim() <= dim < x.dim() or x.shape[dim] % 2:
        refuse(f"dim {dim} of x with shape {tuple(x.shape)} must exist and have an even size")
    a, b = x.chunk(2, dim=dim)
    return a * torch.sigmoid(a) * b


@ge_kernel("GLUGrad", one_dtype=("y_grad", "x"), accepts={"x": _FLOATS + (torch.float64,)}, widen=True)
def glu_grad(y_grad, x, *, dim):
    """x = [a, b] split in halves along dim, glu = a * sigmoid(b):
    d a = y_grad * sigmoid(b), d b = y_grad * a * sigmoid(b) * (1 - sigmoid(b))."""
    if x.dim() == 0:
        refuse("x must have at least one dim")
    if not -x.dim() <= dim < x.dim():
        refuse(f"dim {dim} is out of range for x of rank {x.dim()}")
    if x.shape[dim] % 2:
        refuse(f"x dim {dim} has odd size {x.shape[dim]}; GLU halves it")
    a, b = x.chunk(2, dim=dim)
    if list(y_grad.shape) != list(a.shape):
        refuse(f"y_grad shape {list(y_grad.shape)} must be x's with dim {dim} halved, {list(a.shape)}")
    gate = torch.sigmoid(b)
    return torch.cat([y_grad * gate, y_grad * a * gate * (1 - gate)], dim=dim)


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

"""RotaryMulGrad (CANN ops-transformer ``posembedding/rotary_mul_grad``): the gradient of RotaryMul, what
TorchAir lowers torch_npu's npu_rotary_mul_backward to (off Ascend 950; it has no mode: the half rotation,
as RotaryMul).

RotaryMul computes ``y = x * r1 + rotate_half(x) * r2`` with ``rotate_half(x) = cat(-x2, x1)`` of x's halves;
so ``dx = dy * r1 + rotate_half^T(dy * r2)`` with ``rotate_half^T(g) = cat(g2, -g1)``, ``dr1 = dy * x`` and
``dr2 = dy * rotate_half(x)`` summed over the dims r1/r2 broadcast along (float32 inside, rounded to x's
dtype). ``need_backward=False`` (dr1/dr2 not computed: their contents are not defined) is refused.
"""
from __future__ import annotations

import torch

from ...registry import ge_kernel, refuse
from ..common import opmath

_FLOATS = (torch.float16, torch.float32, torch.bfloat16)


def _reduce_to(t, shape):
    extra = t.dim() - len(shape)
    if extra < 0:
        refuse(f"r1/r2 of shape {tuple(shape)} have more dims than x")
    if extra:
        t = t.sum(dim=tuple(range(extra)))
    for axis, size in enumerate(shape):
        if size == 1 and t.shape[axis] != 1:
            t = t.sum(dim=axis, keepdim=True)
    if tuple(t.shape) != tuple(shape):
        refuse(f"r1/r2 of shape {tuple(shape)} do not broadcast to x")
    return t


@ge_kernel("RotaryMulGrad", one_dtype=("x", "r1", "r2", "dy"), accepts={"x": _FLOATS})
def rotary_mul_grad(x, r1, r2, dy, *, need_backward):
    if not need_backward:
        refuse("need_backward=False leaves dr1/dr2 undefined; not simulated")
    if x.shape[-1] % 2:
        refuse(f"the last dim {x.shape[-1]} of x must be even")
    half = x.shape[-1] // 2
    wide, grad = opmath(x).float(), opmath(dy).float()
    scaled = grad * opmath(r2).float()
    dx = grad * opmath(r1).float() + torch.cat((scaled[..., half:], -scaled[..., :half]), dim=-1)
    rotated = torch.cat((-wide[..., half:], wide[..., :half]), dim=-1)
    dr1 = _reduce_to(grad * wide, r1.shape)
    dr2 = _reduce_to(grad * rotated, r2.shape)
    return dx.to(x.dtype), dr1.to(x.dtype), dr2.to(x.dtype)

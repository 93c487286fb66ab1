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


def _mode_rotation(t, mode, adjoint):
    """RotaryPositionEmbedding's x_rotate map for mode 0 half, 1 interleave, 2 quarter (3 uses the half
    map after de-interleaving), or its adjoint."""
    s = -1.0 if adjoint else 1.0
    if mode in (0, 3):
        a, b = t.chunk(2, dim=-1)
        return torch.cat((-s * b, s * a), dim=-1)
    if mode == 1:
        return torch.stack((-s * t[..., 1::2], s * t[..., 0::2]), dim=-1).flatten(-2)
    q = t.chunk(4, dim=-1)
    return torch.cat((-s * q[1], s * q[0], -s * q[3], s * q[2]), dim=-1)


@ge_kernel("RotaryPositionEmbeddingGrad", one_dtype=("dy", "cos", "sin"), accepts={"dy": _FLOATS})
def rotary_position_embedding_grad(dy, cos, sin, x, *, mode):
    """The gradient of CANN RotaryPositionEmbedding (y = part1 * cos + part2 * sin; part1 = x, or x
    de-interleaved for mode 3; part2 = x_rotate(part1)): dx = P^T(dy * cos + x_rotate^T(dy * sin)),
    dcos = sum(dy * part1), dsin = sum(dy * part2) over the dims cos/sin broadcast along. TorchAir emits it
    on Ascend 950 only. Without x, dcos/dsin cannot be computed: refused."""
    if mode not in (0, 1, 2, 3):
        refuse(f"mode={mode} is not a CANN mode (0 half, 1 interleave, 2 quarter, 3 interleave-half)")
    if x is None:
        refuse("x is not fed: dcos and dsin are not defined without it")
    if dy.shape[-1] % (4 if mode == 2 else 2):
        refuse(f"the last dim {dy.shape[-1]} does not split for mode {mode}")
    grad, wide = opmath(dy).float(), opmath(x).float()
    part1 = torch.cat((wide[..., 0::2], wide[..., 1::2]), dim=-1) if mode == 3 else wide
    d_part1 = grad * opmath(cos).float() + _mode_rotation(grad * opmath(sin).float(), mode, adjoint=True)
    if mode == 3:  # interleave back: evens from the first half, odds from the second
        first, second = d_part1.chunk(2, dim=-1)
        d_part1 = torch.stack((first, second), dim=-1).flatten(-2)
    dcos = _reduce_to(grad * part1, cos.shape)
    dsin = _reduce_to(grad * _mode_rotation(part1, mode, adjoint=False), sin.shape)
    return d_part1.to(dy.dtype), dcos.to(dy.dtype), dsin.to(dy.dtype)

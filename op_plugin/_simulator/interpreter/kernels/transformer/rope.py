"""Rotary position embedding GE ops (hicann ops-transformer ``posembedding/``): RotaryMul (the
shipped YAML op npu_custom_rotary_mul and torch_npu's npu_rotary_mul without `rotate` map onto it)
and RotaryPositionEmbedding (what TorchAir lowers npu_rotary_mul with `rotate` to).

Written from the ops' CANN definitions (not from op_plugin's reference kernels), so that running a
YAML op through its GE mapping checks the mapping against GE semantics. The outputs are rounded to
x's dtype explicitly: the cos/sin/rotate inputs are not dtype-checked against x, so the decorator's
widening would not be the same computation.
"""
from __future__ import annotations

import torch

from ...registry import ge_kernel, refuse
from ..common import opmath

_FLOATS = (torch.float16, torch.bfloat16, torch.float32)


@ge_kernel("RotaryMul")
def rotary_mul(x, r1, r2):
    """y = x * r1 + rotate_half(x) * r2, rotate_half(x) = cat(-x[..., d/2:], x[..., :d/2])."""
    half = x.shape[-1] // 2
    wide = opmath(x)
    rotated = torch.cat((-wide[..., half:], wide[..., :half]), dim=-1)
    return (wide * opmath(r1) + rotated * opmath(r2)).to(x.dtype)


def _rotated(x, mode):
    """CANN RotaryPositionEmbedding's x_rotate (ops-transformer README) for mode 0-2."""
    if mode == 0:    # half
        first, second = x.chunk(2, dim=-1)
        return torch.cat((-second, first), dim=-1)
    if mode == 1:    # interleave: pairs (x[2i], x[2i+1]) -> (-x[2i+1], x[2i])
        return torch.stack((-x[..., 1::2], x[..., ::2]), dim=-1).flatten(-2)
    quarters = x.chunk(4, dim=-1)  # mode 2, quarter
    return torch.cat((-quarters[1], quarters[0], -quarters[3], quarters[2]), dim=-1)


@ge_kernel("RotaryPositionEmbedding", accepts={"x": _FLOATS, "cos": _FLOATS, "sin": _FLOATS})
def rotary_position_embedding(x, cos, sin, rotate, *, mode):
    """y = x * cos + x_rotate * sin; mode 0 half, 1 interleave, 2 quarter, 3 interleave-half (x itself is
    de-interleaved first). With the optional `rotate` matrix, x_rotate = x @ rotate (torch_npu's
    npu_rotary_mul docs; TorchAir passes it with mode 0 or 1 only, other modes are refused)."""
    if mode not in (0, 1, 2, 3):
        refuse(f"mode={mode} is not a CANN mode (0 half, 1 interleave, 2 quarter, 3 interleave-half)")
    if rotate is not None and mode not in (0, 1):
        refuse(f"a rotate matrix with mode={mode} is not defined (only with mode 0 or 1)")
    if rotate is None and x.shape[-1] % (4 if mode == 2 else 2):
        refuse(f"the last dim {x.shape[-1]} of x is not a multiple of {4 if mode == 2 else 2} for mode {mode}")
    wide = opmath(x).float()
    if rotate is not None:
        part1, part2 = wide, torch.matmul(wide, opmath(rotate).float())
    elif mode == 3:
        odd, even = wide[..., ::2], wide[..., 1::2]
        part1, part2 = torch.cat((odd, even), dim=-1), torch.cat((-even, odd), dim=-1)
    else:
        part1, part2 = wide, _rotated(wide, mode)
    return (part1 * opmath(cos).float() + part2 * opmath(sin).float()).to(x.dtype)

"""Fused Ascend GE ops: AddRmsNorm, RotaryMul (the shipped YAML ops map onto them), SwiGlu and
RotaryPositionEmbedding (what TorchAir lowers torch_npu's npu_swiglu and npu_rotary_mul with `rotate` to).

Written from the ops' CANN definitions (not from op_plugin's reference kernels), so that running a
YAML op through its GE mapping checks the mapping against GE semantics.
"""
from __future__ import annotations

import torch

from .common import check_dtype, fail, opmath
from .norm import rms_norm
from ..registry import builtin_kernel


@builtin_kernel("AddRmsNorm")
def _addrms_norm(inputs, attrs, node):
    """y = rmsnorm(x1 + x2) * gamma, rstd (float32), x = x1 + x2 (in the input dtype)."""
    x1, x2, gamma = inputs
    x = (opmath(x1) + opmath(x2)).to(x1.dtype)
    y, rstd = rms_norm([x, gamma], attrs, node)   # the RmsNorm kernel on the sum
    return [y, rstd, x]


@builtin_kernel("RotaryMul")
def _rotary_mul(inputs, attrs, node):
    """y = x * r1 + rotate_half(x) * r2, rotate_half(x) = cat(-x[..., d/2:], x[..., :d/2])."""
    x, r1, r2 = inputs
    half = x.shape[-1] // 2
    wide = opmath(x)
    rotated = torch.cat((-wide[..., half:], wide[..., :half]), dim=-1)
    return [(wide * opmath(r1) + rotated * opmath(r2)).to(x.dtype)]


def _rotated(x, mode):
    """CANN RotaryPositionEmbedding's x_rotate (ops-transformer README) for mode 0-2."""
    if mode == 0:    # half
        first, second = x.chunk(2, dim=-1)
        return torch.cat((-second, first), dim=-1)
    if mode == 1:    # interleave: pairs (x[2i], x[2i+1]) -> (-x[2i+1], x[2i])
        return torch.stack((-x[..., 1::2], x[..., ::2]), dim=-1).flatten(-2)
    quarters = x.chunk(4, dim=-1)  # mode 2, quarter
    return torch.cat((-quarters[1], quarters[0], -quarters[3], quarters[2]), dim=-1)


@builtin_kernel("RotaryPositionEmbedding")
def _rotary_position_embedding(inputs, attrs, node):
    """y = x * cos + x_rotate * sin; mode 0 half, 1 interleave, 2 quarter, 3 interleave-half (x itself is
    de-interleaved first). With the optional `rotate` matrix, x_rotate = x @ rotate (torch_npu's
    npu_rotary_mul docs; TorchAir passes it with mode 0 or 1 only, other modes are refused)."""
    x, cos, sin, rotate = inputs
    for name, tensor in (("x", x), ("cos", cos), ("sin", sin)):
        check_dtype(node, name, tensor, (torch.float16, torch.bfloat16, torch.float32))
    mode = attrs.get("mode", 0)
    if mode not in (0, 1, 2, 3):
        fail(node, f"mode={mode} is not a CANN mode (0 half, 1 interleave, 2 quarter, 3 interleave-half)")
    if rotate is not None and mode not in (0, 1):
        fail(node, f"a rotate matrix with mode={mode} is not defined (only with mode 0 or 1)")
    if rotate is None and x.shape[-1] % (4 if mode == 2 else 2):
        fail(node, f"the last dim {x.shape[-1]} of x is not a multiple of {4 if mode == 2 else 2} for mode {mode}")
    wide = opmath(x).float()
    if rotate is not None:
        part1, part2 = wide, torch.matmul(wide, opmath(rotate).float())
    elif mode == 3:
        odd, even = wide[..., ::2], wide[..., 1::2]
        part1, part2 = torch.cat((odd, even), dim=-1), torch.cat((-even, odd), dim=-1)
    else:
        part1, part2 = wide, _rotated(wide, mode)
    return [(part1 * opmath(cos).float() + part2 * opmath(sin).float()).to(x.dtype)]

"""CPU kernels for CANN's fused Ascend ops that the shipped YAML ops map onto.

Written from the ops' CANN definitions (not from op_plugin's reference kernels), so that running a
YAML op through its GE mapping checks the mapping against GE semantics.
"""
from __future__ import annotations

import torch

from ._ge_kernels import _rms_norm
from ._ge_registry import builtin_kernel


def _opmath(t: torch.Tensor) -> torch.Tensor:
    return t.float() if t.dtype in (torch.float16, torch.bfloat16) else t


@builtin_kernel("AddRmsNorm")
def _add_rms_norm(inputs, attrs, node):
    """y = rmsnorm(x1 + x2) * gamma, rstd (float32), x = x1 + x2 (in the input dtype)."""
    x1, x2, gamma = inputs
    x = (_opmath(x1) + _opmath(x2)).to(x1.dtype)
    y, rstd = _rms_norm([x, gamma], attrs, node)   # the RmsNorm kernel on the sum
    return [y, rstd, x]


@builtin_kernel("RotaryMul")
def _rotary_mul(inputs, attrs, node):
    """y = x * r1 + rotate_half(x) * r2, rotate_half(x) = cat(-x[..., d/2:], x[..., :d/2])."""
    x, r1, r2 = inputs
    half = x.shape[-1] // 2
    wide = _opmath(x)
    rotated = torch.cat((-wide[..., half:], wide[..., :half]), dim=-1)
    return [(wide * _opmath(r1) + rotated * _opmath(r2)).to(x.dtype)]

"""Fused Ascend GE ops that the shipped YAML ops map onto: AddRmsNorm, RotaryMul.

Written from the ops' CANN definitions (not from op_plugin's reference kernels), so that running a
YAML op through its GE mapping checks the mapping against GE semantics.
"""
from __future__ import annotations

import torch

from .common import opmath
from .norm import rms_norm
from .registry import builtin_kernel


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

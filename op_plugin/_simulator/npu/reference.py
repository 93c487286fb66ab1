"""CPU reference kernels of torch_npu's RMSNorm, rotary and SwiGLU operators (CPU dispatch key).

Semantics from each op's torch_npu documentation (the wheel's ``_op_plugin_docs.py``), computed
in float32 for 16-bit inputs and rounded once to the input dtype:

* ``npu_rms_norm(x, gamma, epsilon)``: ``rstd = 1/sqrt(mean(x^2) + epsilon)`` over the last
  ``gamma.dim()`` dims (float32, kept as size-1 dims), ``y = x * rstd * gamma``.
* ``npu_add_rms_norm(x1, x2, gamma, epsilon)``: ``x = x1 + x2`` (in the input dtype), then the
  RMS norm of ``x``; returns ``(y, rstd, x)``.
* ``npu_rotary_mul(x, r1, r2, rotary_mode, rotate)``: ``r1 * x + r2 * x_new`` with
  ``x_new = cat(-x2, x1)`` of the halves ("half"), the pairs ``(-x[1::2], x[::2])`` interleaved
  ("interleave"), or ``x @ rotate`` when ``rotate`` is given.
* ``npu_swiglu(x, dim)``: ``A, B = chunk(x, 2, dim)``, ``A * sigmoid(A) * B``.
"""
from __future__ import annotations

import torch

from ..._base.numerics import opmath

FLOATS = (torch.float16, torch.bfloat16, torch.float32)


def _check_float(op, **tensors):
    for name, tensor in tensors.items():
        if tensor.dtype not in FLOATS:
            raise TypeError(f"npu::{op}: {name} has dtype {tensor.dtype}; torch_npu takes float16, bfloat16, float32")


def _rms(op, x, gamma, epsilon):
    _check_float(op, self=x, gamma=gamma)
    if gamma.dim() > x.dim() or tuple(x.shape[x.dim() - gamma.dim():]) != tuple(gamma.shape):
        raise ValueError(f"npu::{op}: gamma of shape {tuple(gamma.shape)} is not the trailing shape of {tuple(x.shape)}")
    dims = list(range(x.dim() - gamma.dim(), x.dim()))
    wide = opmath(x).float()
    rstd = torch.rsqrt(wide.pow(2).mean(dim=dims, keepdim=True) + epsilon) if dims else torch.rsqrt(wide.pow(2) + epsilon)
    return (wide * rstd * opmath(gamma).float()).to(x.dtype), rstd


def npu_rms_norm(self, gamma, epsilon=1e-6):
    return _rms("npu_rms_norm", self, gamma, epsilon)


def npu_add_rms_norm(x1, x2, gamma, epsilon=1e-6):
    _check_float("npu_add_rms_norm", x1=x1, x2=x2)
    x = (opmath(x1).float() + opmath(x2).float()).to(x1.dtype)
    y, rstd = _rms("npu_add_rms_norm", x, gamma, epsilon)
    return y, rstd, x


def npu_rotary_mul(self, r1, r2, rotary_mode="half", rotate=None):
    _check_float("npu_rotary_mul", self=self, r1=r1, r2=r2)
    if rotate is None and self.shape[-1] % 2:
        raise ValueError(f"npu::npu_rotary_mul: the last dim {self.shape[-1]} must be even")
    x = opmath(self).float()
    if rotate is not None:
        rotated = torch.matmul(x, opmath(rotate).float())
    elif rotary_mode == "half":
        first, second = x.chunk(2, dim=-1)
        rotated = torch.cat((-second, first), dim=-1)
    elif rotary_mode == "interleave":
        rotated = torch.stack((-x[..., 1::2], x[..., ::2]), dim=-1).flatten(-2)
    else:
        raise ValueError(f"npu::npu_rotary_mul: rotary_mode {rotary_mode!r} is not 'half' or 'interleave'")
    return (x * opmath(r1).float() + rotated * opmath(r2).float()).to(self.dtype)


def npu_swiglu(self, dim=-1):
    _check_float("npu_swiglu", self=self)
    if self.dim() == 0 or self.shape[dim] % 2:
        raise ValueError(f"npu::npu_swiglu: dim {dim} of shape {tuple(self.shape)} must have an even size")
    a, b = opmath(self).float().chunk(2, dim=dim)
    return (a * torch.sigmoid(a) * b).to(self.dtype)


KERNELS = {
    "npu_rms_norm": npu_rms_norm,
    "npu_add_rms_norm": npu_add_rms_norm,
    "npu_rotary_mul": npu_rotary_mul,
    "npu_swiglu": npu_swiglu,
}

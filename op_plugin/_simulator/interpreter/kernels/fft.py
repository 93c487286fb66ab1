"""Fourier transform GE ops: FFT (last axis), FFT2D (last two axes); forward, unnormalised.

TorchAir's _fft_c2c converter permutes the transformed dims last and divides by the signal size
itself for normalisation; it lowers an inverse transform (forward=False) to the same forward FFT,
so compiled torch.fft.ifft differs from eager (a TorchAir limitation, not the kernel's).
"""
from __future__ import annotations

import torch

from .common import check_dtype, fail
from ..registry import builtin_kernel

_COMPLEX = (torch.complex64, torch.complex128)


@builtin_kernel("FFT")
def _fft(inputs, attrs, node):
    x = inputs[0]
    check_dtype(node, "x", x, _COMPLEX)
    if x.dim() < 1:
        fail(node, "x needs at least one axis")
    return [torch.fft.fft(x, dim=-1)]


@builtin_kernel("FFT2D")
def _fft_2d(inputs, attrs, node):
    x = inputs[0]
    check_dtype(node, "x", x, _COMPLEX)
    if x.dim() < 2:
        fail(node, f"x needs at least two axes, got shape {list(x.shape)}")
    return [torch.fft.fft2(x, dim=(-2, -1))]

"""CANN's math ops (hicann ops-math `math/`) on complex numbers: Real, Imag and Complex (whose
`Tout` attr names the output dtype), and the Fourier transforms FFT / IFFT (last axis) and FFT2D /
IFFT2D (last two axes): the forward ones unnormalised, the inverse ones scaled by 1/n (CANN's spectral_ops.h:
"Compatible with TensorFlow IFFT operator", whose inverse divides by the transformed size).

Kept apart from the real-valued math so no module grows past ~400 lines. Each follows its CANN
prototype (TorchAir's `_ge_concrete_graph/auto_generated_ge_raw_ops.py`). TorchAir's _fft_c2c
converter never reads `forward` (an inverse lowered as a forward FFT) and permutes with an order short
of one dim; op_plugin corrects it (`_lowering/fft_corrections.py`), using IFFT / IFFT2D for inverses.
"""
from __future__ import annotations

import torch
from ...registry import ge_kernel, refuse
from ..common import attr_dtype, fresh

_COMPLEX = (torch.complex64, torch.complex128)
_REAL = (torch.float32, torch.float64)


def _tout(tout, allowed):
    """The dtype the Tout attr names (CANN's REG_OP default: DT_FLOAT for Real/Imag, DT_COMPLEX64
    for Complex), refused unless it is one of `allowed`."""
    dtype = attr_dtype("Tout", tout)
    if dtype not in allowed:
        refuse(f"Tout {dtype} is not one of {', '.join(map(str, allowed))}")
    return dtype


@ge_kernel("Real", accepts={"input": _COMPLEX})
def real(input, *, Tout):
    """The real part of a complex tensor, in the dtype Tout names (DT_FLOAT by default)."""
    # torch.real is a strided view and .to of the same dtype returns it: fresh() copies it, so the
    # output never aliases the input's storage.
    return fresh(torch.real(input).to(_tout(Tout, _REAL)))


@ge_kernel("Imag", accepts={"input": _COMPLEX})
def imag(input, *, Tout):
    """The imaginary part of a complex tensor, in the dtype Tout names (DT_FLOAT by default)."""
    return fresh(torch.imag(input).to(_tout(Tout, _REAL)))  # a buffer of its own, as Real's


@ge_kernel("Complex", one_dtype=("real", "imag"), accepts={"real": _REAL, "imag": _REAL})
def complex_(real, imag, *, Tout):
    """out = real + i * imag (broadcasting), in the dtype Tout names (DT_COMPLEX64 by default)."""
    dtype = _tout(Tout, _COMPLEX)
    real, imag = torch.broadcast_tensors(real, imag)
    return torch.complex(real, imag).to(dtype)


@ge_kernel("FFT", accepts={"x": _COMPLEX})
def fft(x):
    if x.dim() < 1:
        refuse("x needs at least one axis")
    return torch.fft.fft(x, dim=-1)


@ge_kernel("FFT2D", accepts={"x": _COMPLEX})
def fft_2d(x):
    if x.dim() < 2:
        refuse(f"x needs at least two axes, got shape {list(x.shape)}")
    return torch.fft.fft2(x, dim=(-2, -1))


@ge_kernel("IFFT", accepts={"x": _COMPLEX})
def ifft(x):
    """The inverse DFT over the last axis, scaled by 1/n (TensorFlow's IFFT)."""
    if x.dim() < 1:
        refuse("x needs at least one axis")
    return torch.fft.ifft(x, dim=-1, norm="backward")


@ge_kernel("IFFT2D", accepts={"x": _COMPLEX})
def ifft_2d(x):
    """The inverse DFT over the last two axes, scaled by 1/(n1 n2) (TensorFlow's IFFT2D)."""
    if x.dim() < 2:
        refuse(f"x needs at least two axes, got shape {list(x.shape)}")
    return torch.fft.ifft2(x, dim=(-2, -1), norm="backward")

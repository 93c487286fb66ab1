"""Tests of kernels/math/complex.py: Real, Imag, Complex, FFT, FFT2D.
"""
from __future__ import annotations

import pytest
import torch

from op_plugin._simulator import GeExecutionError
from op_plugin._testing_harness import run_node

from tests.simulator.kernels.helpers import F32, F64, I32


@pytest.mark.parametrize("dtype,tout", [(torch.complex64, F32), (torch.complex128, F64), (torch.complex64, F64)])
def test_real_imag_write_the_tout_dtype(dtype, tout):
    z = torch.randn(2, 3, dtype=dtype)
    for op_type, part in (("Real", z.real), ("Imag", z.imag)):
        (got,) = run_node(op_type, [z], [(tout, [2, 3])], Tout=tout)
        torch.testing.assert_close(got, part.to(tout))


def test_real_refuses_an_integer_tout():
    with pytest.raises(Exception, match=r"Real \(node 'op'\): Tout"):
        run_node("Real", [torch.randn(2, dtype=torch.complex64)], [(I32, [2])], Tout=I32)


def test_complex_broadcasts_and_writes_tout():
    real, imag = torch.randn(2, 1, dtype=F64), torch.randn(3, dtype=F64)
    (got,) = run_node("Complex", [real, imag], [(torch.complex128, [2, 3])],
                      Tout=torch.complex128)
    torch.testing.assert_close(got, torch.complex(*torch.broadcast_tensors(real, imag)))


def test_fft_kernels_and_dtype_checks():
    x = torch.randn(2, 3, 4, dtype=torch.complex128)
    torch.testing.assert_close(run_node("FFT", [x])[0], torch.fft.fft(x))
    torch.testing.assert_close(run_node("FFT2D", [x])[0], torch.fft.fft2(x))
    with pytest.raises(GeExecutionError, match="dtype float32"):
        run_node("FFT", [torch.randn(4)])

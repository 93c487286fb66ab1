"""Tests of kernels/math/complex.py's IFFT and IFFT2D against a float64 inverse DFT written from its
definition, scaled by 1/n as CANN's spectral_ops.h says ("Compatible with TensorFlow IFFT operator").
"""
from __future__ import annotations

import math

import pytest
import torch

from op_plugin._simulator import GeExecutionError
from op_plugin._testing_harness import run_node


def _inverse_dft(x: torch.Tensor, dims) -> torch.Tensor:
    """x[n] = (1/N) sum_k X[k] exp(+2 pi i k n / N) over each dim of `dims`, in complex128."""
    out = x.to(torch.complex128)
    for d in dims:
        n = out.shape[d]
        k = torch.arange(n, dtype=torch.float64)
        matrix = torch.exp(2j * math.pi * torch.outer(k, k) / n) / n
        out = torch.movedim(torch.tensordot(torch.movedim(out, d, -1), matrix, dims=([-1], [1])), -1, d)
    return out


@pytest.mark.parametrize("dtype, tol", [(torch.complex64, 1e-5), (torch.complex128, 1e-12)])
def test_ifft_kernels_scale_by_one_over_n(dtype, tol):
    x = torch.randn(2, 3, 5, dtype=dtype)
    for ge_type, dims in (("IFFT", [-1]), ("IFFT2D", [-2, -1])):
        got = run_node(ge_type, [x])[0]
        assert got.dtype == dtype
        torch.testing.assert_close(got.to(torch.complex128), _inverse_dft(x, dims), rtol=tol, atol=tol)


def test_ifft_kernels_refuse_real_input_and_too_few_axes():
    with pytest.raises(GeExecutionError, match="dtype float32"):
        run_node("IFFT", [torch.randn(4)])
    with pytest.raises(GeExecutionError, match="two axes"):
        run_node("IFFT2D", [torch.randn(4, dtype=torch.complex64)])

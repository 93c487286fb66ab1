"""Tests of kernels/activation/softmax.py: SoftmaxV2, LogSoftmaxV2, their grads, MaskedSoftmaxWithRelPosBias.
"""
from __future__ import annotations

import pytest
import torch

from op_plugin._testing_harness import run_node

from tests.simulator.kernels.helpers import _IDS, _r, aten, BF16, check_grad_case, F16, F32


@pytest.mark.parametrize("dtype", [F32, F16, BF16], ids=_IDS.get)
@pytest.mark.parametrize("dim", [-1, 0, 1])
def test_softmax_grad(dtype, dim):
    torch.manual_seed(0)
    y = torch.softmax(torch.randn(4, 6), dim=dim).to(dtype)
    g = torch.randn(4, 6).to(dtype)
    check_grad_case(lambda a, b: aten._softmax_backward_data(a, b, dim, dtype), (g, y), "SoftmaxGrad",
                    oracle=lambda a, b: aten._softmax_backward_data(a, b, dim, F32), scale=4.0)


def test_softmax_grad_1d():
    y, g = torch.softmax(torch.randn(16), 0), torch.randn(16)
    check_grad_case(lambda a, b: aten._softmax_backward_data(a, b, -1, F32), (g, y), "SoftmaxGrad")


@pytest.mark.parametrize("dtype", [F32, F16, BF16], ids=_IDS.get)
@pytest.mark.parametrize("dim", [-1, 0, 2])
def test_log_softmax_grad(dtype, dim):
    torch.manual_seed(0)
    y = torch.log_softmax(torch.randn(3, 4, 5), dim=dim).to(dtype)
    g = torch.randn(3, 4, 5).to(dtype)
    check_grad_case(lambda a, b: aten._log_softmax_backward_data(a, b, dim, dtype), (g, y), "LogSoftmaxGrad",
                    oracle=lambda a, b: aten._log_softmax_backward_data(a, b, dim, F32), scale=4.0)


def test_log_softmax_has_no_half_to_float():
    x = _r(2, 3, dtype=F16)
    assert run_node("LogSoftmaxV2", [x], axes=[-1], half_to_float=True)[0].dtype == F16
    assert run_node("SoftmaxV2", [x], axes=[-1], half_to_float=True)[0].dtype == F32

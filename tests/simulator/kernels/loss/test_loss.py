"""Tests of kernels/loss/loss.py: MseLoss, MseLossGrad, NLLLoss, NLLLossGrad.
"""
from __future__ import annotations

import pytest
import torch

from op_plugin._simulator import GeExecutionError
from op_plugin._testing_harness import run_node

from tests.simulator.kernels.helpers import _IDS, _r, aten, check_grad_case, F16, F32, I32, I64


# ---- losses and embedding -----------------------------------------------------------------------------

@pytest.mark.parametrize("reduction", [0, 1, 2], ids=["none", "mean", "sum"])
@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
@pytest.mark.parametrize("rows", [5, None], ids=["2d", "1d"])
def test_nll_loss_grad(reduction, weighted, rows):
    torch.manual_seed(0)
    shape = (rows, 4) if rows else (4,)
    x = torch.log_softmax(torch.randn(shape), -1)
    if rows is None and not weighted:
        pytest.skip("TorchAir's converter builds the default weight with GatherV2(Shape(x), 1): 1-D x without "
                    "weight fails in the converter's own graph, on an NPU too")
    target = torch.tensor([0, 3, 1, 3, 2]) if rows else torch.tensor(3)
    if rows:
        target[2] = -100  # ignore_index
    weight = torch.rand(4) + 0.5 if weighted else None
    _, total_weight = aten.nll_loss_forward(x, target, weight, reduction, -100)
    g = torch.randn(rows) if (reduction == 0 and rows) else torch.randn(())

    def fn(g, x, target, weight, total_weight):
        return aten.nll_loss_backward(g, x, target, weight, reduction, -100, total_weight)

    check_grad_case(fn, (g, x, target, weight, total_weight), "NLLLossGrad")


@pytest.mark.parametrize("reduction", [0, 1, 2], ids=["none", "mean", "sum"])
@pytest.mark.parametrize("dtype", [F32, F16], ids=_IDS.get)
def test_mse_loss_grad(reduction, dtype):
    torch.manual_seed(0)
    x, y = torch.randn(3, 4, 5).to(dtype), torch.randn(3, 4, 5).to(dtype)
    g = (torch.randn(3, 4, 5) if reduction == 0 else torch.randn(())).to(dtype)
    check_grad_case(lambda g, x, y: aten.mse_loss_backward(g, x, y, reduction), (g, x, y), "MseLossGrad", scale=4.0)


def test_nll_loss_none_reports_total_weight_and_refuses_bad_targets():
    x, t, w = _r(3, 4), torch.tensor([1, 2, 3], dtype=I32), torch.tensor([1.0, 2.0, 3.0, 4.0])
    y, total = run_node("NLLLoss", [x, t, w], reduction="none", ignore_index=2)
    torch.testing.assert_close(y, aten.nll_loss_forward(x, t.long(), w, 0, 2)[0])
    torch.testing.assert_close(total, torch.tensor(6.0))  # CANN: sum of w[y_n] (torch eager gives 0)
    with pytest.raises(GeExecutionError, match="outside"):
        run_node("NLLLoss", [x, torch.tensor([0, 4, 1]), None])
    with pytest.raises(GeExecutionError, match="reduction"):
        run_node("NLLLoss", [x, t, None], reduction="avg")


def test_mse_loss_refuses_unknown_reduction_and_int():
    with pytest.raises(GeExecutionError, match="reduction"):
        run_node("MseLoss", [_r(2), _r(2)], reduction="max")
    with pytest.raises(GeExecutionError, match="dtype int64"):
        run_node("MseLoss", [torch.ones(2, dtype=I64), torch.ones(2, dtype=I64)])

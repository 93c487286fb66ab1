"""Tests of kernels/norm/group_norm.py: GroupNorm(V2), GroupNormGrad, GroupNormSilu.
"""
from __future__ import annotations

import pytest
import torch

from op_plugin._simulator import GeExecutionError
from op_plugin._testing_harness import assert_close, run_node

from tests.simulator.kernels.helpers import _r, aten, BF16, F32


def test_group_norm_grad_hand_built():
    """GroupNormGrad (arch35 only): x [N, C, HxW], mean/rstd [N, G]."""
    torch.manual_seed(0)
    x, g, w = torch.randn(3, 6, 10), torch.randn(3, 6, 10), torch.randn(6)
    _, mean, rstd = aten.native_group_norm(x, w, None, 3, 6, 10, 2, 1e-5)
    got = run_node("GroupNormGrad", [g, mean, rstd, x, w],
                   [(F32, x.shape), (F32, [6]), (F32, [6])], num_groups=2)
    want = aten.native_group_norm_backward(g, x, mean, rstd, w, 3, 6, 10, 2, [True, True, True])
    assert_close(list(got), list(want), "accumulated")


@pytest.mark.parametrize("op_type", ["GroupNorm", "GroupNormV2"])
def test_group_norm_outputs(op_type):
    x, g, b = _r(2, 6, 5), _r(6), _r(6)
    y, mean, third = run_node(op_type, [x, g, b], num_groups=3, eps=1e-2, data_format="NHWC", is_training=True)
    e_y, e_mean, e_rstd = aten.native_group_norm(x, g, b, 2, 6, 5, 3, 1e-2)
    assert_close(y, e_y, "reduction")
    assert_close(mean, e_mean, "reduction")
    want_third = e_rstd if op_type == "GroupNormV2" else e_rstd.pow(-2) - 1e-2
    assert_close(third, want_third, "reduction")
    with pytest.raises(GeExecutionError, match="must divide"):
        run_node(op_type, [x, g, b], num_groups=4)


def test_group_norm_v2_bf16_and_default_eps():
    x, g, b = _r(2, 4, 3, dtype=BF16), _r(4, dtype=BF16), _r(4, dtype=BF16)
    y, _, _ = run_node("GroupNormV2", [x, g, b], num_groups=2)
    e_y = aten.native_group_norm(x.float(), g.float(), b.float(), 2, 4, 3, 2, 1e-5)[0]
    assert_close(y, e_y.to(BF16), "reduction")
    with pytest.raises(GeExecutionError, match="dtype bfloat16"):
        run_node("GroupNorm", [x, g, b], num_groups=2)

"""Tests of kernels/shape/creation.py: Fill(D), Empty, Range, LinSpace.
"""
from __future__ import annotations

import pytest
import torch

from op_plugin._simulator import capture_graphs
from op_plugin._testing_harness import check_compiled, Const, run_node

from tests.simulator.kernels.helpers import aten, BOOL, F32, I32, I64


# ---- Empty / LinSpace -----------------------------------------------------------------------------

def test_new_empty_strided_shape_and_dtype():
    torch._dynamo.reset()
    x = torch.randn(4, 3)
    with capture_graphs() as graphs:
        got = torch.compile(lambda x: aten.new_empty_strided(x, [2, 5], [5, 1]), backend="npugraph")(x)
    assert got.shape == (2, 5) and got.dtype == F32
    assert "Empty" in [op.type for g in graphs for op in g.op]


@pytest.mark.parametrize("dtype_code,dtype", [(0, F32), (3, I32), (9, I64), (12, BOOL)])
def test_empty_hand_built(dtype_code, dtype):
    (got,) = run_node("Empty", [Const(torch.tensor([2, 0, 3], dtype=I32))], [(dtype, [2, 0, 3])],
                      dtype=dtype_code, init=True)
    assert got.shape == (2, 0, 3) and got.dtype == dtype


@pytest.mark.parametrize("start,end,steps", [(0.125, 0.875, 7), (-3.0, 5.0, 1), (2.0, -2.0, 5), (0.0, 1.0, 2)])
def test_linspace(start, end, steps):
    check_compiled(lambda x: x + aten.linspace(start, end, steps, dtype=F32), (torch.zeros(steps),), "LinSpace",
                   kind="kernel")


def test_fill_d():
    (got,) = run_node("FillD", [Const(torch.tensor([2.5]))], [(F32, [2, 3])], dims=[2, 3])
    assert got.tolist() == [[2.5] * 3] * 2

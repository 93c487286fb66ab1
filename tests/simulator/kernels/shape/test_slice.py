"""Tests of kernels/shape/slice.py: Slice, StridedSlice(V2), AsStrided, ViewCopy, Assign.
"""
from __future__ import annotations

import pytest
import torch

from op_plugin._testing_harness import check_compiled, Const, run_node

from tests.simulator.kernels.helpers import aten, F32


# ---- AsStrided / ViewCopy / Assign --------------------------------------------------------------

_STRIDED_CASES = {
    "overlapping": (lambda x: aten.as_strided(x, [3, 3], [1, 2], 1), lambda: (torch.randn(4, 4),)),
    "transposed": (lambda x: aten.as_strided(x, [4, 3], [1, 4]), lambda: (torch.randn(3, 4),)),
    "broadcast_stride_0": (lambda x: aten.as_strided(x, [2, 5], [0, 1], 2), lambda: (torch.randn(8),)),
    "large_stride_sorted_by_torchair": (lambda x: aten.as_strided(x, [2, 3, 4], [8, 256, 1]),
                                        lambda: (torch.randn(4, 256),)),
    "fp16": (lambda x: aten.as_strided(x, [2, 2], [3, 1], 1), lambda: (torch.randn(3, 3).half(),)),
}


@pytest.mark.parametrize("name", list(_STRIDED_CASES))
def test_as_strided(name):
    fn, make = _STRIDED_CASES[name]
    check_compiled(fn, make(), "AsStrided", kind="kernel")


@pytest.mark.parametrize("size,stride,offset", [([2, 2], [1, 2], 0), ([3, 2], [3, 1], 1), ([2, 3, 2], [12, 1, 4], 0)])
def test_view_copy_through_as_strided_scatter(size, stride, offset):
    torch.manual_seed(0)
    x, src = torch.randn(4, 6), torch.randn(size)
    check_compiled(lambda x, s: aten.as_strided_scatter(x, s, size, stride, offset), (x, src), "ViewCopy",
                   kind="kernel")


def test_as_strided_refuses_a_view_past_the_buffer():
    x = torch.randn(2, 3)
    with pytest.raises(Exception, match="AsStrided.*reaches element"):
        run_node("AsStrided", [x, Const(torch.tensor([2, 3])), Const(torch.tensor([3, 1])),
                               Const(torch.tensor(1))], [(F32, [2, 3])])


def test_assign_validate_shape():
    ref, value = torch.randn(2, 3), torch.randn(3, 2)
    (got,) = run_node("Assign", [ref, value], [(F32, [3, 2])], validate_shape=False)
    torch.testing.assert_close(got, value)
    with pytest.raises(Exception, match="validate_shape"):
        run_node("Assign", [ref, value], [(F32, [3, 2])])


def test_copy_lowers_to_assign():
    check_compiled(lambda x, y: aten.copy(x, y), (torch.randn(2, 3), torch.randn(2, 3)), None, kind="kernel")


def test_slice():
    x = torch.arange(20.0).reshape(4, 5)
    inputs = [x, Const(torch.tensor([1, 2])), Const(torch.tensor([2, -1]))]
    (got,) = run_node("Slice", inputs, [(F32, [2, 3])])
    assert got.tolist() == [[7.0, 8.0, 9.0], [12.0, 13.0, 14.0]]


def test_strided_slice():
    x = torch.arange(30.0).reshape(6, 5)
    inputs = [x, Const(torch.tensor([1, 0])), Const(torch.tensor([5, 2**63 - 1])), Const(torch.tensor([2, 2]))]
    (got,) = run_node("StridedSlice", inputs, [(F32, [2, 3])])
    assert got.tolist() == [[5.0, 7.0, 9.0], [15.0, 17.0, 19.0]]
    with pytest.raises(Exception, match="StridedSlice.*masks"):
        run_node("StridedSlice", inputs, [(F32, [2, 3])], shrink_axis_mask=1)

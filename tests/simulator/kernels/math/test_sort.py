"""Tests of kernels/math/sort.py: Sort, TopKV2, SearchSorted.
"""
from __future__ import annotations

import pytest
import torch

from op_plugin._simulator import GeExecutionError
from op_plugin._testing_harness import run_node

from tests.simulator.kernels.helpers import I32


def test_sort_stable_keeps_tie_order_and_topk_unsorted_set():
    x = torch.tensor([2.0, 1.0, 2.0, 1.0, 0.0])
    values, indices = run_node("Sort", [x], axis=0, descending=True, stable=True)
    assert values.tolist() == [2.0, 2.0, 1.0, 1.0, 0.0] and indices.tolist() == [0, 2, 1, 3, 4]
    assert indices.dtype == I32
    values, indices = run_node("TopKV2", [torch.tensor([5.0, 1.0, 4.0, 2.0]), torch.tensor([2], dtype=I32)],
                               sorted=False, dim=0, largest=True)
    assert sorted(values.tolist()) == [4.0, 5.0] and sorted(indices.tolist()) == [0, 2]
    with pytest.raises(GeExecutionError, match="k=5"):
        run_node("TopKV2", [torch.zeros(4), torch.tensor([5], dtype=I32)])

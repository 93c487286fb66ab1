"""Tests of kernels/index/embedding.py: EmbeddingDenseGrad.
"""
from __future__ import annotations

import pytest
import torch

from tests.simulator.kernels.helpers import _IDS, aten, check_grad_case, F16, F32


@pytest.mark.parametrize("padding_idx,scale", [(-1, False), (2, False), (-1, True), (3, True)])
@pytest.mark.parametrize("dtype", [F32, F16], ids=_IDS.get)
def test_embedding_dense_grad(padding_idx, scale, dtype):
    torch.manual_seed(0)
    indices = torch.tensor([[1, 2, 2, 5], [0, 2, 3, 1]])
    g = torch.randn(2, 4, 3).to(dtype)

    def fn(g, indices):
        return aten.embedding_dense_backward(g, indices, 7, padding_idx, scale)

    check_grad_case(fn, (g, indices), "EmbeddingDenseGrad", scale=4.0)

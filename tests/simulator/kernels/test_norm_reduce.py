"""Reduction, sort/search, loss, group-norm and FFT kernels (kernels/reduce, math/sort.py, loss, norm/group_norm.py,
math/complex.py) compiled through TorchAir's converters against eager, one table over the classes.
"""
from __future__ import annotations

import pytest
import torch

from op_plugin._testing_harness import check_compiled

from tests.simulator.kernels.helpers import _r, aten, F16, I32


_COMPILED = {
    # LpNormV2
    "norm_p2": (lambda x: aten.linalg_vector_norm(x, 2.0, [1], True), (_r(4, 16),), "LpNormV2"),
    "norm_p_half": (lambda x: aten.linalg_vector_norm(x, 0.5, [1]), (_r(4, 16),), "LpNormV2"),
    "norm_inf": (lambda x: aten.linalg_vector_norm(x, float("inf"), [-1]), (_r(4, 16),), "LpNormV2"),
    "norm_neg_inf": (lambda x: aten.linalg_vector_norm(x, float("-inf"), [0]), (_r(4, 16),), "LpNormV2"),
    "norm_all_fp16": (lambda x: aten.linalg_vector_norm(x, 2.0), (_r(4, 16, dtype=F16),), "LpNormV2"),
    "norm_p0": (lambda x: aten.linalg_vector_norm(x, 0.0, [1]), (torch.tensor([[0.0, 1.0, 0.0, -2.0]]),), "LpNormV2"),
    # ReduceLogSumExp
    "logsumexp": (lambda x: torch.logsumexp(x, [1]), (_r(3, 5, 2) * 20,), "ReduceLogSumExp"),
    "logsumexp_keep_neg": (lambda x: torch.logsumexp(x, [-1, 0], keepdim=True), (_r(3, 5),), "ReduceLogSumExp"),
    "logsumexp_inf": (lambda x: torch.logsumexp(x, [1]), (torch.tensor([[float("-inf"), 0.0], [1.0, 2.0]]),),
                      "ReduceLogSumExp"),
    # ReduceStdWithMean
    "std_dim0": (lambda x: aten.std.correction(x, [0], correction=1), (_r(6, 5),), "ReduceStdWithMean"),
    "std_keep_last": (lambda x: aten.std.correction(x, [-1], correction=0, keepdim=True), (_r(4, 7),),
                      "ReduceStdWithMean"),
    "std_two_dims": (lambda x: aten.std.correction(x, [0, 2], correction=1), (_r(4, 3, 5),), "ReduceStdWithMean"),
    # Sort / TopKV2 / SearchSorted
    "sort": (lambda x: torch.sort(x), (_r(4, 9),), "Sort"),
    "sort_desc_dim0": (lambda x: torch.sort(x, 0, descending=True), (_r(5, 3),), "Sort"),
    "sort_int": (lambda x: torch.sort(x, -1), (torch.randint(-50, 50, (3, 8), dtype=I32),), "Sort"),
    "topk": (lambda x: torch.topk(x, 3), (_r(4, 9),), "TopKV2"),
    "topk_smallest_dim0": (lambda x: torch.topk(x, 2, 0, largest=False), (_r(5, 3),), "TopKV2"),
    "searchsorted": (lambda s, v: torch.searchsorted(s, v), (torch.arange(10.0), _r(6) * 5 + 5), "SearchSorted"),
    "searchsorted_right_2d": (lambda s, v: torch.searchsorted(s, v, right=True),
                              (torch.sort(_r(3, 8)).values, torch.randn(3, 4).round()), "SearchSorted"),
    "searchsorted_int32_out": (lambda s, v: torch.searchsorted(s, v, out_int32=True),
                               (torch.arange(10), torch.tensor([-1, 3, 11])), "SearchSorted"),
    "searchsorted_sorter": (lambda s, v, o: torch.searchsorted(s, v, sorter=o),
                            (torch.tensor([3.0, 1.0, 2.0]), torch.tensor([0.5, 2.5]), torch.tensor([1, 2, 0])),
                            "SearchSorted"),
    # MseLoss / NLLLoss
    "mse_mean": (lambda a, b: torch.nn.functional.mse_loss(a, b), (_r(3, 4), _r(3, 4)), "MseLoss"),
    "mse_sum": (lambda a, b: torch.nn.functional.mse_loss(a, b, reduction="sum"), (_r(3, 4), _r(3, 4)), "MseLoss"),
    "mse_none_fp16": (lambda a, b: torch.nn.functional.mse_loss(a, b, reduction="none"),
                      (_r(3, 4, dtype=F16), _r(3, 4, dtype=F16)), "MseLoss"),
    "nll_mean": (lambda x, t: aten.nll_loss_forward(x, t, None, 1, -100),
                 (_r(5, 4).log_softmax(1), torch.tensor([0, 3, 1, 1, 2])), "NLLLoss"),
    "nll_weight_ignore_sum": (lambda x, t, w: aten.nll_loss_forward(x, t, w, 2, 1),
                              (_r(5, 4).log_softmax(1), torch.tensor([0, 3, 1, 1, 2]), torch.rand(4)), "NLLLoss"),
    "nll_weight_mean": (lambda x, t, w: aten.nll_loss_forward(x, t, w, 1, -100),
                        (_r(5, 4).log_softmax(1), torch.tensor([0, 3, 1, 1, 2]), torch.rand(4)), "NLLLoss"),
    "cross_entropy": (lambda x, t: torch.nn.functional.cross_entropy(x, t),
                      (_r(6, 5), torch.tensor([0, 4, 1, 2, 3, 3])),
                      "NLLLoss"),
    # GroupNorm
    "group_norm": (lambda x, w, b: aten.native_group_norm(x, w, b, 2, 6, 12, 3, 1e-5),
                   (_r(2, 6, 3, 4), _r(6), _r(6)), "GroupNorm"),
    "group_norm_fp16": (lambda x, w, b: aten.native_group_norm(x, w, b, 2, 4, 5, 2, 1e-5),
                        (_r(2, 4, 5, dtype=F16), _r(4, dtype=F16), _r(4, dtype=F16)), "GroupNorm"),
    # FFT
    "fft_last": (lambda x: torch.fft.fft(x), (torch.randn(3, 8, dtype=torch.complex64),), "FFT"),
    "fft_dim0_ortho": (lambda x: torch.fft.fft(x, dim=0, norm="ortho"), (torch.randn(6, 4, dtype=torch.complex64),),
                       "FFT"),
    "fft2": (lambda x: torch.fft.fft2(x), (torch.randn(2, 4, 6, dtype=torch.complex64),), "FFT2D"),
}


@pytest.mark.parametrize("name", sorted(_COMPILED))
def test_compiled_against_eager(name):
    fn, args, ge_type = _COMPILED[name]
    check_compiled(fn, args, ge_type, kind="reduction")

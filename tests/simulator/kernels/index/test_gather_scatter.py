"""Tests of kernels/index/gather_scatter.py: Gather*, IndexByTensor, ScatterElements, InplaceIndexAdd, ReverseV2,
OneHot, EmbeddingBag.
"""
from __future__ import annotations

import pytest
import torch

from op_plugin._testing_harness import check_compiled, Const, run_node

from tests.simulator.kernels.helpers import aten, BOOL, F16, F32, I32, I64


# ---- IndexByTensor ------------------------------------------------------------------------------

def _ix(*shape, high):
    return torch.randint(-high, high, shape)


_INDEX_CASES = {
    "first_dim": (lambda x, i: aten.index.Tensor(x, [i]), lambda: (torch.randn(5, 4, 3), _ix(2, 3, high=5))),
    "middle_dim": (lambda x, i: aten.index.Tensor(x, [None, i]), lambda: (torch.randn(5, 4, 3), _ix(6, high=4))),
    "two_adjacent_broadcast": (lambda x, i, j: aten.index.Tensor(x, [None, i, j]),
                               lambda: (torch.randn(2, 5, 4, 3), _ix(3, 1, high=5), _ix(1, 2, high=4))),
    "separated_dims_go_first": (lambda x, i, j: aten.index.Tensor(x, [i, None, j]),
                                lambda: (torch.randn(5, 4, 3), _ix(2, high=5), _ix(2, high=3))),
    "last_dim_0d_index": (lambda x, i: aten.index.Tensor(x, [None, None, i]),
                          lambda: (torch.randn(5, 4, 3), torch.tensor(-1))),
    "empty_index": (lambda x, i: aten.index.Tensor(x, [i]), lambda: (torch.randn(5, 4), torch.zeros(0, dtype=I64))),
    "fp16": (lambda x, i: aten.index.Tensor(x, [i]), lambda: (torch.randn(5, 4).half(), _ix(3, high=5))),
    "int32_index_promoted": (lambda x, i: aten.index.Tensor(x, [None, i]),
                             lambda: (torch.randn(5, 4), torch.tensor([3, 0, -4], dtype=I32))),
    "causal_mask_rows": (lambda m, i: aten.index.Tensor(m, [None, None, i]),
                         lambda: (torch.ones(1, 1, 8, 8).tril().bool(), torch.arange(3, 7))),
    "int64_values": (lambda x, i: aten.index.Tensor(x, [i]), lambda: (torch.arange(20).reshape(5, 4), _ix(4, high=5))),
}


@pytest.mark.parametrize("name", list(_INDEX_CASES))
def test_index_by_tensor(name):
    fn, make = _INDEX_CASES[name]
    torch.manual_seed(0)
    # empty: folded to a Const
    check_compiled(fn, make(), None if name == "empty_index" else "IndexByTensor", kind="kernel")


def test_index_by_tensor_refuses_out_of_range():
    x = torch.randn(4, 3)
    with pytest.raises(Exception, match="IndexByTensor.*outside"):
        run_node("IndexByTensor", [x, [torch.tensor([4])]], [(F32, [1, 3])], indices_mask=[1])


def test_index_by_tensor_mask_mismatch_refused():
    x = torch.randn(4, 3)
    with pytest.raises(Exception, match="indices_mask"):
        run_node("IndexByTensor", [x, [torch.tensor([1])]], [(F32, [1, 3])], indices_mask=[1, 1])


# ---- ScatterElements / InplaceIndexAdd / EmbeddingBag ------------------------------------------

_SCATTER_CASES = {
    "src": (lambda x, i, s: aten.scatter.src(x, 1, i, s),
            lambda: (torch.randn(3, 5), torch.tensor([[0, 4], [2, 1], [3, 3]]), torch.randn(3, 2))),
    "value_negative_dim": (lambda x, i: aten.scatter.value(x, -1, i, 2.5),
                           lambda: (torch.randn(3, 5), torch.randint(0, 5, (3, 2)))),
    "add_duplicates": (lambda x, i, s: aten.scatter_add(x, 0, i, s),
                       lambda: (torch.randn(4, 3), torch.tensor([[0, 0, 3], [0, 2, 3]]), torch.randn(2, 3))),
    "add_src_larger_than_index": (lambda x, i, s: aten.scatter_add(x, 0, i, s),
                                  lambda: (torch.randn(10), torch.tensor([2, 4, 8]), torch.randn(20))),
    "add_fp16": (lambda x, i, s: aten.scatter_add(x, 1, i, s),
                 lambda: (torch.randn(2, 6).half(), torch.randint(0, 6, (2, 9)), torch.randn(2, 9).half())),
    "select_scatter": (lambda x, s: aten.select_scatter(x, s, 1, -1), lambda: (torch.randn(3, 4), torch.randn(3))),
    "slice_scatter_step": (lambda x, s: aten.slice_scatter(x, s, 1, 1, 8, 3),
                           lambda: (torch.randn(2, 9), torch.randn(2, 3))),
    "int32_data": (lambda x, i, s: aten.scatter.src(x, 0, i, s),
                   lambda: (torch.arange(12, dtype=I32).reshape(4, 3), torch.tensor([[3, 1, 0]]),
                            torch.full((1, 3), -7, dtype=I32))),
}


@pytest.mark.parametrize("name", list(_SCATTER_CASES))
def test_scatter_elements(name):
    fn, make = _SCATTER_CASES[name]
    torch.manual_seed(0)
    check_compiled(fn, make(), "ScatterElements", kind="kernel")


@pytest.mark.parametrize("reduction,reduce", [("mul", "prod"), ("max", "amax"), ("min", "amin")])
def test_scatter_elements_reductions_hand_built(reduction, reduce):
    """TorchAir only emits none and add; the other ONNX reductions include data's own value."""
    torch.manual_seed(0)
    data, index, updates = torch.randn(4, 3), torch.tensor([[0, 1, 1], [0, 3, 1]]), torch.randn(2, 3)
    (got,) = run_node("ScatterElements", [data, index, updates], [(F32, [4, 3])], axis=0,
                      reduction=reduction)
    torch.testing.assert_close(got, data.scatter_reduce(0, index, updates, reduce, include_self=True))


def test_scatter_elements_refuses_out_of_range_and_unknown_reduction():
    data, updates = torch.randn(4, 3), torch.randn(1, 3)
    with pytest.raises(Exception, match="ScatterElements.*outside"):
        run_node("ScatterElements", [data, torch.tensor([[0, 4, 1]]), updates], [(F32, [4, 3])])
    with pytest.raises(Exception, match="reduction 'mean'"):
        run_node("ScatterElements", [data, torch.tensor([[0, 1, 1]]), updates], [(F32, [4, 3])],
                 reduction="mean")


@pytest.mark.parametrize("dim,alpha,dtype", [(0, 1, F32), (1, 2.5, F32), (-1, 1, F16), (0, 3, I32)])
def test_inplace_index_add(dim, alpha, dtype):
    torch.manual_seed(0)
    x = (torch.randn(5, 4) * 4).to(dtype)
    index = torch.tensor([4, 0, 0] if dim == 0 else [3, 1, 3])
    shape = [3, 4] if dim == 0 else [5, 3]
    src = (torch.randn(shape) * 4).to(dtype)
    check_compiled(lambda x, i, s: aten.index_add(x, dim, i, s, alpha=alpha), (x, index, src), "InplaceIndexAdd",
                   kind="kernel")


# mode 0 at the schema's default: TorchAir's _embedding_bag converter defaults mode to 1 (mean) and the FX node
# drops the default, so it lowered sum as EmbeddingBag(mode='mean') until op_plugin passes the schema's
# defaults (op_plugin/_lowering/schema_defaults.py).
@pytest.mark.parametrize("mode,per_sample,include_last,padding_idx", [
    (0, False, False, -1), (1, False, False, -1), (2, False, False, -1),
    (0, True, False, -1),
    (1, False, True, -1), (0, False, False, 2), (1, False, False, 2),
])
def test_embedding_bag(mode, per_sample, include_last, padding_idx):
    torch.manual_seed(0)
    weight, indices = torch.randn(10, 3), torch.tensor([1, 2, 2, 5, 9, 0, 2, 7])
    offsets = torch.tensor([0, 3, 3, 6] + ([8] if include_last else []))
    weights = torch.rand(8) if per_sample else None

    def fn(w, i, o, psw):
        return aten._embedding_bag(w, i, o, False, mode, False, psw, include_last, padding_idx)[0]

    check_compiled(fn, (weight, indices, offsets, weights), "EmbeddingBag", kind="kernel")


@pytest.mark.parametrize("mode,code", [("sum", 0), ("mean", 1), ("max", 2)])
def test_embedding_bag_all_outputs_hand_built(mode, code):
    """offset2bag, bag_size and max_indices as aten defines them; scale_grad_by_freq/sparse do not matter."""
    weight, indices, offsets = torch.randn(6, 2), torch.tensor([1, 4, 4, 0, 5]), torch.tensor([0, 2, 2])
    want = aten._embedding_bag(weight, indices, offsets, False, code, False, None, False, -1)
    got = run_node("EmbeddingBag", [weight, indices, offsets, None],
                   [(F32, list(t.shape)) if i == 0 else (I64, list(t.shape)) for i, t in enumerate(want)],
                   mode=mode, scale_grad_by_freq=True)
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w)


@pytest.mark.parametrize("dims,dtype", [([0], F32), ([-1], I32), ([0, 2], F16), ([1, -1], BOOL)])
def test_reverse_v2(dims, dtype):
    x = (torch.randn(3, 4, 5) * 5).to(dtype)
    check_compiled(lambda x: aten.flip(x, dims), (x,), "ReverseV2", kind="kernel")


def test_reverse_v2_refuses_a_repeated_axis():
    with pytest.raises(Exception, match="ReverseV2.*twice"):
        run_node("ReverseV2", [torch.randn(3, 4), Const(torch.tensor([1, -1]))], [(F32, [3, 4])])


@pytest.mark.parametrize("negative_ok", [True, False])
def test_gather_nd_negative_index_support(negative_ok):
    x, index = torch.randn(4, 3), torch.tensor([[-1, 2], [0, -3]])
    if negative_ok:
        (got,) = run_node("GatherNd", [x, index], [(F32, [2])], negative_index_support=True)
        torch.testing.assert_close(got, x[index[:, 0], index[:, 1]])
    else:
        with pytest.raises(Exception, match="out of range"):
            run_node("GatherNd", [x, index], [(F32, [2])])


def test_gather_elements():
    x, index = torch.randn(3, 4), torch.tensor([[3, 0], [1, 1], [0, 2]])
    (got,) = run_node("GatherElements", [x, index], [(F32, [3, 2])], dim=1)
    assert got.tolist() == [[x[r, c].item() for c in row] for r, row in enumerate(index.tolist())]


def test_gather_v2_d():
    x, index = torch.randn(5, 3), torch.tensor([[4, 0], [2, 2]], dtype=I32)
    (got,) = run_node("GatherV2D", [x, index], [(F32, [2, 2, 3])], axis=0)
    assert got.tolist() == [[x[i].tolist() for i in row] for row in index.tolist()]


@pytest.mark.parametrize("axis", [-1, 0])
def test_one_hot(axis):
    index = torch.tensor([3, 0, 4], dtype=I32)
    inputs = [index, Const(torch.tensor(5, dtype=I32)), Const(torch.tensor(2.0)), Const(torch.tensor(-1.0))]
    want = torch.eye(5)[index.long()] * 3 - 1  # on 2, off -1
    want = want if axis == -1 else want.T
    (got,) = run_node("OneHot", inputs, [(F32, list(want.shape))], axis=axis)
    assert torch.equal(got, want)

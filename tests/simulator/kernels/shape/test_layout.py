"""Tests of kernels/shape/layout.py: Shape*, Reshape, Squeeze, ExpandDims, Flatten, Bitcast, Transpose, Concat,
Pack, Split, Tile, BroadcastTo, Tril, Triu.
"""
from __future__ import annotations

import pytest
import torch

from op_plugin._testing_harness import check_compiled, Const, run_node

from tests.simulator.kernels.helpers import aten, BOOL, F16, F32, I32, I64


# ---- Tril / Triu / ReverseV2 / Permute / FlattenV2 -----------------------------------------------

@pytest.mark.parametrize("op,ge_type", [(aten.tril, "Tril"), (aten.triu, "Triu")])
@pytest.mark.parametrize("shape,diagonal,dtype", [((4, 4), 0, F32), ((2, 3, 5), 2, F32), ((5, 3), -1, F16),
                                                  ((1, 6, 6), -7, BOOL), ((3, 0), 0, F32), ((4, 4), 1, I64)])
def test_triangles(op, ge_type, shape, diagonal, dtype):
    x = (torch.randn(shape) * 5).to(dtype)
    check_compiled(lambda x: op(x, diagonal), (x,), ge_type if x.numel() else None, kind="kernel")


@pytest.mark.parametrize("order", [[0], [1, 0], [2, 0, 1], [-1, 0, 1]])
def test_permute_hand_built(order):
    x = torch.randn([3, 4, 5][:max(len(order), 1)] if len(order) > 1 else [6])
    want = x.permute(order)
    (got,) = run_node("Permute", [x], [(F32, list(want.shape))], order=order)
    torch.testing.assert_close(got, want)


@pytest.mark.parametrize("axis,end_axis", [(1, -1), (0, 1), (-2, -1), (2, 2)])
def test_flatten_v2_hand_built(axis, end_axis):
    x = torch.arange(120, dtype=I32).reshape(2, 3, 4, 5)
    want = x.flatten(axis, end_axis)
    (got,) = run_node("FlattenV2", [x], [(I32, list(want.shape))], axis=axis, end_axis=end_axis)
    torch.testing.assert_close(got, want)


# ---- shape.py attrs TorchAir never varies -----------------------------------------------------------

def test_split_refuses_an_uneven_split():
    x = torch.randn(5, 2)
    with pytest.raises(Exception, match="SplitD.*num_split=2"):
        run_node("SplitD", [x], [(F32, [3, 2]), (F32, [2, 2])], split_dim=0, num_split=2)


def test_concat_n_must_match_the_inputs():
    a, b = torch.randn(2, 2), torch.randn(1, 2)
    with pytest.raises(Exception, match="N=3"):
        run_node("ConcatD", [[a, b]], [(F32, [3, 2])], concat_dim=0, N=3)


@pytest.mark.parametrize("keep_dim,source,target,shape,want_shape", [
    (False, I32, torch.uint8, [2, 3], [2, 3, 4]), (False, torch.uint8, I32, [2, 4], [2]),
    (True, I32, torch.uint8, [2, 3], [2, 12]), (False, F32, I32, [2, 3], [2, 3]),
])
def test_bitcast_keep_dim(keep_dim, source, target, shape, want_shape):
    x = torch.arange(24, dtype=torch.uint8)[:torch.Size(shape).numel() * torch.empty((), dtype=source).element_size()]
    x = x.view(source).reshape(shape)
    ge_type = {torch.uint8: 4, I32: 3, F32: 0}[target]
    (got,) = run_node("Bitcast", [x], [(target, want_shape)], type=ge_type, keep_dim=keep_dim)
    assert list(got.shape) == want_shape
    assert got.reshape(-1).view(torch.uint8).tolist() == x.reshape(-1).view(torch.uint8).tolist()


# ---- types no compiled test emits: hand-built nodes against torch written independently ---------------

def test_concat_with_the_axis_first():
    a, b = torch.randn(2, 3), torch.randn(2, 1)
    (got,) = run_node("Concat", [Const(torch.tensor(1, dtype=I32)), [a, b]], [(F32, [2, 4])], N=2)
    assert torch.equal(got[:, :3], a) and torch.equal(got[:, 3:], b)


def test_concat_v2_d():
    a, b = torch.randn(1, 2), torch.randn(3, 2)
    (got,) = run_node("ConcatV2D", [[a, b]], [(F32, [4, 2])], concat_dim=0, N=2)
    assert torch.equal(got[:1], a) and torch.equal(got[1:], b)


@pytest.mark.parametrize("axis,want_shape", [(1, [2, 12]), (2, [6, 4]), (0, [1, 24])])
def test_flatten(axis, want_shape):
    x = torch.arange(24.0).reshape(2, 3, 4)
    (got,) = run_node("Flatten", [x], [(F32, want_shape)], axis=axis)
    assert list(got.shape) == want_shape and got.reshape(-1).tolist() == x.reshape(-1).tolist()


def test_rank_size_shape_n():
    x, y = torch.randn(2, 3, 4), torch.randn(5)
    (got,) = run_node("Rank", [x], [(I32, [])])
    assert got.dtype == I32 and got.item() == 3
    (got,) = run_node("Size", [x], [(I32, [])])
    assert got.dtype == I32 and got.item() == 24
    (got,) = run_node("Size", [x], [(I64, [])], dtype=9)  # DT_INT64
    assert got.dtype == I64 and got.item() == 24
    got = run_node("ShapeN", [[x, y]], [(I32, [3]), (I32, [1])])
    assert [t.tolist() for t in got] == [[2, 3, 4], [5]]


def test_split():
    x = torch.arange(12.0).reshape(6, 2)
    got = run_node("Split", [Const(torch.tensor(0, dtype=I32)), x], [(F32, [2, 2])] * 3,
                   num_split=3)
    assert [t.tolist() for t in got] == [x[0:2].tolist(), x[2:4].tolist(), x[4:6].tolist()]


def test_tile():
    x = torch.randn(2, 3)
    (got,) = run_node("Tile", [x, Const(torch.tensor([2, 1]))], [(F32, [4, 3])])
    assert torch.equal(got, torch.cat([x, x]))


def test_transpose_d():
    x = torch.randn(2, 3, 4)
    (got,) = run_node("TransposeD", [x], [(F32, [4, 2, 3])], perm=[2, 0, 1])
    assert got.is_contiguous() and torch.equal(got, torch.einsum("abc->cab", x))


def test_concat_of_scalars_is_a_vector_as_ge_gives_torchairs_rng_counter():
    seed, offset = Const(torch.tensor(7, dtype=torch.int64)), Const(torch.tensor(3, dtype=torch.int64))
    axis = Const(torch.tensor(0, dtype=torch.int32))
    (got,) = run_node("ConcatV2", [[seed, offset], axis], [(torch.int64, [2])], N=2)
    assert got.tolist() == [7, 3]
    pair = Const(torch.tensor([1, 2], dtype=torch.int64))
    (got,) = run_node("ConcatV2", [[seed, pair], axis], [(torch.int64, [3])], N=2)
    assert got.tolist() == [7, 1, 2]

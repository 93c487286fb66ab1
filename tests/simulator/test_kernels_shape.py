"""Shape, index, slice and creation GE kernels (kernels/shape.py, shape_slice.py, shape_creation.py,
index.py): compiled through TorchAir's converters against eager, and hand-built graphs for attrs and
values TorchAir never sets; and a check that every prototype attr of the kernels still in the old
convention is read (those in the ge_kernel convention are checked by test_kernel_signatures.py)."""
from __future__ import annotations


import pytest
import torch

from op_plugin._simulator import capture_graphs
from op_plugin._testing_harness import Const, check_compiled, run_node

aten = torch.ops.aten
F16, F32, BF16, I32, I64, BOOL = torch.float16, torch.float32, torch.bfloat16, torch.int32, torch.int64, torch.bool


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


_TORCHAIR_BAG_DEFAULT = pytest.mark.xfail(strict=True, reason=(
    "TorchAir bug: its _embedding_bag converter defaults mode to 1 (mean) while aten's schema default is 0 "
    "(sum), and the FX node drops trailing default args, so sum lowers as EmbeddingBag(mode='mean')"))


@pytest.mark.parametrize("mode,per_sample,include_last,padding_idx", [
    pytest.param(0, False, False, -1, marks=_TORCHAIR_BAG_DEFAULT), (1, False, False, -1), (2, False, False, -1),
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


# ---- Tril / Triu / ReverseV2 / Permute / FlattenV2 -----------------------------------------------

@pytest.mark.parametrize("op,ge_type", [(aten.tril, "Tril"), (aten.triu, "Triu")])
@pytest.mark.parametrize("shape,diagonal,dtype", [((4, 4), 0, F32), ((2, 3, 5), 2, F32), ((5, 3), -1, F16),
                                                  ((1, 6, 6), -7, BOOL), ((3, 0), 0, F32), ((4, 4), 1, I64)])
def test_triangles(op, ge_type, shape, diagonal, dtype):
    x = (torch.randn(shape) * 5).to(dtype)
    check_compiled(lambda x: op(x, diagonal), (x,), ge_type if x.numel() else None, kind="kernel")


@pytest.mark.parametrize("dims,dtype", [([0], F32), ([-1], I32), ([0, 2], F16), ([1, -1], BOOL)])
def test_reverse_v2(dims, dtype):
    x = (torch.randn(3, 4, 5) * 5).to(dtype)
    check_compiled(lambda x: aten.flip(x, dims), (x,), "ReverseV2", kind="kernel")


def test_reverse_v2_refuses_a_repeated_axis():
    with pytest.raises(Exception, match="ReverseV2.*twice"):
        run_node("ReverseV2", [torch.randn(3, 4), Const(torch.tensor([1, -1]))], [(F32, [3, 4])])


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


@pytest.mark.parametrize("negative_ok", [True, False])
def test_gather_nd_negative_index_support(negative_ok):
    x, index = torch.randn(4, 3), torch.tensor([[-1, 2], [0, -3]])
    if negative_ok:
        (got,) = run_node("GatherNd", [x, index], [(F32, [2])], negative_index_support=True)
        torch.testing.assert_close(got, x[index[:, 0], index[:, 1]])
    else:
        with pytest.raises(Exception, match="out of range"):
            run_node("GatherNd", [x, index], [(F32, [2])])


# ---- types no compiled test emits: hand-built nodes against torch written independently ---------------

def test_concat_with_the_axis_first():
    a, b = torch.randn(2, 3), torch.randn(2, 1)
    (got,) = run_node("Concat", [Const(torch.tensor(1, dtype=I32)), [a, b]], [(F32, [2, 4])], N=2)
    assert torch.equal(got[:, :3], a) and torch.equal(got[:, 3:], b)


def test_concat_v2_d():
    a, b = torch.randn(1, 2), torch.randn(3, 2)
    (got,) = run_node("ConcatV2D", [[a, b]], [(F32, [4, 2])], concat_dim=0, N=2)
    assert torch.equal(got[:1], a) and torch.equal(got[1:], b)


def test_fill_d():
    (got,) = run_node("FillD", [Const(torch.tensor([2.5]))], [(F32, [2, 3])], dims=[2, 3])
    assert got.tolist() == [[2.5] * 3] * 2


@pytest.mark.parametrize("axis,want_shape", [(1, [2, 12]), (2, [6, 4]), (0, [1, 24])])
def test_flatten(axis, want_shape):
    x = torch.arange(24.0).reshape(2, 3, 4)
    (got,) = run_node("Flatten", [x], [(F32, want_shape)], axis=axis)
    assert list(got.shape) == want_shape and got.reshape(-1).tolist() == x.reshape(-1).tolist()


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


def test_slice():
    x = torch.arange(20.0).reshape(4, 5)
    inputs = [x, Const(torch.tensor([1, 2])), Const(torch.tensor([2, -1]))]
    (got,) = run_node("Slice", inputs, [(F32, [2, 3])])
    assert got.tolist() == [[7.0, 8.0, 9.0], [12.0, 13.0, 14.0]]


def test_split():
    x = torch.arange(12.0).reshape(6, 2)
    got = run_node("Split", [Const(torch.tensor(0, dtype=I32)), x], [(F32, [2, 2])] * 3,
                   num_split=3)
    assert [t.tolist() for t in got] == [x[0:2].tolist(), x[2:4].tolist(), x[4:6].tolist()]


def test_strided_slice():
    x = torch.arange(30.0).reshape(6, 5)
    inputs = [x, Const(torch.tensor([1, 0])), Const(torch.tensor([5, 2**63 - 1])), Const(torch.tensor([2, 2]))]
    (got,) = run_node("StridedSlice", inputs, [(F32, [2, 3])])
    assert got.tolist() == [[5.0, 7.0, 9.0], [15.0, 17.0, 19.0]]
    with pytest.raises(Exception, match="StridedSlice.*masks"):
        run_node("StridedSlice", inputs, [(F32, [2, 3])], shrink_axis_mask=1)


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

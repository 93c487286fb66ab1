"""Tests of kernels/reduce/reduction.py: Reduce*, ArgMax/ArgMin(WithValue), Cumsum, ReduceStd*, LpNormV2, Histogram.
"""
from __future__ import annotations

import pytest
import torch

from op_plugin._simulator import GeExecutionError
from op_plugin._testing_harness import assert_close, check_compiled, run_node

from tests.simulator.kernels.helpers import _r, F16, F32, I32, I64


@pytest.mark.parametrize("values,bins,low,high,counts", [
    # outside [min, max] not counted, max in the last bin
    ([-2.0, -1.0, 0.0, 0.5, 1.0, 3.0], 4, -1.0, 1.0, [1, 0, 1, 2]),
    ([1.0, 2.0, 3.0, 4.0], 3, 0.0, 0.0, [1, 1, 2]),                   # min == max: the data's own range
])
def test_histogram_counts(values, bins, low, high, counts):
    y, = run_node("Histogram", [torch.tensor(values)], **{"bins": bins, "min": low, "max": high})
    assert y.dtype == torch.float32 and y.tolist() == counts


def test_histc_compiles_to_histogram():
    x = torch.tensor([0.0, 3.0, 1.0, 1.0, 2.0, 3.0])
    check_compiled(lambda x: torch.histc(x, bins=4, min=0, max=3) * 2, (x,), "Histogram", kind="kernel")


@pytest.mark.parametrize("unbiased, correction, invert", [(True, 1, False), (False, 1, False), (True, 2, False),
                                                          (True, 1, True), (False, 0, True)])
def test_reduce_std_with_mean(unbiased, correction, invert):
    x = _r(4, 6)
    mean = x.mean(1, keepdim=True).expand_as(x)
    y = run_node("ReduceStdWithMean", [x, mean], dim=[1], unbiased=unbiased, correction=correction, keepdim=False,
                 invert=invert, epsilon=0.01)[0]
    var = x.var(1, correction=correction if unbiased else 0)
    assert_close(y, torch.rsqrt(var + 0.01) if invert else var.sqrt(), "reduction")


def test_reduce_std_with_mean_count_equal_to_correction_divides_by_one():
    x = torch.tensor([[1.0, 3.0]])
    y = run_node("ReduceStdWithMean", [x, torch.full_like(x, 2.0)], dim=[1], correction=2)[0]
    torch.testing.assert_close(y, torch.tensor([2.0 ** 0.5]))


@pytest.mark.parametrize("dims, correction, keep", [([1], 1, False), ([0, -1], 0, True), ([], 2, False)])
def test_reduce_std_v2(dims, correction, keep):
    x = _r(3, 4, 5)
    std, mean = run_node("ReduceStdV2", [x], dim=dims, correction=correction, keepdim=keep, is_mean_out=True)
    axes = dims or None
    assert_close(std, torch.std(x, dim=axes, correction=correction, keepdim=keep), "reduction")
    assert_close(mean, torch.mean(x, dim=axes if axes else list(range(3)), keepdim=keep), "reduction")


def test_lp_norm_v2_epsilon_and_p():
    x = torch.tensor([[0.0, 0.0], [3.0, -4.0]])
    torch.testing.assert_close(run_node("LpNormV2", [x], p=2.0, axes=[1], epsilon=0.5)[0], torch.tensor([0.5, 5.0]))
    torch.testing.assert_close(run_node("LpNormV2", [x], p=1.0, axes=[0], keepdim=True, epsilon=0.0)[0],
                               torch.tensor([[3.0, 4.0]]))
    torch.testing.assert_close(run_node("LpNormV2", [x], p=3.0, epsilon=0.0)[0], torch.tensor(91.0 ** (1 / 3)))
    torch.testing.assert_close(run_node("LpNormV2", [x], p=float(2 ** 31 - 1), axes=[1], epsilon=0.0)[0],
                               torch.tensor([0.0, 4.0]))


def test_reduce_mean_d_empty_axes_default_reduces_all():
    x = _r(2, 3)
    torch.testing.assert_close(run_node("ReduceMeanD", [x], axes=[])[0], x.mean())
    torch.testing.assert_close(run_node("ReduceMeanD", [x], axes=[], noop_with_empty_axes=True)[0], x)
    torch.testing.assert_close(run_node("ReduceMean", [x, torch.zeros(0, dtype=I64)])[0], x)
    torch.testing.assert_close(run_node("ReduceMean", [x, torch.zeros(0, dtype=I64)], noop_with_empty_axes=False)[0],
                               x.mean())
    # An empty axes list makes ReduceSum reduce nothing: the default (true) of the noop_with_empty_axes that
    # ops-math's newer REG_OP adds; false is refused by name (binding.py / unnamed_attrs.NEWER_DEFAULTS)
    torch.testing.assert_close(run_node("ReduceSum", [x, torch.zeros(0, dtype=I64)])[0], x)
    torch.testing.assert_close(run_node("ReduceSum", [x, torch.zeros(0, dtype=I64)], noop_with_empty_axes=True)[0], x)
    with pytest.raises(GeExecutionError, match="'noop_with_empty_axes' = False"):
        run_node("ReduceSum", [x, torch.zeros(0, dtype=I64)], noop_with_empty_axes=False)


# ---- reduce.py types no compiled test emits: one-node graphs, against oracles written here --------

def test_arg_max_v2_and_arg_min_dtype_attr():
    x = torch.randperm(15).float().reshape(3, 5)  # distinct values: no ties
    dim = torch.tensor([1], dtype=I32)
    (got,) = run_node("ArgMaxV2", [x, dim])
    assert got.dtype == I64 and got.tolist() == [row.index(max(row)) for row in x.tolist()]
    (got,) = run_node("ArgMin", [x, dim], dtype=3)  # DT_INT32
    assert got.dtype == I32 and got.tolist() == [row.index(min(row)) for row in x.tolist()]


@pytest.mark.parametrize("op_type,pick", [("ArgMaxWithValue", max), ("ArgMinWithValue", min)])
@pytest.mark.parametrize("keep_dims", [False, True])
def test_arg_with_value_gives_int32_indices_then_values(op_type, pick, keep_dims):
    x = torch.randperm(12).float().reshape(3, 4)
    indices, values = run_node(op_type, [x], dimension=0, keep_dims=keep_dims)
    columns = x.T.tolist()
    want_values = [pick(c) for c in columns]
    assert indices.dtype == I32 and list(indices.shape) == ([1, 4] if keep_dims else [4])
    assert indices.reshape(-1).tolist() == [c.index(v) for c, v in zip(columns, want_values, strict=True)]
    assert values.reshape(-1).tolist() == want_values


@pytest.mark.parametrize("exclusive,reverse,want", [
    (False, False, [1, 3, 6, 10]), (True, False, [0, 1, 3, 6]),
    (False, True, [10, 9, 7, 4]), (True, True, [9, 7, 4, 0]),
])
def test_cumsum_exclusive_reverse(exclusive, reverse, want):
    x = torch.tensor([[1, 2, 3, 4]], dtype=I32)
    (got,) = run_node("Cumsum", [x, torch.tensor(1, dtype=I32)], exclusive=exclusive, reverse=reverse)
    assert got.dtype == I32 and got.tolist() == [want]


_BOOLS = torch.tensor([[[True, False], [True, True], [False, False]], [[True, True], [True, True], [False, True]]])


@pytest.mark.parametrize("op_type,combine", [("ReduceAll", all), ("ReduceAny", any)])
@pytest.mark.parametrize("as_attr", [False, True])
def test_reduce_all_any(op_type, combine, as_attr):
    axes, rows = [0, 2], _BOOLS.permute(1, 0, 2).reshape(3, 4).tolist()  # dim 1 kept
    inputs, attrs = ([_BOOLS], {"axes": axes}) if as_attr else ([_BOOLS, torch.tensor(axes)], {})
    (got,) = run_node(op_type + ("D" if as_attr else ""), inputs, keep_dims=True, **attrs)
    assert got.dtype == torch.bool and got.reshape(-1).tolist() == [combine(r) for r in rows]
    assert list(got.shape) == [1, 3, 1]


@pytest.mark.parametrize("op_type,pick", [("ReduceMaxD", max), ("ReduceMin", min), ("ReduceMinD", min)])
def test_reduce_max_min(op_type, pick):
    x = torch.randn(2, 3, 4)
    rows = x.permute(1, 0, 2).reshape(3, 8).tolist()
    inputs, attrs = ([x], {"axes": [0, -1]}) if op_type.endswith("D") else ([x, torch.tensor([0, -1])], {})
    (got,) = run_node(op_type, inputs, **attrs)
    assert got.tolist() == [pick(r) for r in rows]


@pytest.mark.parametrize("op_type", ["ReduceProd", "ReduceProdD"])
@pytest.mark.parametrize("dtype", [F32, I32])
def test_reduce_prod(op_type, dtype):
    x = torch.tensor([[1, -2, 3], [4, 5, -1]]).to(dtype)
    inputs, attrs = ([x], {"axes": [1]}) if op_type.endswith("D") else ([x, torch.tensor([1])], {})
    (got,) = run_node(op_type, inputs, **attrs)
    assert got.dtype == dtype and got.tolist() == [-6, -20]
    # an empty axes list reduces nothing (the prototype has no noop_with_empty_axes)
    inputs = [x] if op_type.endswith("D") else [x, torch.zeros(0, dtype=I64)]
    assert torch.equal(run_node(op_type, inputs, **({"axes": []} if attrs else {}))[0], x)


def test_reduce_mean_with_cast():
    x = torch.tensor([[1.0, 2.0, 4.0], [0.5, 0.25, 0.125]]).to(F16)
    axes = torch.tensor([1])
    (got,) = run_node("ReduceMeanWithCast", [x, axes], dtype=0)  # DT_FLOAT: computed in and given as float32
    assert got.dtype == F32 and torch.equal(got, torch.tensor([7 / 3, 0.875 / 3]))  # exact sums, one rounding
    (got,) = run_node("ReduceMeanWithCast", [x, axes], keep_dims=True)  # DT_UNDEFINED: x's dtype
    assert got.dtype == F16 and torch.equal(got, torch.tensor([[7 / 3], [0.875 / 3]]).to(F16))
    empty = torch.zeros(0, dtype=I64)
    assert torch.equal(run_node("ReduceMeanWithCast", [x, empty], dtype=0)[0], x.float())
    assert torch.equal(run_node("ReduceMeanWithCast", [x, empty], noop_with_empty_axes=False)[0],
                       torch.tensor(x.float().sum().item() / 6).to(F16))

"""op_plugin's GE converters for core-ATen reductions and elementwise ops TorchAir does not lower
(`when="missing"`; `registry`), each lowered to the CANN op TorchAir's converter of its sibling uses.

docs/aten-ops-without-converter.md listed them as "not lowered yet": `x.amin(dim)`, `x.min(dim)`,
`x.any(dims)` / `x.all(dim)`, `torch.isnan`, `x.squeeze((0, 1))`, `x.clamp(max=...)` with only one
bound, `torch.atan2`, `x.prod()`, `torch.logical_xor` reach them through plain model code; issue 34 added
`torch.sort` / `torch.argsort` with `stable=True` (`aten.sort.stable`, GE `Sort` with its `stable` attr)
and `torch.trunc` (GE `Trunc`).
"""
from __future__ import annotations

import torch

from .cases import BOOL, F32, I32, I64, Support, T
from .registry import aten_converter
from .torchair_api import TorchAirApi

aten = torch.ops.aten


def _axes(ta: TorchAirApi, self, dim):
    """`dim` as an int64 Const of axes; None or empty: every dim (aten's convention)."""
    if isinstance(dim, int):
        dims = [dim]
    else:
        dims = list(dim) if dim else list(range(self.rank))
    return ta.graph.Const(dims, dtype=ta.graph.DataType.DT_INT64)


@aten_converter(aten.amin.default, when="missing",
                cases=[Support(F32(3, 4, 5), [1], True), Support(F32(3, 4)), Support(F32(2, 3, 4), [0, 2])])
def amin(ta: TorchAirApi, self, dim=(), keepdim=False, meta_outputs=None):
    """`aten.amin`: `ReduceMin(x, axes, keep_dims)`, the op TorchAir's `max.default`/op_plugin's
    `amax` use for the maximum (torch_npu eager: aclnnAmin); `dim=[]` reduces every dim."""
    return ta.ge.ReduceMin(self, _axes(ta, self, dim), keep_dims=keepdim)


@aten_converter(aten.min.default, when="missing", cases=[Support(F32(3, 4)), Support(I32(5))])
def min_all(ta: TorchAirApi, self, meta_outputs=None):
    """`aten.min.default` (`x.min()`): `ReduceMin` over every dim, as TorchAir lowers `max.default`."""
    return ta.ge.ReduceMin(self, _axes(ta, self, None), keep_dims=False)


@aten_converter(aten.min.dim, when="missing", cases=[Support(F32(4, 5), 1), Support(F32(3, 4, 2), 0, True)])
def min_dim(ta: TorchAirApi, self, dim, keepdim=False, meta_outputs=None):
    """`aten.min.dim` (values, indices): `ArgMinWithValue(x, dimension, keep_dims)`, the mirror of
    TorchAir's `max.dim` (ArgMaxWithValue); indices cast to the node's dtype (int64)."""
    index, values = ta.ge.ArgMinWithValue(self, dimension=dim, keep_dims=keepdim)
    return values, ta.dtype_promote(index, target_dtype=meta_outputs[1].dtype)


def _reduce_bool(ta: TorchAirApi, ge_type: str, self, dim, keepdim, meta_outputs):
    flags = ta.dtype_promote(self, target_dtype=ta.graph.DataType.DT_BOOL)
    reduced = getattr(ta.ge, ge_type)(flags, _axes(ta, self, dim), keep_dims=keepdim)
    return ta.dtype_promote(reduced, target_dtype=meta_outputs.dtype)


@aten_converter(aten.any.dims, when="missing", cases=[Support(BOOL(3, 4), [1]), Support(F32(2, 3, 4), [0, 2], True)])
def any_dims(ta: TorchAirApi, self, dim=None, keepdim=False, meta_outputs=None):
    """`aten.any.dims`: `ReduceAny(x != 0, axes, keep_dims)`, the result cast to the node's dtype
    (bool; uint8 for a uint8 input, as aten)."""
    return _reduce_bool(ta, "ReduceAny", self, dim, keepdim, meta_outputs)


@aten_converter(aten.all.dim, when="missing", cases=[Support(BOOL(3, 4), 1), Support(F32(2, 3), 0, True)])
@aten_converter(aten.all.dims, when="missing", cases=[Support(BOOL(3, 4, 2), [0, 2])])
def all_dims(ta: TorchAirApi, self, dim=None, keepdim=False, meta_outputs=None):
    """`aten.all.dim` / `aten.all.dims`: `ReduceAll(x != 0, axes, keep_dims)`, cast to the node's dtype."""
    return _reduce_bool(ta, "ReduceAll", self, dim, keepdim, meta_outputs)


@aten_converter(aten.prod.default, when="missing", cases=[Support(F32(3, 4, value_range=(0.5, 1.5)))])
@aten_converter(aten.prod.dim_int, when="missing", cases=[Support(F32(3, 4, value_range=(0.5, 1.5)), 1, True)])
def prod(ta: TorchAirApi, self, dim=None, keepdim=False, *, dtype=None, meta_outputs=None):
    """`aten.prod` (every dim, or one): `ReduceProd(x in the node's dtype, axes, keep_dims)` (aten
    computes an integer input's product in int64, the node's dtype)."""
    x = ta.dtype_promote(self, target_dtype=meta_outputs.dtype)
    return ta.ge.ReduceProd(x, _axes(ta, self, dim), keep_dims=keepdim)


@aten_converter(aten.isnan.default, when="missing", cases=[Support(F32(3, 4))])
def isnan(ta: TorchAirApi, self, meta_outputs=None):
    """`aten.isnan`: `IsNan(x)` (torch_npu eager: aclnnIsNan); an integer input has no NaN."""
    data_type = ta.graph.DataType
    if self.dtype not in (data_type.DT_FLOAT, data_type.DT_FLOAT16, data_type.DT_BF16, data_type.DT_DOUBLE):
        return ta.ge.Fill(ta.ge.Shape(self), ta.graph.Const(False, dtype=data_type.DT_BOOL))
    return ta.ge.IsNan(self)


@aten_converter(aten.squeeze.dims, when="missing", cases=[Support(F32(1, 3, 1, 4), [0, 2]), Support(F32(2, 1), [0, 1])])
def squeeze_dims(ta: TorchAirApi, self, dim, meta_outputs=None):
    """`aten.squeeze.dims` (`x.squeeze((0, 2))`): the listed dims of size 1 removed, others kept
    (aten); a symbolic size is never 1 (dynamo specialises sizes 0 and 1). `Squeeze(axis)`, or
    `Identity` when none is 1."""
    rank = self.rank
    sizes = self.symsize
    axes = sorted({d % rank for d in dim if rank and sizes[d % rank] == 1})
    return ta.ge.Squeeze(self, axis=axes) if axes else ta.ge.Identity(self)


@aten_converter(aten.clamp_max.default, when="missing", cases=[Support(F32(3, 4), 0.2)])
def clamp_max(ta: TorchAirApi, self, max, meta_outputs=None):  # aten's name
    """`aten.clamp_max` (`x.clamp(max=m)`): TorchAir's own `clamp.default` converter with no lower bound."""
    return ta.lowering(aten.clamp.default)(self, None, max, meta_outputs=meta_outputs)


@aten_converter(aten.clamp_max.Tensor, when="missing", cases=[Support(F32(3, 4), F32(3, 4))])
def clamp_max_tensor(ta: TorchAirApi, self, max, meta_outputs=None):
    """`aten.clamp_max.Tensor`: TorchAir's `clamp.Tensor` converter with no lower bound."""
    return ta.lowering(aten.clamp.Tensor)(self, None, max, meta_outputs=meta_outputs)


@aten_converter(aten.clamp_min.Tensor, when="missing", cases=[Support(F32(3, 4), F32(4))])
def clamp_min_tensor(ta: TorchAirApi, self, min, meta_outputs=None):
    """`aten.clamp_min.Tensor`: TorchAir's `clamp.Tensor` converter with no upper bound."""
    return ta.lowering(aten.clamp.Tensor)(self, min, None, meta_outputs=meta_outputs)


@aten_converter(aten.atan2.default, when="missing", cases=[Support(F32(3, 4), F32(3, 4)), Support(F32(2, 3), F32(3))])
def atan2(ta: TorchAirApi, self, other, meta_outputs=None):
    """`aten.atan2(y, x)`: `Atan2(x1=y, x2=x)` (REG_OP Atan2: atan(x1 / x2) with the quadrant of both;
    torch_npu eager: aclnnAtan2), inputs promoted to the node's dtype."""
    y, x = ta.dtype_promote(self, other, target_dtype=meta_outputs.dtype)
    return ta.ge.Atan2(y, x)


@aten_converter(aten.logical_xor.default, when="missing",
                cases=[Support(BOOL(3, 4), BOOL(3, 4)), Support(F32(3), I32(3))])
def logical_xor(ta: TorchAirApi, self, other, meta_outputs=None):
    """`aten.logical_xor`: `NotEqual(x != 0, y != 0)` (GE has no LogicalXor in TorchAir's op set),
    cast to the node's dtype (bool)."""
    bool_type = ta.graph.DataType.DT_BOOL
    a, b = ta.dtype_promote(self, other, target_dtype=bool_type)
    return ta.dtype_promote(ta.ge.NotEqual(a, b), target_dtype=meta_outputs.dtype)


def _count(ta: TorchAirApi, self, axes_list, dtype):
    """The number of elements reduced over `axes_list`, from `Shape(x)` (symbolic sizes stay symbolic), in `dtype`."""
    int64 = ta.graph.DataType.DT_INT64
    sizes = ta.ge.Gather(ta.ge.Shape(self, dtype=int64), ta.graph.Const(axes_list, dtype=int64))
    return ta.dtype_promote(ta.ge.ReduceProd(sizes, ta.graph.Const([0], dtype=int64), keep_dims=False),
                            target_dtype=dtype)


def _var_and_mean(ta: TorchAirApi, self, dim, correction, keepdim, dtype):
    rank = self.rank
    axes_list = sorted({d % rank for d in ([dim] if isinstance(dim, int) else dim)}) if dim else list(range(rank))
    axes = ta.graph.Const(axes_list, dtype=ta.graph.DataType.DT_INT64)
    x = ta.dtype_promote(self, target_dtype=dtype)
    mean = ta.ge.ReduceMean(x, axes, keep_dims=True)
    squares = ta.ge.ReduceSum(ta.ge.SquaredDifference(x, mean), axes, keep_dims=keepdim)
    correction = 1 if correction is None else correction
    kept = ta.ge.Sub(_count(ta, self, axes_list, dtype), ta.dtype_promote(correction, target_dtype=dtype))
    divisor = ta.ge.Maximum(kept, ta.dtype_promote(0, target_dtype=dtype))
    var = ta.ge.RealDiv(squares, divisor)
    return var, (mean if keepdim else ta.ge.Squeeze(mean, axis=axes_list))


@aten_converter(aten.var.correction, when="missing",
                cases=[Support(F32(3, 4), [1]), Support(F32(2, 3, 4), [0, 2], correction=0, keepdim=True),
                       Support(F32(5, 2)), Support(F32(4, 6), [1], correction=2)])
def var(ta: TorchAirApi, self, dim=None, *, correction=None, keepdim=False, meta_outputs=None):
    """`aten.var.correction` (`x.var(dim)`, hand-written norms): aten's definition, sum((x - mean)^2)
    / max(N - correction, 0) with correction 1 by default (a divisor of 0 gives inf/nan as in
    aten), as `ReduceSum(SquaredDifference(x, ReduceMean(x)))` over `RealDiv` by N from `Shape(x)`."""
    return _var_and_mean(ta, self, dim, correction, keepdim, meta_outputs.dtype)[0]


@aten_converter(aten.var_mean.correction, when="missing",
                cases=[Support(F32(3, 4), [1]), Support(F32(2, 3, 4), [0, 2], correction=0, keepdim=True)])
def var_mean(ta: TorchAirApi, self, dim=None, *, correction=None, keepdim=False, meta_outputs=None):
    """`aten.var_mean.correction` (`torch.var_mean`: hand-written layer norms): (var, mean) as `var`."""
    return _var_and_mean(ta, self, dim, correction, keepdim, meta_outputs[0].dtype)


@aten_converter(aten.roll.default, when="missing",
                cases=[Support(F32(4, 5), [1], [0]), Support(F32(3, 4, 5), [-2, 7], [2, 1]), Support(F32(3, 4), [5])])
def roll(ta: TorchAirApi, self, shifts, dims=(), meta_outputs=None):
    """`aten.roll` (`torch.roll`: Swin's shifted windows): element i of a rolled dim of size n is the
    input's element (i - shift) mod n (aten's definition); without dims the flattened tensor is
    rolled and reshaped back. Lowered per dim to `GatherV2(x, FloorMod(Range(n) - shift, n), dim)`,
    n from `Shape(x)` so symbolic sizes stay symbolic."""
    shifts, dims = list(shifts), list(dims)
    if not dims:
        int64 = ta.graph.DataType.DT_INT64
        flat = ta.ge.Reshape(self, ta.graph.Const([-1], dtype=int64))
        return ta.ge.Reshape(_roll(ta, flat, 1, shifts, [0]), ta.ge.Shape(self, dtype=int64))
    return _roll(ta, self, self.rank, shifts, dims)


def _roll(ta: TorchAirApi, x, rank: int, shifts, dims):
    ge, const, int64 = ta.ge, ta.graph.Const, ta.graph.DataType.DT_INT64
    for shift, dim in zip(shifts, dims, strict=True):
        axis = const(dim % rank, dtype=int64)
        size = ge.Gather(ge.Shape(x, dtype=int64), axis)
        index = ge.FloorMod(ge.Sub(ge.Range(const(0, dtype=int64), size, const(1, dtype=int64)),
                                   const(shift, dtype=int64)), size)
        x = ge.GatherV2(x, index, axis)
    return x


@aten_converter(aten.sort.stable, when="missing",
                cases=[Support(F32(3, 8), stable=True),
                       Support(T([[2, 1, 2, 1, 0, 2]], dtype=torch.int32), stable=True),
                       Support(F32(4, 3, 5), stable=True, dim=1, descending=True), Support(F32(6), stable=False)])
def sort_stable(ta: TorchAirApi, self, *, stable=None, dim=-1, descending=False, meta_outputs=None):
    """`aten.sort.stable` (`torch.sort(x, stable=True)`, `torch.argsort(x, stable=True)`: mixture-of-experts
    routing sorts token-expert pairs this way so tokens keep their order within an expert). TorchAir's
    converter only raises RuntimeError ("ge_converter is not supported!"); its `sort.default` converter
    lowers to GE `Sort`, whose REG_OP (the wheel's auto_generated_ge_raw_ops.py) has the attr
    `.ATTR(stable, Bool, false)`; torch_npu's eager sort passes `stable` to aclnnSort (Ascend/op-plugin
    SortKernelNpuOpApi.cpp). Lowered as TorchAir's `sort.default` (the sorted dim moved last with
    `Transpose` when it is not, int32 indices cast to int64) with `stable` set."""
    rank = self.rank
    dim = dim % rank if rank else 0
    last = max(rank - 1, 0)
    x = self
    if dim != last:
        perm = list(range(rank))
        perm[dim], perm[last] = perm[last], perm[dim]
        perm = ta.graph.Const(perm, dtype=ta.graph.DataType.DT_INT64)
        x = ta.ge.Transpose(x, perm)
    values, indices = ta.ge.Sort(x, axis=last, descending=bool(descending), stable=bool(stable))
    if dim != last:
        values, indices = ta.ge.Transpose(values, perm), ta.ge.Transpose(indices, perm)
    return values, ta.dtype_promote(indices, target_dtype=ta.graph.DataType.DT_INT64)


@aten_converter(aten.trunc.default, when="missing",
                cases=[Support(F32(3, 4, value_range=(-5, 5))), Support(T([-2.5, -0.5, 0.5, 7.9], dtype=torch.float64)),
                       Support(I64(5))])
def trunc(ta: TorchAirApi, self, meta_outputs=None):
    """`aten.trunc` (`torch.trunc`; DPT with `dynamic=True`: `torch_int(n ** 0.5)` of a symbolic length
    becomes a float64 0-d `aten.trunc` in the AOT graph). TorchAir's converter raises NotImplementedError.
    GE `Trunc` (REG_OP Trunc: float16, bfloat16, float32, int8, int32, uint8; rounds toward zero, the
    CANN op of torch_npu's eager trunc, aclnnTrunc) for those dtypes; another integer or bool tensor is
    already whole (`Identity`, aten returns a copy); float64, which Trunc does not take, as
    `SelectV2(x >= 0, Floor(x), Ceil(x))` (Floor and Ceil take FloatingDataType, float64 included;
    NaN goes to Ceil and stays NaN, -0.0 to Floor and stays -0.0)."""
    data_type, ge = ta.graph.DataType, ta.ge
    if self.dtype in (data_type.DT_FLOAT16, data_type.DT_BF16, data_type.DT_FLOAT, data_type.DT_INT8,
                      data_type.DT_INT32, data_type.DT_UINT8):
        return ge.Trunc(self)
    if self.dtype != data_type.DT_DOUBLE:
        return ge.Identity(self)
    zero = ta.graph.Const(0.0, dtype=data_type.DT_DOUBLE)
    return ge.SelectV2(ge.GreaterEqual(self, zero), ge.Floor(self), ge.Ceil(self))

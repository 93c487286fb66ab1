"""Reduction GE ops: Reduce{Mean,Sum,Max,Min,Prod,All,Any,LogSumExp} (axes as input) and their D forms
(axes as attr), ReduceMeanWithCast, ReduceStdV2, ReduceStdWithMean, LpNormV2, ArgMaxV2/ArgMin,
ArgMax/MinWithValue, Cumsum, Histogram (per-bin counts, CANN's histogram semantics as aclnnHistc
documents them).

Sums and means of 16-bit floats accumulate in float32 and round once.
"""
from __future__ import annotations

import torch

from ...._ge.values import ge_dtype_to_torch
from .common import check_dtype, fail, int_list, opmath
from ..registry import builtin_kernel


# Types whose prototype has noop_with_empty_axes, with its default; the others reduce nothing over
# an empty axes list (TF semantics), having no attr to ask for more.
_NOOP_WITH_EMPTY_AXES_DEFAULT = {"ReduceMean": True, "ReduceMeanD": False}


def _reduction(op_type, fn, *, from_attr=False):
    def kernel(inputs, attrs, node):
        x = inputs[0]
        axes = attrs["axes"] if from_attr else int_list(inputs[1])
        keep_dims = attrs.get("keep_dims", False)
        if not axes:
            noop = attrs.get("noop_with_empty_axes", _NOOP_WITH_EMPTY_AXES_DEFAULT.get(op_type, True))
            if op_type not in _NOOP_WITH_EMPTY_AXES_DEFAULT or noop:
                return [x.clone()]
            axes = list(range(x.dim()))
        return [fn(x, axes, keep_dims)]

    kernel.__name__ = f"ge_{op_type}"
    builtin_kernel(op_type)(kernel)


def _mean(x, axes, keep):
    return opmath(x).mean(dim=axes, keepdim=keep).to(x.dtype)


def _sum(x, axes, keep):
    if x.dtype.is_floating_point:
        return opmath(x).sum(dim=axes, keepdim=keep).to(x.dtype)
    return x.sum(dim=axes, keepdim=keep, dtype=x.dtype)


def _amax(x, axes, keep):
    return torch.amax(x, dim=axes, keepdim=keep)


def _amin(x, axes, keep):
    return torch.amin(x, dim=axes, keepdim=keep)


def _prod(x, axes, keep):
    result = x
    for axis in sorted((a % x.dim() for a in axes), reverse=True):
        result = result.prod(dim=axis, keepdim=keep)
    return result.to(x.dtype)


def _all(x, axes, keep):
    return torch.all(x.bool(), dim=tuple(axes), keepdim=keep) if axes else x.bool().all()


def _any(x, axes, keep):
    return torch.any(x.bool(), dim=tuple(axes), keepdim=keep) if axes else x.bool().any()


def _log_sum_exp(x, axes, keep):
    if not x.dtype.is_floating_point:
        return torch.logsumexp(x.double(), dim=axes, keepdim=keep).to(x.dtype)
    return torch.logsumexp(opmath(x), dim=axes, keepdim=keep).to(x.dtype)


for _suffix, _fn in (("Mean", _mean), ("Sum", _sum), ("Max", _amax), ("Min", _amin),
                     ("Prod", _prod), ("All", _all), ("Any", _any)):
    _reduction(f"Reduce{_suffix}", _fn)
    _reduction(f"Reduce{_suffix}D", _fn, from_attr=True)
_reduction("ReduceLogSumExp", _log_sum_exp)


@builtin_kernel("ReduceMeanWithCast")
def _reduce_mean_with_cast(inputs, attrs, node):
    x, axes = inputs[0], int_list(inputs[1])
    dtype_number = attrs.get("dtype")
    out_dtype = x.dtype if dtype_number in (None, 28) else ge_dtype_to_torch(dtype_number)  # 28: DT_UNDEFINED
    if not axes and attrs.get("noop_with_empty_axes", True):
        return [x.to(out_dtype)]
    axes = axes or list(range(x.dim()))
    return [opmath(x).mean(dim=axes, keepdim=attrs.get("keep_dims", False)).to(out_dtype)]


def _arg_reduce(fn):
    def kernel(inputs, attrs, node):
        x, dimension = inputs[0], int_list(inputs[1])
        out_dtype = ge_dtype_to_torch(attrs.get("dtype", 9))  # DT_INT64 by default
        return [fn(x, dim=dimension[0]).to(out_dtype)]

    return kernel


builtin_kernel("ArgMaxV2")(_arg_reduce(torch.argmax))
builtin_kernel("ArgMin")(_arg_reduce(torch.argmin))


@builtin_kernel("Cumsum")
def _cumsum(inputs, attrs, node):
    x, axis = inputs[0], int_list(inputs[1])[0]
    if attrs.get("reverse", False):
        x = x.flip(axis)
    result = torch.cumsum(x, dim=axis, dtype=x.dtype)
    if attrs.get("exclusive", False):
        result = result - x
    if attrs.get("reverse", False):
        result = result.flip(axis)
    return [result]


def _arg_with_value(fn):
    def kernel(inputs, attrs, node):
        x = inputs[0]
        values, indices = fn(x, dim=attrs["dimension"], keepdim=attrs.get("keep_dims", False))
        return [indices.to(torch.int32), values]

    return kernel


builtin_kernel("ArgMaxWithValue")(_arg_with_value(torch.max))
builtin_kernel("ArgMinWithValue")(_arg_with_value(torch.min))


_STD_FLOATS = (torch.float32, torch.float16, torch.bfloat16)


def _std_axes(node, x, dims):
    """The reduced axes: `dim`, or every axis when it is empty; out-of-range axes are refused."""
    rank = max(x.dim(), 1)
    for d in dims:
        if not -rank <= d < rank:
            fail(node, f"dim {d} is out of range for rank {x.dim()}")
    return sorted({d % rank for d in dims}) if dims else list(range(x.dim()))


@builtin_kernel("ReduceStdWithMean")
def _reduce_std_with_mean(inputs, attrs, node):
    """The standard deviation of x around the given mean (broadcast to x), or with invert=true
    1 / sqrt(variance + epsilon). CANN's divisor (ops reduce_std_with_mean): N - correction when
    unbiased, except that N == correction divides by 1; N when not unbiased."""
    x, mean = inputs
    check_dtype(node, "x", x, _STD_FLOATS)
    check_dtype(node, "mean", mean, _STD_FLOATS)
    axes = _std_axes(node, x, attrs.get("dim", []))
    count = 1
    for axis in axes:
        count *= x.shape[axis] if x.dim() else 1
    correction = attrs.get("correction", 1)
    if attrs.get("unbiased", True):
        divisor = 1.0 if count == correction else float(count - correction)
    else:
        divisor = float(count)
    wide, centre = opmath(x).float(), opmath(mean).float()
    squares = (wide - centre) ** 2
    summed = squares.sum(dim=axes, keepdim=attrs.get("keepdim", False)) if axes else squares
    variance = summed / divisor
    if attrs.get("invert", False):
        return [torch.rsqrt(variance + attrs.get("epsilon", 0.001)).to(x.dtype)]
    return [torch.sqrt(variance).to(x.dtype)]


@builtin_kernel("ReduceStdV2", unread_attrs={
    "is_mean_out": "only lets the NPU skip writing the mean output; the simulator always writes the mean"})
def _reduce_std_v2(inputs, attrs, node):
    """std over `dim` (all axes when empty) with divisor max(0, N - correction), and the mean."""
    x = inputs[0]
    check_dtype(node, "x", x, _STD_FLOATS)
    axes = _std_axes(node, x, attrs.get("dim", []))
    keep = attrs.get("keepdim", False)
    wide = opmath(x).float()
    if not axes:
        return [torch.zeros_like(x), x.clone()]  # a 0-d x: nothing to reduce
    std = torch.std(wide, dim=axes, correction=attrs.get("correction", 1), keepdim=keep)
    return [std.to(x.dtype), wide.mean(dim=axes, keepdim=keep).to(x.dtype)]


_INT32_MAX, _INT32_MIN = 2 ** 31 - 1, -(2 ** 31)


@builtin_kernel("LpNormV2")
def _lp_norm_v2(inputs, attrs, node):
    """y = max((sum |x|^p)^(1/p), epsilon) over `axes` (all when empty). p = 0 counts non-zeros;
    +inf / -inf, which TorchAir writes as INT32_MAX / INT32_MIN, take max / min |x|."""
    x = inputs[0]
    check_dtype(node, "x", x, (torch.float16, torch.float32, torch.bfloat16))
    p = float(attrs.get("p", 2.0))
    axes = _std_axes(node, x, attrs.get("axes", []))
    keep = attrs.get("keepdim", False)
    magnitude = opmath(x).float().abs()
    if not axes:
        norm = magnitude if p != 0 else (magnitude != 0).float()
    elif p >= _INT32_MAX or p == float("inf"):
        norm = torch.amax(magnitude, dim=axes, keepdim=keep)
    elif p <= _INT32_MIN or p == float("-inf"):
        norm = torch.amin(magnitude, dim=axes, keepdim=keep)
    elif p == 0:
        norm = (magnitude != 0).float().sum(dim=axes, keepdim=keep)
    else:
        norm = magnitude.pow(p).sum(dim=axes, keepdim=keep).pow(1.0 / p)
    return [torch.clamp_min(norm, attrs.get("epsilon", 1e-12)).to(x.dtype)]


@builtin_kernel("Histogram")
def _histogram(inputs, attrs, node):
    """`bins` equal-width bins over [min, max] (both ends included); min == max takes the data's own
    minimum and maximum; elements outside are not counted (aclnnHistc, CANN ops-math histogram_v2).
    Float inputs give float32 counts, int32 inputs int32 counts (the prototype's output types)."""
    x = inputs[0]
    check_dtype(node, "x", x, (torch.float16, torch.float32, torch.int32))
    bins = attrs.get("bins", 100)
    if bins <= 0:
        fail(node, f"bins must be positive, got {bins}")
    low, high = float(attrs.get("min", 0.0)), float(attrs.get("max", 0.0))
    if low > high:
        fail(node, f"min {low} is greater than max {high}")
    counts = torch.histc(x.to(torch.float64), bins=bins, min=low, max=high)
    return [counts.to(torch.int32 if x.dtype == torch.int32 else torch.float32)]

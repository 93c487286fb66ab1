"""Reduction GE ops: Reduce{Mean,Sum,Max,Min,Prod,All,Any,LogSumExp} (axes as input) and their D forms
(axes as attr), ReduceMeanWithCast, ReduceStdV2, ReduceStdWithMean, LpNormV2, ArgMaxV2/ArgMin,
ArgMax/MinWithValue, Cumsum, Histogram (per-bin counts, CANN's histogram semantics as aclnnHistc
documents them).

Semantics from the CANN prototypes (``REG_OP`` in TorchAir's ``auto_generated_ge_raw_ops.py``); hicann
ops-math files these ops in ``math/`` (``reduce_*``, ``arg_max_v2``, ``cumsum``, ``histogram_v2``...),
except LpNormV2, which ops-nn files in ``norm/`` and which is kept here beside the other p-norm-like
reductions. Sums and means of 16-bit floats accumulate in float32 and round once.
"""
from __future__ import annotations

import torch
from ....._ge.values import ge_dtype_to_torch
from ...registry import ge_kernel, refuse
from ..common import int_list, opmath

# ---- Reduce* ---------------------------------------------------------------------------------
# Only ReduceMean and ReduceMeanD have noop_with_empty_axes (its REG_OP defaults differ: True and
# False); the others reduce nothing over an empty axes list (TF semantics), having no attr to ask for more.

def _reduce(fn, x, axes, keep_dims, noop):
    if not axes:
        if noop:
            return x.clone()
        axes = list(range(x.dim()))
    return fn(x, axes, keep_dims)


def _register(op_type, kernel, prepared=False):
    kernel.__name__ = kernel.__qualname__ = "reduce_" + op_type[len("Reduce"):].lower()
    ge_kernel(op_type, prepared=prepared)(kernel)


def _reduce_call(fn, axes, keep_dims, noop):
    """The call reducing with `fn` over the axes input: read once where it is fixed."""
    if axes.value is None:
        return lambda x, axes: _reduce(fn, x, int_list(axes), keep_dims, noop)
    dims = int_list(axes.value)
    return lambda x, axes: _reduce(fn, x, dims, keep_dims, noop)


def _axes_input(op_type, fn):
    def prepare(x, axes, *, keep_dims):
        return _reduce_call(fn, axes, keep_dims, True)

    _register(op_type, prepare, prepared=True)


def _axes_attr(op_type, fn):
    def kernel(x, *, axes, keep_dims):
        return _reduce(fn, x, axes, keep_dims, True)

    _register(op_type, kernel)


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


for _suffix, _fn in (("Sum", _sum), ("Max", _amax), ("Min", _amin), ("Prod", _prod), ("All", _all), ("Any", _any)):
    _axes_input(f"Reduce{_suffix}", _fn)
    _axes_attr(f"Reduce{_suffix}D", _fn)
_axes_input("ReduceLogSumExp", _log_sum_exp)


@ge_kernel("ReduceMean", prepared=True)
def reduce_mean(x, axes, *, keep_dims, noop_with_empty_axes):
    if axes.value is not None and x.dtype in (torch.float32, torch.float64):
        dims = int_list(axes.value)
        if dims:  # computed as it is: the call eager makes
            return lambda x, axes: x.mean(dim=dims, keepdim=keep_dims)
    return _reduce_call(_mean, axes, keep_dims, noop_with_empty_axes)


@ge_kernel("ReduceMeanD")
def reduce_mean_d(x, *, axes, keep_dims, noop_with_empty_axes):
    return _reduce(_mean, x, axes, keep_dims, noop_with_empty_axes)


@ge_kernel("ReduceMeanWithCast")
def reduce_mean_with_cast(x, axes, *, keep_dims, noop_with_empty_axes, dtype):
    axes = int_list(axes)
    out_dtype = x.dtype if dtype in (None, 28) else ge_dtype_to_torch(dtype)  # 28: DT_UNDEFINED
    if not axes and noop_with_empty_axes:
        return x.to(out_dtype)
    axes = axes or list(range(x.dim()))
    return opmath(x).mean(dim=axes, keepdim=keep_dims).to(out_dtype)


# ---- ArgMax, ArgMin --------------------------------------------------------------------------

@ge_kernel("ArgMaxV2")
def arg_max_v2(x, dimension, *, dtype):
    return torch.argmax(x, dim=int_list(dimension)[0]).to(ge_dtype_to_torch(dtype))


@ge_kernel("ArgMin")
def arg_min(x, dimension, *, dtype):
    return torch.argmin(x, dim=int_list(dimension)[0]).to(ge_dtype_to_torch(dtype))


@ge_kernel("ArgMaxWithValue")
def arg_max_with_value(x, *, dimension, keep_dims):
    values, indices = torch.max(x, dim=dimension, keepdim=keep_dims)
    return indices.to(torch.int32), values


@ge_kernel("ArgMinWithValue")
def arg_min_with_value(x, *, dimension, keep_dims):
    values, indices = torch.min(x, dim=dimension, keepdim=keep_dims)
    return indices.to(torch.int32), values


# ---- Cumsum ----------------------------------------------------------------------------------

@ge_kernel("Cumsum")
def cumsum(x, axis, *, exclusive, reverse):
    dim = int_list(axis)[0]
    if reverse:
        x = x.flip(dim)
    result = torch.cumsum(x, dim=dim, dtype=x.dtype)
    if exclusive:
        result = result - x
    if reverse:
        result = result.flip(dim)
    return result


# ---- standard deviation, p-norm ---------------------------------------------------------------

_STD_FLOATS = (torch.float32, torch.float16, torch.bfloat16)


def _std_axes(x, dims):
    """The reduced axes: `dim`, or every axis when it is empty; out-of-range axes are refused."""
    rank = max(x.dim(), 1)
    for d in dims:
        if not -rank <= d < rank:
            refuse(f"dim {d} is out of range for rank {x.dim()}")
    return sorted({d % rank for d in dims}) if dims else list(range(x.dim()))


@ge_kernel("ReduceStdWithMean", accepts={"x": _STD_FLOATS, "mean": _STD_FLOATS})
def reduce_std_with_mean(x, mean, *, dim, unbiased, keepdim, invert, epsilon, correction):
    """The standard deviation of x around the given mean (broadcast to x), or with invert=true
    1 / sqrt(variance + epsilon). CANN's divisor (ops reduce_std_with_mean): N - correction when
    unbiased, except that N == correction divides by 1; N when not unbiased."""
    axes = _std_axes(x, dim)
    count = 1
    for axis in axes:
        count *= x.shape[axis] if x.dim() else 1
    if unbiased:
        divisor = 1.0 if count == correction else float(count - correction)
    else:
        divisor = float(count)
    wide, centre = opmath(x).float(), opmath(mean).float()
    squares = (wide - centre) ** 2
    summed = squares.sum(dim=axes, keepdim=keepdim) if axes else squares
    variance = summed / divisor
    if invert:
        return torch.rsqrt(variance + epsilon).to(x.dtype)
    return torch.sqrt(variance).to(x.dtype)


@ge_kernel("ReduceStdV2", accepts={"x": _STD_FLOATS}, layout_only={
    "is_mean_out": "only lets the NPU skip writing the mean output; the simulator always writes the mean"})
def reduce_std_v2(x, *, dim, correction, keepdim):
    """std over `dim` (all axes when empty) with divisor max(0, N - correction), and the mean."""
    axes = _std_axes(x, dim)
    wide = opmath(x).float()
    if not axes:
        return torch.zeros_like(x), x.clone()  # a 0-d x: nothing to reduce
    std = torch.std(wide, dim=axes, correction=correction, keepdim=keepdim)
    return std.to(x.dtype), wide.mean(dim=axes, keepdim=keepdim).to(x.dtype)


_INT32_MAX, _INT32_MIN = 2 ** 31 - 1, -(2 ** 31)


@ge_kernel("LpNormV2", accepts={"x": (torch.float16, torch.float32, torch.bfloat16)})
def lp_norm_v2(x, *, p, axes, keepdim, epsilon):
    """y = max((sum |x|^p)^(1/p), epsilon) over `axes` (all when empty). p = 0 counts non-zeros;
    +inf / -inf, which TorchAir writes as INT32_MAX / INT32_MIN, take max / min |x|."""
    p = float(p)
    dims = _std_axes(x, axes)
    magnitude = opmath(x).float().abs()
    if not dims:
        norm = magnitude if p != 0 else (magnitude != 0).float()
    elif p >= _INT32_MAX or p == float("inf"):
        norm = torch.amax(magnitude, dim=dims, keepdim=keepdim)
    elif p <= _INT32_MIN or p == float("-inf"):
        norm = torch.amin(magnitude, dim=dims, keepdim=keepdim)
    elif p == 0:
        norm = (magnitude != 0).float().sum(dim=dims, keepdim=keepdim)
    else:
        norm = magnitude.pow(p).sum(dim=dims, keepdim=keepdim).pow(1.0 / p)
    return torch.clamp_min(norm, epsilon).to(x.dtype)


# ---- Histogram -------------------------------------------------------------------------------

@ge_kernel("Histogram", accepts={"x": (torch.float16, torch.float32, torch.int32)})
def histogram(x, *, bins, min, max):
    """`bins` equal-width bins over [min, max] (both ends included); min == max takes the data's own
    minimum and maximum; elements outside are not counted (aclnnHistc, CANN ops-math histogram_v2).
    Float inputs give float32 counts, int32 inputs int32 counts (the prototype's output types)."""
    if bins <= 0:
        refuse(f"bins must be positive, got {bins}")
    low, high = float(min), float(max)
    if low > high:
        refuse(f"min {low} is greater than max {high}")
    counts = torch.histc(x.to(torch.float64), bins=bins, min=low, max=high)
    return counts.to(torch.int32 if x.dtype == torch.int32 else torch.float32)

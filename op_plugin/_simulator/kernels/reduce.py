"""Reduction GE ops: Reduce{Mean,Sum,Max,Min,Prod,All,Any} (axes as input) and their D forms (axes
as attr), ReduceMeanWithCast, ArgMaxV2/ArgMin, ArgMax/MinWithValue, Cumsum.

Sums and means of 16-bit floats accumulate in float32 and round once.
"""
from __future__ import annotations

import torch

from ..._ge.values import ge_dtype_to_torch
from .common import int_list, opmath
from .registry import builtin_kernel


def _reduction(op_type, fn, *, from_attr=False):
    def kernel(inputs, attrs, node):
        x = inputs[0]
        axes = attrs.get("axes", []) if from_attr else int_list(inputs[1])
        keep_dims = attrs.get("keep_dims", False)
        if not axes:
            # An empty axes list reduces nothing (TF semantics) unless noop_with_empty_axes is false.
            if attrs.get("noop_with_empty_axes", True):
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


for _suffix, _fn in (("Mean", _mean), ("Sum", _sum), ("Max", _amax), ("Min", _amin),
                     ("Prod", _prod), ("All", _all), ("Any", _any)):
    _reduction(f"Reduce{_suffix}", _fn)
    _reduction(f"Reduce{_suffix}D", _fn, from_attr=True)


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

"""Fast calls of the slicing, joining and indexing kernels (kernels/shape_slice.py, shape.py, index.py,
math_compare.py): the index the kernel builds from its Const begin/end/axes/strides (or offsets/size,
split sizes, concat dim) is built once; aten.index with the node's index tensors, where any refusal
re-runs the kernel (its own range error; its wrapping of negative indices gives what aten.index gives)."""
from __future__ import annotations

import torch

from ..kernels.common import int_list
from ..kernels.index import index_by_tensor as _index_kernel
from ..kernels.shape_slice import _INT64_MAX
from . import specialises


def _strided_index(x, begin, end, axes, strides):
    """kernels/shape_slice.py `_strided_slice`'s index (masks all 0), or None where the kernel refuses."""
    axes = list(range(len(begin))) if axes is None else axes
    strides = [1] * len(begin) if strides is None else strides
    if not (len(axes) == len(begin) == len(end) == len(strides)) or x.dim() == 0:
        return None
    index = [slice(None)] * x.dim()
    for axis, start, stop, step in zip(axes, begin, end, strides, strict=True):
        if step <= 0:
            return None
        length = x.shape[axis]
        stop = min(stop, length) if stop < _INT64_MAX else length
        index[axis % x.dim()] = slice(start, stop, step)
    return tuple(index)


def _values(tensor):
    return None if tensor is None else int_list(tensor)


@specialises("StridedSliceV2", reads_values=("begin", "end", "axes", "strides"))
def strided_slice_v2(x, begin, end, axes, strides, *, begin_mask, end_mask, ellipsis_mask, new_axis_mask,
                     shrink_axis_mask):
    if begin_mask or end_mask or ellipsis_mask or new_axis_mask or shrink_axis_mask:
        return None
    index = _strided_index(x, int_list(begin), int_list(end), _values(axes), _values(strides))
    return None if index is None else (lambda x, begin, end, axes, strides: x[index].contiguous())


@specialises("StridedSlice", reads_values=("begin", "end", "strides"))
def strided_slice(x, begin, end, strides, *, begin_mask, end_mask, ellipsis_mask, new_axis_mask, shrink_axis_mask):
    if begin_mask or end_mask or ellipsis_mask or new_axis_mask or shrink_axis_mask:
        return None
    index = _strided_index(x, int_list(begin), int_list(end), None, int_list(strides))
    return None if index is None else (lambda x, begin, end, strides: x[index].contiguous())


@specialises("Slice", reads_values=("offsets", "size"))
def slice_(x, offsets, size):
    index = tuple(slice(offset, x.shape[dim] if length == -1 else offset + length)
                  for dim, (offset, length) in enumerate(zip(int_list(offsets), int_list(size), strict=True)))
    return lambda x, offsets, size: x[index].contiguous()


@specialises("IndexByTensor")
def index_by_tensor(x, indices, *, indices_mask):
    mask = list(indices_mask or [1] * len(indices))
    if any(t is None or t.dtype != torch.int64 for t in indices) or sum(mask) != len(indices) \
            or any(m not in (0, 1) for m in mask) or len(mask) > max(x.dim(), 1):
        return None
    index = torch.ops.aten.index.Tensor

    def call(x, indices):
        pending = iter(indices)
        full = [next(pending) if marked else None for marked in mask]
        try:
            return index(x, full).contiguous()
        except (IndexError, RuntimeError):
            return _index_kernel(x, indices, indices_mask=indices_mask)

    return call


@specialises("ConcatV2", reads_values=("concat_dim",))
def concat_v2(x, concat_dim, *, N):
    if any(t.dim() == 0 for t in x):  # the kernel reshapes 0-d inputs first: left to it
        return None
    dim, cat = int_list(concat_dim)[0], torch.cat
    return lambda x, concat_dim: cat(x, dim)


@specialises("SplitV", reads_values=("size_splits", "split_dim"))
def split_v(x, size_splits, split_dim, *, num_split):
    sizes, dim = int_list(size_splits), int_list(split_dim)[0]
    if -1 in sizes:
        known = sum(s for s in sizes if s != -1)
        sizes = [x.shape[dim] - known if s == -1 else s for s in sizes]
    split = torch.split
    return lambda x, size_splits, split_dim: tuple(t.contiguous() for t in split(x, sizes, dim))


@specialises("SelectV2")
def select_v2(condition, then, else_):
    if condition.dtype != torch.bool:
        return None
    return torch.where

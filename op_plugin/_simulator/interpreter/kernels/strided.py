"""GE ops that read or write a tensor's memory through explicit strides: AsStrided, ViewCopy, Assign.

GE hands every op a dense, contiguous buffer, so a (size, stride, storage_offset) view is taken on
the input's flattened elements, as TorchAir's converters (``ge_converter/aten/as_strided.py``,
``as_strided_scatter.py``, ``new_empty_strided.py``, ``copy_.py``) assume. A view reaching past the
buffer is an error naming the node (on the NPU it would read or write foreign memory).
"""
from __future__ import annotations

import torch

from .common import check_dtype, fail, int_list
from ..registry import builtin_kernel

_INDEX_NUMBER = (torch.int32, torch.int64)


def _view(node, what, flat, size, stride, offset):
    """flat.as_strided(size, stride, offset), after checking it stays inside `flat`."""
    if len(size) != len(stride):
        fail(node, f"{what}: size {size} and stride {stride} differ in length")
    if any(s < 0 for s in size) or any(s < 0 for s in stride) or offset < 0:
        fail(node, f"{what}: size {size}, stride {stride} and offset {offset} must be non-negative")
    if all(s > 0 for s in size):
        last = offset + sum((n - 1) * st for n, st in zip(size, stride))
        if last >= flat.numel():
            fail(node, f"{what}: view size {size} stride {stride} offset {offset} reaches element {last} "
                       f"of a buffer of {flat.numel()}")
    return flat.as_strided(size, stride, offset)


def _index_input(node, what, tensor):
    check_dtype(node, what, tensor, _INDEX_NUMBER)
    return int_list(tensor)


@builtin_kernel("AsStrided")
def _as_strided(inputs, attrs, node):
    """y = the (size, stride, storage_offset) view of x's elements, made dense."""
    x, size, stride, offset = inputs
    flat = x.contiguous().reshape(-1)
    view = _view(node, "x", flat, _index_input(node, "size", size), _index_input(node, "stride", stride),
                 _index_input(node, "storage_offset", offset)[0])
    return [view.clone(memory_format=torch.contiguous_format)]


@builtin_kernel("ViewCopy")
def _view_copy(inputs, attrs, node):
    """dst with its (dst_size, dst_stride, dst_storage_offset) view overwritten by src's
    (src_size, src_stride, src_storage_offset) view; the two views must have one shape."""
    dst, dst_size, dst_stride, dst_offset, src, src_size, src_stride, src_offset = inputs
    if src.dtype != dst.dtype:
        fail(node, f"src dtype {src.dtype} differs from dst dtype {dst.dtype}")
    out = dst.contiguous().clone().reshape(-1)
    target = _view(node, "dst", out, _index_input(node, "dst_size", dst_size),
                   _index_input(node, "dst_stride", dst_stride), _index_input(node, "dst_storage_offset", dst_offset)[0])
    source = _view(node, "src", src.contiguous().reshape(-1), _index_input(node, "src_size", src_size),
                   _index_input(node, "src_stride", src_stride), _index_input(node, "src_storage_offset", src_offset)[0])
    if target.shape != source.shape:
        fail(node, f"dst view {list(target.shape)} and src view {list(source.shape)} differ in shape")
    target.copy_(source)
    return [out.reshape(dst.shape)]


@builtin_kernel("Assign", unread_attrs={"use_locking": "guards concurrent updates of ref; one CPU thread runs the graph"})
def _assign(inputs, attrs, node):
    """ref = value. validate_shape=True requires one shape; False lets ref take value's shape."""
    ref, value = inputs
    if value.dtype != ref.dtype:
        fail(node, f"value dtype {value.dtype} differs from ref dtype {ref.dtype}")
    if attrs.get("validate_shape", True) and value.shape != ref.shape:
        fail(node, f"validate_shape: value shape {list(value.shape)} differs from ref shape {list(ref.shape)}")
    return [value.clone(memory_format=torch.contiguous_format)]

"""GE ops that read or write a window of a tensor: Slice, StridedSlice, StridedSliceV2 (boxes of
elements), AsStrided, ViewCopy (explicit size, stride, storage offset) and Assign (the whole tensor).

Semantics from the CANN prototypes (``REG_OP`` in TorchAir's ``auto_generated_ge_raw_ops.py``; hicann
ops-math files them in ``conversion/`` with most ops of `shape`, from which this module is split by
sub-concept so that neither passes 400 lines).

GE hands every op a dense, contiguous buffer, so a (size, stride, storage_offset) view is taken on
the input's flattened elements, as TorchAir's converters (``ge_converter/aten/as_strided.py``,
``as_strided_scatter.py``, ``new_empty_strided.py``, ``copy_.py``) assume. A view reaching past the
buffer is refused (on the NPU it would read or write foreign memory).
"""
from __future__ import annotations

import torch
from ...registry import ge_kernel, refuse
from ..common import int_list

_INT64_MAX = 2**63 - 1
_INDEX_NUMBER = (torch.int32, torch.int64)


# ---- Slice, StridedSlice ---------------------------------------------------------------------

def _slice_index(x_shape, offsets, size) -> tuple:
    index = []
    for dim, (offset, length) in enumerate(zip(int_list(offsets), int_list(size), strict=True)):
        end = x_shape[dim] if length == -1 else offset + length
        index.append(slice(offset, end))
    return tuple(index)


@ge_kernel("Slice", prepared=True)
def slice_(x, offsets, size):
    """Fixed offsets and size are read once."""
    if offsets.value is not None and size.value is not None:
        index = _slice_index(x.shape, offsets.value, size.value)
        return lambda x, offsets, size: x[index].contiguous()
    return lambda x, offsets, size: x[_slice_index(x.shape, offsets, size)].contiguous()


def _strided_index(shape, begin, end, axes, strides) -> tuple:
    axes = list(range(len(begin))) if axes is None else axes
    strides = [1] * len(begin) if strides is None else strides
    index = [slice(None)] * len(shape)
    for axis, start, stop, step in zip(axes, begin, end, strides, strict=True):
        if step <= 0:
            refuse(f"stride {step} is not supported by the simulator")
        length = shape[axis]
        stop = min(stop, length) if stop < _INT64_MAX else length  # torch clamps like GE
        index[axis % len(shape)] = slice(start, stop, step)
    return tuple(index)


def _strided_slice(x, begin, end, axes, strides, masks):
    if any(masks.values()):
        refuse(f"masks {masks} are not supported by the simulator")
    return x[_strided_index(x.shape, begin, end, axes, strides)].contiguous()


@ge_kernel("StridedSliceV2", prepared=True)
def strided_slice_v2(x, begin, end, axes, strides, *, begin_mask, end_mask, ellipsis_mask, new_axis_mask,
                     shrink_axis_mask):
    """Fixed begin/end/axes/strides are read and checked once, into the index the call takes."""
    masks = {"begin_mask": begin_mask, "end_mask": end_mask, "ellipsis_mask": ellipsis_mask,
             "new_axis_mask": new_axis_mask, "shrink_axis_mask": shrink_axis_mask}
    if any(masks.values()):
        refuse(f"masks {masks} are not supported by the simulator")
    fixed = all(spec is None or spec.value is not None for spec in (begin, end, axes, strides))
    if fixed:
        index = _strided_index(x.shape, int_list(begin.value), int_list(end.value),
                               None if axes is None else int_list(axes.value),
                               None if strides is None else int_list(strides.value))
        return lambda x, begin, end, axes, strides: x[index].contiguous()

    def call(x, begin, end, axes, strides):
        return _strided_slice(x, int_list(begin), int_list(end), None if axes is None else int_list(axes),
                              None if strides is None else int_list(strides), masks)

    return call


@ge_kernel("StridedSlice")
def strided_slice(x, begin, end, strides, *, begin_mask, end_mask, ellipsis_mask, new_axis_mask, shrink_axis_mask):
    masks = {"begin_mask": begin_mask, "end_mask": end_mask, "ellipsis_mask": ellipsis_mask,
             "new_axis_mask": new_axis_mask, "shrink_axis_mask": shrink_axis_mask}
    return _strided_slice(x, int_list(begin), int_list(end), None, int_list(strides), masks)


# ---- AsStrided, ViewCopy ---------------------------------------------------------------------

def _view(what, flat, size, stride, offset):
    """flat.as_strided(size, stride, offset), after checking it stays inside `flat`."""
    if len(size) != len(stride):
        refuse(f"{what}: size {size} and stride {stride} differ in length")
    if any(s < 0 for s in size) or any(s < 0 for s in stride) or offset < 0:
        refuse(f"{what}: size {size}, stride {stride} and offset {offset} must be non-negative")
    if all(s > 0 for s in size):
        last = offset + sum((n - 1) * st for n, st in zip(size, stride, strict=True))
        if last >= flat.numel():
            refuse(f"{what}: view size {size} stride {stride} offset {offset} reaches element {last} "
                   f"of a buffer of {flat.numel()}")
    return flat.as_strided(size, stride, offset)


@ge_kernel("AsStrided", accepts={"size": _INDEX_NUMBER, "stride": _INDEX_NUMBER, "storage_offset": _INDEX_NUMBER})
def as_strided(x, size, stride, storage_offset):
    """y = the (size, stride, storage_offset) view of x's elements, made dense."""
    flat = x.contiguous().reshape(-1)
    view = _view("x", flat, int_list(size), int_list(stride), int_list(storage_offset)[0])
    return view.clone(memory_format=torch.contiguous_format)


@ge_kernel("ViewCopy", one_dtype=("dst", "src"), accepts={
    name: _INDEX_NUMBER for name in ("dst_size", "dst_stride", "dst_storage_offset", "src_size", "src_stride",
                                     "src_storage_offset")})
def view_copy(dst, dst_size, dst_stride, dst_storage_offset, src, src_size, src_stride, src_storage_offset):
    """dst with its (dst_size, dst_stride, dst_storage_offset) view overwritten by src's
    (src_size, src_stride, src_storage_offset) view; the two views must have one shape."""
    out = dst.contiguous().clone().reshape(-1)
    target = _view("dst", out, int_list(dst_size), int_list(dst_stride), int_list(dst_storage_offset)[0])
    source = _view("src", src.contiguous().reshape(-1), int_list(src_size), int_list(src_stride),
                   int_list(src_storage_offset)[0])
    if target.shape != source.shape:
        refuse(f"dst view {list(target.shape)} and src view {list(source.shape)} differ in shape")
    target.copy_(source)
    return out.reshape(dst.shape)


# ---- Assign ----------------------------------------------------------------------------------

@ge_kernel("Assign", one_dtype=("ref", "value"),
           layout_only={"use_locking": "guards concurrent updates of ref; one CPU thread runs the graph"})
def assign(ref, value, *, validate_shape):
    """ref = value. validate_shape=True requires one shape; False lets ref take value's shape."""
    if validate_shape and value.shape != ref.shape:
        refuse(f"validate_shape: value shape {list(value.shape)} differs from ref shape {list(ref.shape)}")
    return value.clone(memory_format=torch.contiguous_format)

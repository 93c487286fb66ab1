"""CPU kernels for built-in GE data-movement ops: shape, reshape, transpose, concat, gather, slice...

Index-like inputs (perm, shape, axes, offsets...) arrive as small int tensors (usually Const
nodes); `common.int_list` turns them into Python ints. Range, Fill and OneHot make new index or
constant tensors. Every result is contiguous and, as a GE op writes into its own output buffer, a
fresh tensor, except that reshape-like ops return views while the plan runs a graph in which no
node writes into an input (`common.fresh`).
"""

from __future__ import annotations

import math

import torch

from ...._ge.values import ge_dtype_to_torch
from .common import fail, fresh, int_list
from ..registry import builtin_kernel

_INT64_MAX = 2**63 - 1


@builtin_kernel("Shape")
def _shape(inputs, attrs, node):
    dtype = ge_dtype_to_torch(attrs.get("dtype", 3))  # DT_INT32 by default
    return [torch.tensor(list(inputs[0].shape), dtype=dtype)]


@builtin_kernel("ShapeN")
def _shape_n(inputs, attrs, node):
    dtype = ge_dtype_to_torch(attrs.get("dtype", 3))
    return [torch.tensor(list(x.shape), dtype=dtype) for x in inputs]


@builtin_kernel("Size")
def _size(inputs, attrs, node):
    return [torch.tensor(inputs[0].numel(), dtype=ge_dtype_to_torch(attrs.get("dtype", 3)))]


@builtin_kernel("Rank")
def _rank(inputs, attrs, node):
    return [torch.tensor(inputs[0].dim(), dtype=torch.int32)]


@builtin_kernel("Reshape")
def _reshape(inputs, attrs, node):
    x, shape = inputs[0], int_list(inputs[1])
    axis, num_axes = attrs.get("axis", 0), attrs.get("num_axes", -1)
    if axis != 0 or num_axes != -1:
        # Reshape of a sub-range of dims [axis, axis + num_axes).
        begin = axis % (x.dim() + 1)
        end = x.dim() if num_axes == -1 else begin + num_axes
        shape = list(x.shape[:begin]) + shape + list(x.shape[end:])
    return [fresh(x.reshape(shape))]


@builtin_kernel("Transpose")
def _transpose(inputs, attrs, node):
    return [inputs[0].permute(int_list(inputs[1])).contiguous()]


@builtin_kernel("TransposeD")
def _transpose_d(inputs, attrs, node):
    return [inputs[0].permute(attrs["perm"]).contiguous()]


@builtin_kernel("Squeeze")
def _squeeze(inputs, attrs, node):
    x, axes = inputs[0], attrs.get("axis", [])
    if not axes:
        return [fresh(x.squeeze())]
    for axis in axes:
        if x.shape[axis] != 1:
            raise ValueError(f"Squeeze axis {axis} has size {x.shape[axis]}, not 1 (shape {list(x.shape)})")
    return [fresh(x.squeeze(tuple(axes)))]


def _unsqueeze_all(x, axes):
    rank = x.dim() + len(axes)
    positions = sorted(a % rank for a in axes)
    shape = list(x.shape)
    for position in positions:
        shape.insert(position, 1)
    return fresh(x.reshape(shape))


@builtin_kernel("Unsqueeze")
def _unsqueeze(inputs, attrs, node):
    return [_unsqueeze_all(inputs[0], attrs.get("axes", []))]


@builtin_kernel("ExpandDims")
def _expand_dims(inputs, attrs, node):
    return [_unsqueeze_all(inputs[0], int_list(inputs[1]))]


@builtin_kernel("Flatten")
def _flatten(inputs, attrs, node):
    x = inputs[0]
    axis = attrs.get("axis", 1) % max(x.dim(), 1)
    return [fresh(x.reshape(int(torch.tensor(x.shape[:axis]).prod()), -1))]


def _check_count(node, attrs, name, count):
    """N / num: the count of a dynamic input or output list, which must match what the graph wires."""
    if name in attrs and attrs[name] != count:
        fail(node, f"{name}={attrs[name]} but the node has {count}")


def _concat(op_type, tensors, dim):
    dtypes = {t.dtype for t in tensors}
    if len(dtypes) > 1:
        raise TypeError(f"{op_type} needs inputs of one dtype, got {sorted(map(str, dtypes))}")
    if any(t.dim() == 0 for t in tensors) and all(t.dim() <= 1 for t in tensors):
        # Scalars concatenate as [1] each: TorchAir builds its RNG counter as ConcatV2([seed, offset])
        # of 0-d (and 1-d) tensors, which GE accepts and gives a vector.
        tensors = [t.reshape(-1) for t in tensors]
    return torch.cat(tensors, dim=dim)


@builtin_kernel("ConcatV2")
def _concat_v2(inputs, attrs, node):
    _check_count(node, attrs, "N", len(inputs) - 1)
    return [_concat(node.type, inputs[:-1], int_list(inputs[-1])[0])]


@builtin_kernel("Concat")
def _concat_v1(inputs, attrs, node):
    _check_count(node, attrs, "N", len(inputs) - 1)
    return [_concat(node.type, inputs[1:], int_list(inputs[0])[0])]


@builtin_kernel("ConcatD", "ConcatV2D")
def _concat_d(inputs, attrs, node):
    _check_count(node, attrs, "N", len(inputs))
    return [_concat(node.type, inputs, attrs["concat_dim"])]


@builtin_kernel("Pack")
def _pack(inputs, attrs, node):
    _check_count(node, attrs, "N", len(inputs))
    return [torch.stack(list(inputs), dim=attrs.get("axis", 0))]


@builtin_kernel("Unpack")
def _unpack(inputs, attrs, node):
    axis = attrs.get("axis", 0)
    if inputs[0].dim() == 0 or attrs["num"] != inputs[0].shape[axis]:
        fail(node, f"num={attrs['num']} differs from x's size along axis {axis} (shape {list(inputs[0].shape)})")
    return [t.contiguous() for t in torch.unbind(inputs[0], dim=attrs.get("axis", 0))]


@builtin_kernel("SplitV")
def _split_v(inputs, attrs, node):
    x, sizes, dim = inputs[0], int_list(inputs[1]), int_list(inputs[2])[0]
    if -1 in sizes:  # one size may be -1: whatever is left
        known = sum(s for s in sizes if s != -1)
        sizes = [x.shape[dim] - known if s == -1 else s for s in sizes]
    if attrs["num_split"] != len(sizes) or sum(sizes) != x.shape[dim]:
        fail(node, f"size_splits {sizes} must be num_split={attrs['num_split']} sizes adding up to {x.shape[dim]}")
    return [t.contiguous() for t in torch.split(x, sizes, dim=dim)]


@builtin_kernel("Split")
def _split(inputs, attrs, node):
    dim, x = int_list(inputs[0])[0], inputs[1]
    return _even_split(node, x, attrs["num_split"], dim)


@builtin_kernel("SplitD")
def _split_d(inputs, attrs, node):
    return _even_split(node, inputs[0], attrs["num_split"], attrs["split_dim"])


def _even_split(node, x, num_split, dim):
    """num_split equal parts; GE requires the dim to divide evenly (torch.chunk would not)."""
    if num_split <= 0 or x.shape[dim] % num_split:
        fail(node, f"num_split={num_split} does not divide dim {dim} of size {x.shape[dim]}")
    return [t.contiguous() for t in torch.split(x, x.shape[dim] // num_split, dim=dim)] if x.shape[dim] else \
        [x.clone() for _ in range(num_split)]


def _checked_indices(indices, size, negative_ok, op_type):
    indices = indices.long()
    if indices.numel() and (indices.max() >= size or indices.min() < (-size if negative_ok else 0)):
        raise IndexError(f"{op_type}: index out of range for a dimension of size {size}")
    return torch.where(indices < 0, indices + size, indices)


def _gather(x, indices, axis, batch_dims, negative_ok, op_type):
    if batch_dims != 0:
        raise ValueError(f"{op_type} with batch_dims={batch_dims} is not supported by the simulator")
    axis %= max(x.dim(), 1)
    indices_long = _checked_indices(indices, x.shape[axis], negative_ok, op_type)
    picked = torch.index_select(x, axis, indices_long.reshape(-1))
    shape = list(x.shape[:axis]) + list(indices.shape) + list(x.shape[axis + 1:])
    return picked.reshape(shape).contiguous()


@builtin_kernel("GatherV2", unread_attrs={
    "is_preprocessed": "marks indices pre-processed for the NPU kernel's tiling; the gathered values are the same"})
def _gather_v2(inputs, attrs, node):
    x, indices, axis = inputs[0], inputs[1], int_list(inputs[2])[0]
    return [_gather(x, indices, axis, attrs.get("batch_dims", 0), attrs.get("negative_index_support", False), node.type)]


@builtin_kernel("GatherV2D")
def _gather_v2_d(inputs, attrs, node):
    return [_gather(inputs[0], inputs[1], attrs["axis"], 0, False, node.type)]


@builtin_kernel("Gather", unread_attrs={
    "validate_indices": "an out-of-range index is always refused (unvalidated, the NPU's result is undefined)",
    "is_preprocessed": "marks indices pre-processed for the NPU kernel's tiling; the gathered values are the same"})
def _gather_v1(inputs, attrs, node):
    x, indices = inputs
    return [_gather(x, indices, 0, attrs.get("batch_dims", 0), attrs.get("negative_index_support", False), node.type)]


@builtin_kernel("GatherElements")
def _gather_elements(inputs, attrs, node):
    return [torch.gather(inputs[0], attrs.get("dim", 0), inputs[1].long())]


@builtin_kernel("GatherNd")
def _gather_nd(inputs, attrs, node):
    x, indices = inputs[0], inputs[1].long()
    depth = indices.shape[-1]
    flat = torch.stack([_checked_indices(indices[..., i].reshape(-1), x.shape[i],
                                         attrs.get("negative_index_support", False), node.type)
                        for i in range(depth)], dim=1) if depth else indices.reshape(-1, 0)
    picked = x[tuple(flat[:, i] for i in range(depth))]
    return [picked.reshape(list(indices.shape[:-1]) + list(x.shape[depth:])).contiguous()]


@builtin_kernel("Fill")
def _fill(inputs, attrs, node):
    dims, value = int_list(inputs[0]), inputs[1]
    return [torch.full(dims, value.item(), dtype=value.dtype)]


@builtin_kernel("FillD")
def _fill_d(inputs, attrs, node):
    value = inputs[0]
    return [value.reshape(()).expand(attrs["dims"]).clone()]


@builtin_kernel("BroadcastTo", "Expand")
def _broadcast_to(inputs, attrs, node):
    x, shape = inputs[0], int_list(inputs[1])
    # -1 keeps the input's size (torch.expand semantics; GE accepts it as well).
    return [x.expand(shape).contiguous()]


@builtin_kernel("Tile")
def _tile(inputs, attrs, node):
    return [inputs[0].repeat(int_list(inputs[1]))]


@builtin_kernel("Slice")
def _slice(inputs, attrs, node):
    x, offsets, sizes = inputs[0], int_list(inputs[1]), int_list(inputs[2])
    index = []
    for dim, (offset, size) in enumerate(zip(offsets, sizes)):
        end = x.shape[dim] if size == -1 else offset + size
        index.append(slice(offset, end))
    return [x[tuple(index)].contiguous()]


def _strided_slice(x, begin, end, axes, strides, attrs, op_type):
    masks = {name: attrs.get(name, 0) for name in ("begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask", "shrink_axis_mask")}
    if any(masks.values()):
        raise ValueError(f"{op_type} with masks {masks} is not supported by the simulator")
    axes = list(range(len(begin))) if axes is None else axes
    strides = [1] * len(begin) if strides is None else strides
    index = [slice(None)] * x.dim()
    for axis, start, stop, step in zip(axes, begin, end, strides):
        if step <= 0:
            raise ValueError(f"{op_type} with stride {step} is not supported by the simulator")
        size = x.shape[axis]
        stop = min(stop, size) if stop < _INT64_MAX else size  # torch clamps like GE
        index[axis % x.dim()] = slice(start, stop, step)
    return x[tuple(index)].contiguous()


@builtin_kernel("StridedSliceV2")
def _strided_slice_v2(inputs, attrs, node):
    x, begin, end = inputs[0], int_list(inputs[1]), int_list(inputs[2])
    axes = int_list(inputs[3]) if len(inputs) > 3 and inputs[3] is not None else None
    strides = int_list(inputs[4]) if len(inputs) > 4 and inputs[4] is not None else None
    return [_strided_slice(x, begin, end, axes, strides, attrs, node.type)]


@builtin_kernel("StridedSlice")
def _strided_slice_v1(inputs, attrs, node):
    x, begin, end, strides = inputs[0], int_list(inputs[1]), int_list(inputs[2]), int_list(inputs[3])
    return [_strided_slice(x, begin, end, None, strides, attrs, node.type)]


@builtin_kernel("Bitcast")
def _bitcast(inputs, attrs, node):
    """Reinterpret x's bytes as `type`. Sizes differing by a ratio r: keep_dim=False follows TF's Bitcast
    (a narrower type appends a dim of r, a wider one consumes a last dim that must be r);
    keep_dim=True keeps the rank and scales the last dim by r."""
    x = inputs[0].contiguous()
    dtype = ge_dtype_to_torch(attrs["type"], where="Bitcast type: ")
    source, target = x.element_size(), torch.empty((), dtype=dtype).element_size()
    if source == target or attrs.get("keep_dim", False):
        if x.dim() == 0 and source != target:
            fail(node, "keep_dim cannot rescale the last dim of a 0-d tensor")
        return [x.view(dtype).clone()]
    if source > target:
        return [x.unsqueeze(-1).view(dtype).clone()]
    if x.dim() == 0 or x.shape[-1] != target // source:
        fail(node, f"x of shape {list(x.shape)} must end in a dim of {target // source} to bitcast to {dtype}")
    return [x.view(dtype).squeeze(-1).clone()]


@builtin_kernel("OneHot")
def _one_hot(inputs, attrs, node):
    indices, depth, on_value, off_value = inputs
    axis = attrs.get("axis", -1)
    hot = torch.nn.functional.one_hot(indices.long(), int_list(depth)[0]).bool()
    if axis != -1:
        hot = hot.movedim(-1, axis)
    return [torch.where(hot, on_value, off_value)]


@builtin_kernel("Range")
def _range(inputs, attrs, node):
    start, limit, delta = inputs
    dtype = start.dtype
    values = [t.item() for t in (start, limit, delta)]
    count = max(0, math.ceil((values[1] - values[0]) / values[2]))
    return [(values[0] + torch.arange(count, dtype=torch.float64) * values[2]).to(dtype)
            if dtype.is_floating_point else torch.arange(*values, dtype=dtype)]

"""Index-driven GE ops: IndexByTensor (advanced indexing), ScatterElements, InplaceIndexAdd, EmbeddingBag.

Each is written from its CANN prototype (``REG_OP`` in TorchAir's ``auto_generated_ge_raw_ops.py``)
and from how TorchAir's converters feed it (``ge_converter/aten/index.py``, ``_unsafe_index.py``,
``scatter.py``, ``scatter_add.py``, ``slice_scatter.py``, ``select_scatter.py``, ``index_add.py``,
``_embedding_bag.py``). An index outside its dimension is an error naming the node, as on the NPU
(where it is an AI-core exception), never a silent wrap or clamp.

16-bit float reductions (scatter add/mul, index add, bag sums) accumulate in float32 and round once.
"""
from __future__ import annotations

import torch

from .common import check_dtype, fail, opmath
from ..registry import builtin_kernel

_INDEX_DTYPES = (torch.int32, torch.int64)
_FLOAT16S = (torch.float16, torch.bfloat16)


def _in_range(node, what, indices, size):
    """indices as int64 in [0, size), negative ones counted from the end (both GE and aten accept them)."""
    indices = indices.long()
    if indices.numel() and (int(indices.max()) >= size or int(indices.min()) < -size):
        fail(node, f"{what} holds an index outside [-{size}, {size})")
    return torch.where(indices < 0, indices + size, indices)


# ---- IndexByTensor ---------------------------------------------------------------------------

@builtin_kernel("IndexByTensor")
def _index_by_tensor(inputs, attrs, node):
    """y = x[i0, :, i2, ...]: `indices_mask[d]` is 1 when dim d is indexed by the next index tensor,
    0 when it is taken whole; dims past the mask are taken whole. The index tensors broadcast together
    and place their dims as aten.index does (in place of the indexed dims when those are adjacent,
    first otherwise). An empty mask means the indices apply to the leading dims."""
    x, indices = inputs[0], [t for t in inputs[1:]]
    if any(t is None for t in indices):
        fail(node, "an index input is unfed")
    for i, index in enumerate(indices):
        check_dtype(node, f"indices[{i}]", index, (torch.int64,))
    mask = list(attrs.get("indices_mask", []) or [1] * len(indices))
    if sum(1 for m in mask if m) != len(indices) or any(m not in (0, 1) for m in mask):
        fail(node, f"indices_mask {mask} does not match {len(indices)} index inputs")
    if len(mask) > max(x.dim(), 1):
        fail(node, f"indices_mask {mask} is longer than x's rank {x.dim()}")
    pending = iter(indices)
    full = []
    for dim, marked in enumerate(mask):
        full.append(_in_range(node, f"indices for dim {dim}", next(pending), x.shape[dim]) if marked else None)
    try:
        return [torch.ops.aten.index.Tensor(x, full).contiguous()]
    except (IndexError, RuntimeError) as error:  # shapes that do not broadcast
        fail(node, f"indices do not broadcast together: {error}")


# ---- ScatterElements -------------------------------------------------------------------------

# GE reduction -> torch.scatter_reduce's name (the self value takes part, as in ONNX ScatterElements)
_SCATTER_REDUCE = {"add": "sum", "mul": "prod", "max": "amax", "min": "amin"}


@builtin_kernel("ScatterElements")
def _scatter_elements(inputs, attrs, node):
    """y = data; y[..., indices[i, j, ...], ...] (along `axis`) = updates[i, j, ...], or combined with
    `reduction` add / mul / max / min (ONNX ScatterElements, which CANN follows). With reduction
    "none" and repeated indices the NPU's pick is unspecified; here the last write wins as torch does."""
    data, indices, updates = inputs
    check_dtype(node, "indices", indices, _INDEX_DTYPES)
    if updates.dtype != data.dtype:
        fail(node, f"updates dtype {updates.dtype} differs from data dtype {data.dtype}")
    if indices.dim() != data.dim() or updates.dim() != data.dim():
        fail(node, f"indices {list(indices.shape)} and updates {list(updates.shape)} must have data's rank {data.dim()}")
    if any(i > u for i, u in zip(indices.shape, updates.shape)):
        fail(node, f"indices {list(indices.shape)} exceed updates {list(updates.shape)} in some dim")
    # updates may be larger than indices (TorchAir's scatter_add declares such a case): only the
    # leading indices-shaped block of updates is scattered, as aten.scatter does.
    updates = updates[tuple(slice(0, n) for n in indices.shape)]
    rank = max(data.dim(), 1)
    axis = attrs.get("axis", 0)
    if not -rank <= axis < rank:
        fail(node, f"axis {axis} is out of range for rank {data.dim()}")
    axis %= rank
    for dim in range(data.dim()):
        if dim != axis and indices.shape[dim] > data.shape[dim]:
            fail(node, f"indices dim {dim} ({indices.shape[dim]}) exceeds data's ({data.shape[dim]})")
    index = _in_range(node, "indices", indices, data.shape[axis] if data.dim() else 1)
    reduction = attrs.get("reduction", "none")
    if reduction == "none":
        return [data.scatter(axis, index, updates)]
    if reduction not in _SCATTER_REDUCE:
        fail(node, f"reduction {reduction!r} is not one of none, add, mul, max, min")
    wide = opmath(data)
    y = wide.scatter_reduce(axis, index, opmath(updates), _SCATTER_REDUCE[reduction], include_self=True)
    return [y.to(data.dtype)]


# ---- InplaceIndexAdd -------------------------------------------------------------------------

_INDEX_ADD_DTYPES = (torch.int16, torch.int32, torch.int8, torch.uint8, torch.float32, torch.float16,
                     torch.float64, torch.int64, torch.bool)


@builtin_kernel("InplaceIndexAdd")
def _inplace_index_add(inputs, attrs, node):
    """var[..., indices[i], ...] += alpha * updates[..., i, ...] along `axis` (aten.index_add)."""
    var, indices, updates = inputs[:3]
    alpha = inputs[3] if len(inputs) > 3 else None
    check_dtype(node, "var", var, _INDEX_ADD_DTYPES)
    check_dtype(node, "indices", indices, _INDEX_DTYPES)
    if updates.dtype != var.dtype or (alpha is not None and alpha.dtype != var.dtype):
        fail(node, f"updates ({updates.dtype}) and alpha must have var's dtype {var.dtype}")
    if indices.dim() != 1:
        fail(node, f"indices must be 1-D, got shape {list(indices.shape)}")
    rank = max(var.dim(), 1)
    axis = attrs["axis"]
    if not -rank <= axis < rank:
        fail(node, f"axis {axis} is out of range for rank {var.dim()}")
    axis %= rank
    expected = list(var.shape)
    if var.dim():
        expected[axis] = indices.shape[0]
    if list(updates.shape) != expected:
        fail(node, f"updates shape {list(updates.shape)} must be {expected} (var's, with indices' length at axis)")
    index = _in_range(node, "indices", indices, var.shape[axis] if var.dim() else 1)
    if var.dtype == torch.bool:
        scaled = updates if alpha is None else updates & alpha.reshape(())
        return [var.index_add(axis, index, scaled)]
    wide = opmath(updates)
    if alpha is not None:
        wide = wide * opmath(alpha).reshape(())
    return [opmath(var).index_add(axis, index, wide).to(var.dtype)]


# ---- EmbeddingBag ----------------------------------------------------------------------------

_BAG_MODES = {"sum": 0, "mean": 1, "max": 2}


@builtin_kernel("EmbeddingBag", unread_attrs={
    "scale_grad_by_freq": "scales the weight gradient only (EmbeddingBagDenseGrad); the forward is the same",
    "sparse": "selects a sparse weight gradient only; the forward is the same"})
def _embedding_bag(inputs, attrs, node):
    """Per bag (indices[offsets[b]:offsets[b+1]]), the sum / mean / max of weight rows, optionally
    weighted (sum only); outputs y, offset2bag, bag_size, max_indices as aten._embedding_bag defines
    them (CANN's aclnnEmbeddingBag follows aten). Rows at padding_idx are skipped (-1: none)."""
    weight, indices = inputs[0], inputs[1]
    offsets = inputs[2] if len(inputs) > 2 else None
    per_sample_weights = inputs[3] if len(inputs) > 3 else None
    check_dtype(node, "weight", weight, (torch.float16, torch.float32))
    check_dtype(node, "indices", indices, _INDEX_DTYPES)
    mode = attrs.get("mode", "mean")
    if mode not in _BAG_MODES:
        fail(node, f"mode {mode!r} is not one of sum, mean, max")
    if per_sample_weights is not None and mode != "sum":
        fail(node, f"per_sample_weights are only defined for mode 'sum', not {mode!r}")
    include_last_offset = attrs.get("include_last_offset", False)
    if offsets is None:  # 2-D indices: one bag per row
        if indices.dim() != 2:
            fail(node, f"without offsets, indices must be 2-D, got shape {list(indices.shape)}")
        offsets = torch.arange(0, indices.numel(), max(indices.shape[1], 1), dtype=indices.dtype)
        indices = indices.reshape(-1)
        if include_last_offset:
            offsets = torch.cat([offsets, offsets.new_tensor([indices.numel()])])
        if per_sample_weights is not None:
            per_sample_weights = per_sample_weights.reshape(-1)
    elif indices.dim() != 1 or offsets.dim() != 1:
        fail(node, f"indices and offsets must be 1-D, got {list(indices.shape)} and {list(offsets.shape)}")
    check_dtype(node, "offsets", offsets, _INDEX_DTYPES)
    _in_range(node, "indices", indices, weight.shape[0])
    padding_idx = attrs.get("padding_idx", -1)
    if padding_idx < -1 or padding_idx >= weight.shape[0]:  # aten takes it already made non-negative
        fail(node, f"padding_idx {padding_idx} is outside [-1, {weight.shape[0]})")
    wide_weights = None if per_sample_weights is None else opmath(per_sample_weights)
    y, offset2bag, bag_size, max_indices = torch.ops.aten._embedding_bag(
        opmath(weight), indices, offsets.to(indices.dtype), False, _BAG_MODES[mode], False, wide_weights,
        include_last_offset, padding_idx)
    return [y.to(weight.dtype), offset2bag, bag_size, max_indices]

"""Index-driven GE ops: Gather, GatherV2, GatherV2D, GatherElements, GatherNd (read at indices),
IndexByTensor (advanced indexing), ScatterElements, InplaceIndexAdd (write at indices), ReverseV2,
OneHot, EmbeddingBag.

Each is written from its CANN prototype (``REG_OP`` in TorchAir's ``auto_generated_ge_raw_ops.py``;
hicann ops-nn files them in ``index/``, except OneHot, in ops-math ``math/``) and from how TorchAir's
converters feed it (``ge_converter/aten/gather.py``, ``index_select.py``, ``index.py``,
``_unsafe_index.py``, ``scatter.py``, ``scatter_add.py``, ``slice_scatter.py``, ``select_scatter.py``,
``index_add.py``, ``flip.py``, ``_embedding_bag.py``). An index outside its dimension is refused,
as on the NPU (where it is an
AI-core exception), never a silent wrap or clamp.

16-bit float reductions (scatter add/mul, index add, bag sums) accumulate in float32 and round once.
"""
from __future__ import annotations

import torch
from ...registry import ge_kernel, refuse
from ..common import int_list, opmath, require_dtype

_INDEX_DTYPES = (torch.int32, torch.int64)


def _in_range(what, indices, size):
    """indices as int64 in [0, size), negative ones counted from the end (both GE and aten accept them)."""
    indices = indices.long()
    if indices.numel() and (int(indices.max()) >= size or int(indices.min()) < -size):
        refuse(f"{what} holds an index outside [-{size}, {size})")
    return torch.where(indices < 0, indices + size, indices)


# ---- Gather ----------------------------------------------------------------------------------

def _checked_indices(indices, size, negative_ok):
    indices = indices.long()
    if not indices.numel():
        return indices
    low, high = (int(v) for v in torch.aminmax(indices))  # one pass over the indices, not two
    if high >= size or low < (-size if negative_ok else 0):
        refuse(f"index out of range for a dimension of size {size}")
    return torch.where(indices < 0, indices + size, indices) if low < 0 else indices


def _gather(x, indices, axis, batch_dims, negative_ok):
    if batch_dims != 0:
        refuse(f"batch_dims={batch_dims} is not supported by the simulator")
    axis %= max(x.dim(), 1)
    indices_long = _checked_indices(indices, x.shape[axis], negative_ok)
    picked = torch.index_select(x, axis, indices_long.reshape(-1))
    shape = list(x.shape[:axis]) + list(indices.shape) + list(x.shape[axis + 1:])
    return picked.reshape(shape).contiguous()


_PREPROCESSED = "marks indices pre-processed for the NPU kernel's tiling; the gathered values are the same"


@ge_kernel("GatherV2", layout_only={"is_preprocessed": _PREPROCESSED}, prepared=True)
def gather_v2(x, indices, axis, *, batch_dims, negative_index_support):
    """A fixed axis is read once; the indices' range is checked on every call (it depends on values):
    by index_select, which refuses an index outside [0, size), and where it refuses (a negative index
    or one out of range) by `_gather`, which wraps what GE allows and refuses the rest."""
    if batch_dims != 0:
        refuse(f"batch_dims={batch_dims} is not supported by the simulator")
    if axis.value is None:
        return lambda x, indices, axis: _gather(x, indices, int_list(axis)[0], 0, negative_index_support)
    dim = int_list(axis.value)[0] % max(x.dim(), 1)
    select = torch.index_select
    shape = list(x.shape[:dim]) + list(indices.shape) + list(x.shape[dim + 1:])

    def call(x, indices, axis):
        try:
            picked = select(x, dim, indices.reshape(-1))
        except (IndexError, RuntimeError):
            return _gather(x, indices, dim, 0, negative_index_support)
        return picked.reshape(shape).contiguous()

    return call


@ge_kernel("GatherV2D")
def gather_v2_d(x, indices, *, axis):
    return _gather(x, indices, axis, 0, False)


@ge_kernel("Gather", layout_only={
    "validate_indices": "an out-of-range index is always refused (unvalidated, the NPU's result is undefined)",
    "is_preprocessed": _PREPROCESSED})
def gather(x, indices, *, batch_dims, negative_index_support):
    return _gather(x, indices, 0, batch_dims, negative_index_support)


@ge_kernel("GatherElements", prepared=True)
def gather_elements(x, index, *, dim):
    gather = torch.gather
    if index.dtype == torch.int64:
        return lambda x, index: gather(x, dim, index)
    return lambda x, index: gather(x, dim, index.long())


@ge_kernel("GatherNd")
def gather_nd(x, indices, *, negative_index_support):
    indices = indices.long()
    depth = indices.shape[-1]
    flat = torch.stack([_checked_indices(indices[..., i].reshape(-1), x.shape[i], negative_index_support)
                        for i in range(depth)], dim=1) if depth else indices.reshape(-1, 0)
    picked = x[tuple(flat[:, i] for i in range(depth))]
    return picked.reshape(list(indices.shape[:-1]) + list(x.shape[depth:])).contiguous()


# ---- IndexByTensor ---------------------------------------------------------------------------

@ge_kernel("IndexByTensor", prepared=True)
def index_by_tensor(x, indices, *, indices_mask):
    """y = x[i0, :, i2, ...]: `indices_mask[d]` is 1 when dim d is indexed by the next index tensor,
    0 when it is taken whole; dims past the mask are taken whole. The index tensors broadcast together
    and place their dims as aten.index does (in place of the indexed dims when those are adjacent,
    first otherwise). An empty mask means the indices apply to the leading dims. The indices' range is
    checked on every call: by aten.index (which wraps negative indices as GE does and refuses the rest),
    and where it refuses, by `_index_by_tensor`, for the kernel's own error."""
    if any(t is None for t in indices):
        refuse("an index input is unfed")
    for i, index in enumerate(indices):
        require_dtype(f"indices[{i}]", index, (torch.int64,))
    mask = list(indices_mask or [1] * len(indices))
    if sum(1 for m in mask if m) != len(indices) or any(m not in (0, 1) for m in mask):
        refuse(f"indices_mask {mask} does not match {len(indices)} index inputs")
    if len(mask) > max(x.dim(), 1):
        refuse(f"indices_mask {mask} is longer than x's rank {x.dim()}")
    index = torch.ops.aten.index.Tensor

    def call(x, indices):
        pending = iter(indices)
        try:
            return index(x, [next(pending) if marked else None for marked in mask]).contiguous()
        except (IndexError, RuntimeError):
            return _index_by_tensor(x, indices, mask)

    return call


def _index_by_tensor(x, indices, mask):
    pending = iter(indices)
    full = []
    for dim, marked in enumerate(mask):
        full.append(_in_range(f"indices for dim {dim}", next(pending), x.shape[dim]) if marked else None)
    try:
        return torch.ops.aten.index.Tensor(x, full).contiguous()
    except (IndexError, RuntimeError) as error:  # shapes that do not broadcast
        refuse(f"indices do not broadcast together: {error}")


# ---- ScatterElements -------------------------------------------------------------------------

# GE reduction -> torch.scatter_reduce's name (the self value takes part, as in ONNX ScatterElements)
_SCATTER_REDUCE = {"add": "sum", "mul": "prod", "max": "amax", "min": "amin"}


@ge_kernel("ScatterElements", one_dtype=("data", "updates"), accepts={"indices": _INDEX_DTYPES})
def scatter_elements(data, indices, updates, *, axis, reduction):
    """y = data; y[..., indices[i, j, ...], ...] (along `axis`) = updates[i, j, ...], or combined with
    `reduction` add / mul / max / min (ONNX ScatterElements, which CANN follows). With reduction
    "none" and repeated indices the NPU's pick is unspecified; here the last write wins as torch does."""
    if indices.dim() != data.dim() or updates.dim() != data.dim():
        refuse(f"indices {list(indices.shape)} and updates {list(updates.shape)} must have data's rank {data.dim()}")
    if any(i > u for i, u in zip(indices.shape, updates.shape, strict=True)):
        refuse(f"indices {list(indices.shape)} exceed updates {list(updates.shape)} in some dim")
    # updates may be larger than indices (TorchAir's scatter_add declares such a case): only the
    # leading indices-shaped block of updates is scattered, as aten.scatter does.
    updates = updates[tuple(slice(0, n) for n in indices.shape)]
    rank = max(data.dim(), 1)
    if not -rank <= axis < rank:
        refuse(f"axis {axis} is out of range for rank {data.dim()}")
    axis %= rank
    for dim in range(data.dim()):
        if dim != axis and indices.shape[dim] > data.shape[dim]:
            refuse(f"indices dim {dim} ({indices.shape[dim]}) exceeds data's ({data.shape[dim]})")
    index = _in_range("indices", indices, data.shape[axis] if data.dim() else 1)
    if reduction == "none":
        return data.scatter(axis, index, updates)
    if reduction not in _SCATTER_REDUCE:
        refuse(f"reduction {reduction!r} is not one of none, add, mul, max, min")
    wide = opmath(data)
    y = wide.scatter_reduce(axis, index, opmath(updates), _SCATTER_REDUCE[reduction], include_self=True)
    return y.to(data.dtype)


# ---- InplaceIndexAdd -------------------------------------------------------------------------

_INDEX_ADD_DTYPES = (torch.int16, torch.int32, torch.int8, torch.uint8, torch.float32, torch.float16,
                     torch.float64, torch.int64, torch.bool)


@ge_kernel("InplaceIndexAdd", one_dtype=("var", "updates", "alpha"),
           accepts={"var": _INDEX_ADD_DTYPES, "indices": _INDEX_DTYPES})
def inplace_index_add(var, indices, updates, alpha, *, axis):
    """var[..., indices[i], ...] += alpha * updates[..., i, ...] along `axis` (aten.index_add)."""
    if indices.dim() != 1:
        refuse(f"indices must be 1-D, got shape {list(indices.shape)}")
    rank = max(var.dim(), 1)
    if not -rank <= axis < rank:
        refuse(f"axis {axis} is out of range for rank {var.dim()}")
    axis %= rank
    expected = list(var.shape)
    if var.dim():
        expected[axis] = indices.shape[0]
    if list(updates.shape) != expected:
        refuse(f"updates shape {list(updates.shape)} must be {expected} (var's, with indices' length at axis)")
    index = _in_range("indices", indices, var.shape[axis] if var.dim() else 1)
    if var.dtype == torch.bool:
        scaled = updates if alpha is None else updates & alpha.reshape(())
        return var.index_add(axis, index, scaled)
    wide = opmath(updates)
    if alpha is not None:
        wide = wide * opmath(alpha).reshape(())
    return opmath(var).index_add(axis, index, wide).to(var.dtype)


# ---- ReverseV2 -------------------------------------------------------------------------------

def _dim(what, axis, rank):
    if not -max(rank, 1) <= axis < max(rank, 1):
        refuse(f"{what} {axis} is out of range for rank {rank}")
    return axis % max(rank, 1)


_REVERSE_DTYPES = (torch.int8, torch.uint8, torch.int16, torch.uint16, torch.int32, torch.int64, torch.bool,
                   torch.float16, torch.float32, torch.float64, torch.complex64, torch.complex128)


@ge_kernel("ReverseV2", accepts={"x": _REVERSE_DTYPES, "axis": (torch.int32, torch.int64)})
def reverse_v2(x, axis):
    """Reverse x along each dim listed in `axis` (an int tensor; negative counts from the end)."""
    dims = [_dim("axis", a, x.dim()) for a in int_list(axis)]
    if len(set(dims)) != len(dims):
        refuse(f"axis {int_list(axis)} names a dim twice")
    return torch.flip(x, dims) if dims and x.dim() else x.clone()



# ---- OneHot ----------------------------------------------------------------------------------

@ge_kernel("OneHot")
def one_hot(x, depth, on_value, off_value, *, axis):
    """on_value where x (the indices) names the position along a new dim of size `depth` placed at
    `axis` (-1: last), off_value elsewhere."""
    hot = torch.nn.functional.one_hot(x.long(), int_list(depth)[0]).bool()
    if axis != -1:
        hot = hot.movedim(-1, axis)
    return torch.where(hot, on_value, off_value)


# ---- EmbeddingBag ----------------------------------------------------------------------------

_BAG_MODES = {"sum": 0, "mean": 1, "max": 2}


@ge_kernel("EmbeddingBag", accepts={"weight": (torch.float16, torch.float32), "indices": _INDEX_DTYPES}, layout_only={
    "scale_grad_by_freq": "scales the weight gradient only (EmbeddingBagDenseGrad); the forward is the same",
    "sparse": "selects a sparse weight gradient only; the forward is the same"})
def embedding_bag(weight, indices, offsets, per_sample_weights, *, mode, include_last_offset, padding_idx):
    """Per bag (indices[offsets[b]:offsets[b+1]]), the sum / mean / max of weight rows, optionally
    weighted (sum only); outputs y, offset2bag, bag_size, max_indices as aten._embedding_bag defines
    them (CANN's aclnnEmbeddingBag follows aten). Rows at padding_idx are skipped (-1: none)."""
    if mode not in _BAG_MODES:
        refuse(f"mode {mode!r} is not one of sum, mean, max")
    if per_sample_weights is not None and mode != "sum":
        refuse(f"per_sample_weights are only defined for mode 'sum', not {mode!r}")
    if offsets is None:  # 2-D indices: one bag per row
        if indices.dim() != 2:
            refuse(f"without offsets, indices must be 2-D, got shape {list(indices.shape)}")
        offsets = torch.arange(0, indices.numel(), max(indices.shape[1], 1), dtype=indices.dtype)
        indices = indices.reshape(-1)
        if include_last_offset:
            offsets = torch.cat([offsets, offsets.new_tensor([indices.numel()])])
        if per_sample_weights is not None:
            per_sample_weights = per_sample_weights.reshape(-1)
    elif indices.dim() != 1 or offsets.dim() != 1:
        refuse(f"indices and offsets must be 1-D, got {list(indices.shape)} and {list(offsets.shape)}")
    require_dtype("offsets", offsets, _INDEX_DTYPES)
    _in_range("indices", indices, weight.shape[0])
    if padding_idx < -1 or padding_idx >= weight.shape[0]:  # aten takes it already made non-negative
        refuse(f"padding_idx {padding_idx} is outside [-1, {weight.shape[0]})")
    wide_weights = None if per_sample_weights is None else opmath(per_sample_weights)
    y, offset2bag, bag_size, max_indices = torch.ops.aten._embedding_bag(
        opmath(weight), indices, offsets.to(indices.dtype), False, _BAG_MODES[mode], False, wide_weights,
        include_last_offset, padding_idx)
    return y.to(weight.dtype), offset2bag, bag_size, max_indices

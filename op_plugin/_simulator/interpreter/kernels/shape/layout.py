"""GE ops that change how a tensor's elements are laid out, not their values: shape queries (Shape,
ShapeN, Size, Rank), reshapes (Reshape, Squeeze, Unsqueeze, ExpandDims, Flatten, FlattenV2, Bitcast),
reorders (Transpose, TransposeD, Permute), joins and splits along an axis (Concat, ConcatD,
ConcatV2, ConcatV2D, Pack, Unpack, Split, SplitD, SplitV), repeats (Tile, BroadcastTo, Expand) and
masks (Tril, Triu).

Semantics from the CANN prototypes (``REG_OP`` in TorchAir's ``auto_generated_ge_raw_ops.py``; hicann
ops-math files most of these ops in ``conversion/``, Shape, ShapeN, Rank, Tile and Expand in ``math/``)
and the converters that emit them (``ge_converter/aten/tril.py``, ``triu.py``, ``_fft_c2c.py``,
``convolution_backward.py``).
Windows into a tensor (slices, strided views, Assign) are in `slice`, new tensors from a shape,
a value or a range in `creation` (split by sub-concept: one module would pass 400 lines).
`N` and `num` / `num_split` count a dynamic input or output list, and must match what the graph wires.

Index-like inputs (perm, shape, axes...) arrive as small int tensors (usually Const nodes);
`common.int_list` turns them into Python ints. Every result is contiguous and, as a GE op writes into
its own output buffer, a fresh tensor, except that reshape-like ops return views while the plan runs a
graph in which no node writes into an input (`common.fresh`), and that a Transpose read only by kernels
declaring `strided_inputs` returns a strided view (its `strided_view` form, chosen by the executor).
"""
from __future__ import annotations

import torch
from ....._ge.values import ge_dtype_to_torch
from ...registry import ge_kernel, refuse
from ..common import VIEWS_ALLOWED, fresh, int_list
from ...lowbit_formats import bitcast_fp4
from ...lowbit_formats import pack_int4, unpack_int4


def _axis(what, axis, rank):
    if not -max(rank, 1) <= axis < max(rank, 1):
        refuse(f"{what} {axis} is out of range for rank {rank}")
    return axis % max(rank, 1)


# ---- shape queries ---------------------------------------------------------------------------

@ge_kernel("Shape")
def shape(x, *, dtype):
    return torch.tensor(list(x.shape), dtype=ge_dtype_to_torch(dtype))


@ge_kernel("ShapeN")
def shape_n(x, *, dtype):
    out_dtype = ge_dtype_to_torch(dtype)
    return tuple(torch.tensor(list(t.shape), dtype=out_dtype) for t in x)


@ge_kernel("Size")
def size(x, *, dtype):
    return torch.tensor(x.numel(), dtype=ge_dtype_to_torch(dtype))


@ge_kernel("Rank")
def rank(x):
    return torch.tensor(x.dim(), dtype=torch.int32)


# ---- reshapes --------------------------------------------------------------------------------

def _target_shape(x_shape, shape, axis, num_axes):
    shape = int_list(shape)
    if axis != 0 or num_axes != -1:
        # Reshape of a sub-range of dims [axis, axis + num_axes).
        begin = axis % (len(x_shape) + 1)
        end = len(x_shape) if num_axes == -1 else begin + num_axes
        shape = list(x_shape[:begin]) + shape + list(x_shape[end:])
    return shape


@ge_kernel("Reshape", prepared=True, strided_inputs=("x",))
def reshape(x, shape, *, axis, num_axes):
    """A fixed target shape is worked out once. Any layout of x gives a dense result (reshape, then a copy
    where the reshape is a view of a strided x): `strided_inputs`."""
    if shape.value is not None:
        dims = _target_shape(x.shape, shape.value, axis, num_axes)
        if x.dtype != torch.int4:  # `fresh` of the reshape; VIEWS_ALLOWED is fixed for the plan preparing it
            if VIEWS_ALLOWED.get():
                return lambda x, shape: x.reshape(dims).contiguous()
            return lambda x, shape: x.reshape(dims).clone(memory_format=torch.contiguous_format)
        return lambda x, shape: fresh(x.reshape(dims))
    return lambda x, shape: fresh(x.reshape(_target_shape(x.shape, shape, axis, num_axes)))


@ge_kernel("Squeeze")
def squeeze(x, *, axis):
    if not axis:
        return fresh(x.squeeze())
    for a in axis:
        if x.shape[a] != 1:
            refuse(f"axis {a} has size {x.shape[a]}, not 1 (shape {list(x.shape)})")
    return fresh(x.squeeze(tuple(axis)))


def _unsqueeze_all(x, axes):
    rank = x.dim() + len(axes)
    positions = sorted(a % rank for a in axes)
    shape = list(x.shape)
    for position in positions:
        shape.insert(position, 1)
    return fresh(x.reshape(shape))


@ge_kernel("Unsqueeze")
def unsqueeze(x, *, axes):
    return _unsqueeze_all(x, axes)


@ge_kernel("ExpandDims")
def expand_dims(x, axis):
    return _unsqueeze_all(x, int_list(axis))


@ge_kernel("Flatten")
def flatten(x, *, axis):
    axis = axis % max(x.dim(), 1)
    return fresh(x.reshape(int(torch.tensor(x.shape[:axis]).prod()), -1))


_FLATTEN_DTYPES = (torch.float16, torch.float32, torch.int8, torch.uint8, torch.int16, torch.uint16, torch.int32,
                   torch.uint32, torch.int64, torch.uint64)


@ge_kernel("FlattenV2", accepts={"x": _FLATTEN_DTYPES})
def flatten_v2(x, *, axis, end_axis):
    """Merge dims axis..end_axis (inclusive; negative counts from the end) into one."""
    first = _axis("axis", axis, x.dim())
    last = _axis("end_axis", end_axis, x.dim())
    if last < first:
        refuse(f"end_axis {end_axis} comes before axis {axis}")
    return x.flatten(first, last).contiguous() if x.dim() else x.reshape(1)


@ge_kernel("Bitcast")
def bitcast(x, *, type, keep_dim):
    """Reinterpret x's bytes as `type`. Sizes differing by a ratio r: keep_dim=False follows TF's Bitcast
    (a narrower type appends a dim of r, a wider one consumes a last dim that must be r);
    keep_dim=True keeps the rank and scales the last dim by r."""
    x = x.contiguous()
    dtype = ge_dtype_to_torch(type, where="Bitcast type: ")
    if torch.float4_e2m1fn_x2 in (x.dtype, dtype):   # DT_FLOAT4_E2M1 is held one code per byte; GE's bytes hold two
        return bitcast_fp4(x, dtype, keep_dim)
    if x.dtype == torch.int4:   # DT_INT4 is held one value per byte; GE's bytes hold two
        return pack_int4(x, dtype, keep_dim)
    if dtype == torch.int4:
        return unpack_int4(x, keep_dim)
    source, target = x.element_size(), torch.empty((), dtype=dtype).element_size()
    if source == target or keep_dim:
        if x.dim() == 0 and source != target:
            refuse("keep_dim cannot rescale the last dim of a 0-d tensor")
        return x.view(dtype).clone()
    if source > target:
        return x.unsqueeze(-1).view(dtype).clone()
    if x.dim() == 0 or x.shape[-1] != target // source:
        refuse(f"x of shape {list(x.shape)} must end in a dim of {target // source} to bitcast to {dtype}")
    return x.view(dtype).squeeze(-1).clone()


# ---- reorders --------------------------------------------------------------------------------

# Their strided-view forms run where the executor has proven that only kernels declaring the input
# `strided_inputs` read the result (executor/strided.py): no copy, the reader lays the values out itself.

def _transpose_view(x, perm):
    if perm.value is not None:
        dims = int_list(perm.value)
        return lambda x, perm: x.permute(dims)
    return lambda x, perm: x.permute(int_list(perm))


def _transpose_d_view(x, *, perm):
    return x.permute(perm)


@ge_kernel("Transpose", prepared=True, strided_inputs=("x",), strided_view=_transpose_view)
def transpose(x, perm):
    if perm.value is not None:
        dims = int_list(perm.value)
        return lambda x, perm: x.permute(dims).contiguous()
    return lambda x, perm: x.permute(int_list(perm)).contiguous()


@ge_kernel("TransposeD", strided_inputs=("x",), strided_view=_transpose_d_view)
def transpose_d(x, *, perm):
    return x.permute(perm).contiguous()


@ge_kernel("Permute", accepts={"x": (torch.float16, torch.float32)})
def permute(x, *, order):
    """y = x with its dims in `order` (a permutation of x's dims)."""
    order = list(order)
    if sorted(_axis("order entry", a, x.dim()) for a in order) != list(range(x.dim())):
        refuse(f"order {order} is not a permutation of x's {x.dim()} dims")
    return x.permute(order).contiguous()


# ---- joins and splits along an axis ----------------------------------------------------------

def _check_count(name, value, count):
    """N / num: the count of a dynamic input or output list, which must match what the graph wires."""
    if value != count:
        refuse(f"{name}={value} but the node has {count}")


def _concat(tensors, dim):
    dtypes = {t.dtype for t in tensors}
    if len(dtypes) > 1:
        refuse(f"needs inputs of one dtype, got {sorted(map(str, dtypes))}")
    if any(t.dim() == 0 for t in tensors) and all(t.dim() <= 1 for t in tensors):
        # Scalars concatenate as [1] each: TorchAir builds its RNG counter as ConcatV2([seed, offset])
        # of 0-d (and 1-d) tensors, which GE accepts and gives a vector.
        tensors = [t.reshape(-1) for t in tensors]
    return torch.cat(tensors, dim=dim)


@ge_kernel("ConcatV2", prepared=True)
def concat_v2(x, concat_dim, *, N):
    _check_count("N", N, len(x))
    if concat_dim.value is not None:
        dim = int_list(concat_dim.value)[0]
        return lambda x, concat_dim: _concat(x, dim)
    return lambda x, concat_dim: _concat(x, int_list(concat_dim)[0])


@ge_kernel("Concat")
def concat(concat_dim, x, *, N):
    _check_count("N", N, len(x))
    return _concat(x, int_list(concat_dim)[0])


@ge_kernel("ConcatD", "ConcatV2D")
def concat_d(x, *, concat_dim, N):
    _check_count("N", N, len(x))
    return _concat(x, concat_dim)


@ge_kernel("Pack")
def pack(x, *, axis, N):
    _check_count("N", N, len(x))
    return torch.stack(list(x), dim=axis)


@ge_kernel("Unpack")
def unpack(x, *, num, axis):
    if x.dim() == 0 or num != x.shape[axis]:
        refuse(f"num={num} differs from x's size along axis {axis} (shape {list(x.shape)})")
    return tuple(t.contiguous() for t in torch.unbind(x, dim=axis))


def _split_sizes(x_shape, size_splits, split_dim, num_split):
    sizes, dim = int_list(size_splits), int_list(split_dim)[0]
    if -1 in sizes:  # one size may be -1: whatever is left
        known = sum(s for s in sizes if s != -1)
        sizes = [x_shape[dim] - known if s == -1 else s for s in sizes]
    if num_split != len(sizes) or sum(sizes) != x_shape[dim]:
        refuse(f"size_splits {sizes} must be num_split={num_split} sizes adding up to {x_shape[dim]}")
    return sizes, dim


@ge_kernel("SplitV", prepared=True)
def split_v(x, size_splits, split_dim, *, num_split):
    """Fixed sizes and dim are worked out and checked once."""
    split = torch.split
    if size_splits.value is not None and split_dim.value is not None:
        sizes, dim = _split_sizes(x.shape, size_splits.value, split_dim.value, num_split)
        return lambda x, size_splits, split_dim: tuple(t.contiguous() for t in split(x, sizes, dim=dim))

    def call(x, size_splits, split_dim):
        sizes, dim = _split_sizes(x.shape, size_splits, split_dim, num_split)
        return tuple(t.contiguous() for t in split(x, sizes, dim=dim))

    return call


@ge_kernel("Split")
def split(split_dim, x, *, num_split):
    return _even_split(x, num_split, int_list(split_dim)[0])


@ge_kernel("SplitD")
def split_d(x, *, split_dim, num_split):
    return _even_split(x, num_split, split_dim)


def _even_split(x, num_split, dim):
    """num_split equal parts; GE requires the dim to divide evenly (torch.chunk would not)."""
    if num_split <= 0 or x.shape[dim] % num_split:
        refuse(f"num_split={num_split} does not divide dim {dim} of size {x.shape[dim]}")
    return tuple(t.contiguous() for t in torch.split(x, x.shape[dim] // num_split, dim=dim)) if x.shape[dim] else \
        tuple(x.clone() for _ in range(num_split))


# ---- repeats ---------------------------------------------------------------------------------

@ge_kernel("Tile")
def tile(x, multiples):
    return x.repeat(int_list(multiples))


@ge_kernel("BroadcastTo", "Expand", prepared=True)
def broadcast_to(x, shape):
    # -1 keeps the input's size (torch.expand semantics; GE accepts it as well).
    if shape.value is not None:
        dims = int_list(shape.value)
        return lambda x, shape: x.expand(dims).contiguous()
    return lambda x, shape: x.expand(int_list(shape)).contiguous()


# ---- triangles -------------------------------------------------------------------------------

def _triangle(keep, x, diagonal):
    """Keep the elements on and below (Tril) / above (Triu) the `diagonal`-th diagonal of the last two dims."""
    if x.dim() < 2:
        refuse(f"x must have rank >= 2, got shape {list(x.shape)}")
    return keep(x, diagonal)


@ge_kernel("Tril")
def tril(x, *, diagonal):
    return _triangle(torch.tril, x, diagonal)


@ge_kernel("Triu")
def triu(x, *, diagonal):
    return _triangle(torch.triu, x, diagonal)

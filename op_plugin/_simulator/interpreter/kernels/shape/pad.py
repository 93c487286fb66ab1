"""Padding GE ops, forward and backward (CANN files them in ops-math ``conversion/``, e.g.
``pad_v3``): PadV3, MirrorPad, PadV3Grad.

Written from the CANN prototypes (``REG_OP`` in TorchAir's ``auto_generated_ge_raw_ops.py``; PadV3's
modes and paddings layout as CANN/MindSpore document them; MirrorPad is TensorFlow's op, whose
definition CANN keeps) and the converters that emit them (``ge_converter/aten/constant_pad_nd.py``,
``replication_pad1d.py``, ``reflection_pad2d.py``, ``reflection_pad2d_backward.py``,
``replication_pad1d_backward.py``).

Padding is done per dim by gathering source indices, so it works for any rank and dtype; a
negative pad crops. PadV3Grad is the adjoint of PadV3 (same source-index maps, so the pair agrees
by construction): every output-gradient element is added to the input position the forward copied
it from; 16-bit floats accumulate in float32 and are rounded once.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from ...registry import ge_kernel, refuse
from ..common import fresh, int_list

_PADDINGS_DTYPES = (torch.int32, torch.int64)


def _source_index(size, before, after, mode):
    """For each output position along one dim, the input position it copies (-1: the constant)."""
    positions = torch.arange(-before, size + after)
    if mode == "constant":
        return torch.where((positions >= 0) & (positions < size), positions, torch.full_like(positions, -1))
    if size == 0:
        refuse(f"mode {mode!r} cannot pad an empty dim")
    if mode == "edge":
        return positions.clamp(0, size - 1)
    if mode == "circular":
        if max(before, after) > size:
            refuse(f"circular pads ({before}, {after}) exceed the dim size {size}")
        return positions.remainder(size)
    if mode == "reflect":  # the edge element is not repeated
        if max(before, after) >= size:
            refuse(f"reflect pads ({before}, {after}) must be smaller than the dim size {size}")
        if size == 1:
            return torch.zeros_like(positions)
        period = positions.remainder(2 * size - 2)
        return torch.where(period >= size, 2 * size - 2 - period, period)
    if mode == "symmetric":  # the edge element is repeated
        if max(before, after) > size:
            refuse(f"symmetric pads ({before}, {after}) exceed the dim size {size}")
        period = positions.remainder(2 * size)
        return torch.where(period >= size, 2 * size - 1 - period, period)
    refuse(f"mode {mode!r} is not supported")


def _pad(x, pairs, mode, value=None):
    """x padded by (before, after) per dim."""
    if mode == "constant" and all(before >= 0 and after >= 0 for before, after in pairs) and x.numel():
        # The op eager calls (aten.constant_pad_nd); F.pad takes the pads last dim first.
        flat = [p for before_after in reversed(list(pairs)) for p in before_after]
        return F.pad(x, flat, value=0 if value is None else value.reshape(()).item())
    y = x
    for dim, (before, after) in enumerate(pairs):
        if before == 0 and after == 0:
            continue
        index = _source_index(x.shape[dim], before, after, mode)
        if index.numel() == 0:
            y = y.narrow(dim, 0, 0)
            continue
        taken = y.index_select(dim, index.clamp(min=0))
        if mode == "constant" and bool((index < 0).any()):
            shape = [1] * y.dim()
            shape[dim] = index.numel()
            fill = torch.zeros((), dtype=x.dtype) if value is None else value.reshape(())
            taken = torch.where((index < 0).reshape(shape), fill, taken)
        y = taken
    return y.contiguous() if y is not x else x.clone()


def _pairs(paddings, rank, contiguous):
    flat = int_list(paddings)
    if len(flat) != 2 * rank:
        refuse(f"paddings {flat} must hold 2 entries per dim of x (rank {rank})")
    if contiguous:  # [begin0, end0, begin1, end1, ...]
        return [(flat[2 * i], flat[2 * i + 1]) for i in range(rank)]
    return [(flat[i], flat[rank + i]) for i in range(rank)]  # [begin0, begin1, ..., end0, end1, ...]


@ge_kernel("PadV3", accepts={"paddings": _PADDINGS_DTYPES}, prepared=True)
def pad_v3(x, paddings, constant_values, *, mode, paddings_contiguous):
    """Pad (or, with negative pads, crop) every dim: mode constant (constant_values, default 0),
    reflect, edge, circular or symmetric. Fixed paddings are read and checked once."""
    if mode not in ("constant", "reflect", "edge", "circular", "symmetric"):
        refuse(f"mode {mode!r} is not constant, reflect, edge, circular or symmetric")
    if constant_values is not None and constant_values.numel() != 1:
        refuse(f"constant_values must hold one value, got shape {list(constant_values.shape)}")
    if paddings.value is None:
        def call(x, paddings, constant_values):
            return _pad_v3(x, _checked_pairs(x.shape, paddings, mode, paddings_contiguous), constant_values, mode)

        return call
    pairs = _checked_pairs(x.shape, paddings.value, mode, paddings_contiguous)
    if mode == "constant" and all(b >= 0 and a >= 0 for b, a in pairs) and x.numel():
        # The op eager calls (aten.constant_pad_nd); it takes the pads last dim first.
        flat, pad = [p for before_after in reversed(pairs) for p in before_after], torch.constant_pad_nd
        if constant_values is None:
            return lambda x, paddings, constant_values: pad(x, flat, 0)
        return lambda x, paddings, constant_values: pad(x, flat, _constant(constant_values, x).item())
    return lambda x, paddings, constant_values: _pad_v3(x, pairs, constant_values, mode)


def _constant(value, x):
    # TorchAir feeds aten's Python default 0 as an int64 Const whatever x's dtype
    # (constant_pad_nd, replication_pad1d); the NPU takes the value converted to x's dtype.
    return value.to(x.dtype).reshape(())


def _checked_pairs(shape, paddings, mode, contiguous):
    pairs = _pairs(paddings, len(shape), contiguous)
    if mode != "constant" and any(b < 0 or a < 0 for b, a in pairs):
        refuse(f"negative paddings {pairs} are only defined for mode 'constant'")
    for dim, (before, after) in enumerate(pairs):
        if shape[dim] + before + after < 0:
            refuse(f"paddings {pairs} crop dim {dim} (size {shape[dim]}) below zero")
    return pairs


def _pad_v3(x, pairs, constant_values, mode):
    return _pad(x, pairs, mode, None if constant_values is None else _constant(constant_values, x))


@ge_kernel("MirrorPad", accepts={"paddings": _PADDINGS_DTYPES})
def mirror_pad(x, paddings, *, mode):
    """Pad by mirroring: paddings is [rank, 2]; mode REFLECT leaves out the edge element, SYMMETRIC
    repeats it (TensorFlow's MirrorPad)."""
    if paddings.shape != (x.dim(), 2):
        refuse(f"paddings must have shape [{x.dim()}, 2], got {list(paddings.shape)}")
    if mode not in ("REFLECT", "SYMMETRIC"):
        refuse(f"mode {mode!r} is not REFLECT or SYMMETRIC")
    pairs = _pairs(paddings, x.dim(), True)
    if any(b < 0 or a < 0 for b, a in pairs):
        refuse(f"paddings {pairs} must be non-negative")
    return _pad(x, pairs, mode.lower())


def _scatter_back(grad, dim, index, size):
    """The adjoint of `x.index_select(dim, index)` for an x of `size` along `dim`."""
    shape = list(grad.shape)
    shape[dim] = size
    return torch.zeros(shape, dtype=grad.dtype).index_add_(dim, index, grad)


@ge_kernel("PadV3Grad", accepts={"paddings": _PADDINGS_DTYPES}, widen=True)
def pad_v3_grad(x, paddings, *, mode, paddings_contiguous):
    """y = the gradient of PadV3(mode) w.r.t. its input, given x = the gradient of its output."""
    if mode not in ("reflect", "edge", "circular", "symmetric", "constant"):
        refuse(f"mode {mode!r} is not reflect, edge, circular, symmetric or constant")
    pairs = _pairs(paddings, x.dim(), paddings_contiguous)
    if any(b < 0 or a < 0 for b, a in pairs):
        refuse(f"negative paddings {pairs} are not supported by the gradient")
    grad = x
    for dim, (before, after) in enumerate(pairs):
        if before == 0 and after == 0:
            continue
        size = x.shape[dim] - before - after
        if size < 0:
            refuse(f"paddings {pairs} exceed dim {dim} of the gradient (size {x.shape[dim]})")
        index = _source_index(size, before, after, mode)
        keep = index >= 0   # constant mode: padded positions have no source
        grad = _scatter_back(grad.index_select(dim, keep.nonzero().flatten()), dim, index[keep], size)
    return fresh(grad) if grad is x else grad  # no padding at all: a copy, not the input itself

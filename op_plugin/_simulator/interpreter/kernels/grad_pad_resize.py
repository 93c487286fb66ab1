"""Backward GE ops of padding and nearest resizing: PadV3Grad, ResizeNearestNeighborV2Grad.

Each is the adjoint of its forward kernel in pad_resize.py (same source-index maps, so the pair
agrees by construction): every output-gradient element is added to the input position the forward
copied it from. Prototypes from TorchAir's ``auto_generated_ge_raw_ops.py``; emitted by
``ge_converter/aten/reflection_pad2d_backward.py``, ``replication_pad1d_backward.py`` and
``upsample_nearest2d_backward.py``. 16-bit floats accumulate in float32 and are rounded once.
"""
from __future__ import annotations

import torch

from .common import fail, opmath
from .pad_resize import _nearest_source, _pairs, _source_index, nearest_resize_frame
from ..registry import builtin_kernel


def _scatter_back(grad, dim, index, size):
    """The adjoint of `x.index_select(dim, index)` for an x of `size` along `dim`."""
    shape = list(grad.shape)
    shape[dim] = size
    return torch.zeros(shape, dtype=grad.dtype).index_add_(dim, index, grad)


@builtin_kernel("PadV3Grad")
def _pad_v3_grad(inputs, attrs, node):
    """y = the gradient of PadV3(mode) w.r.t. its input, given x = the gradient of its output."""
    x, paddings = inputs
    mode = attrs.get("mode", "reflect")
    if mode not in ("reflect", "edge", "circular", "symmetric", "constant"):
        fail(node, f"mode {mode!r} is not reflect, edge, circular, symmetric or constant")
    pairs = _pairs(node, paddings, x.dim(), attrs.get("paddings_contiguous", True))
    if any(b < 0 or a < 0 for b, a in pairs):
        fail(node, f"negative paddings {pairs} are not supported by the gradient")
    grad = opmath(x)
    for dim, (before, after) in enumerate(pairs):
        if before == 0 and after == 0:
            continue
        size = x.shape[dim] - before - after
        if size < 0:
            fail(node, f"paddings {pairs} exceed dim {dim} of the gradient (size {x.shape[dim]})")
        index = _source_index(node, size, before, after, mode)
        keep = index >= 0   # constant mode: padded positions have no source
        grad = _scatter_back(grad.index_select(dim, keep.nonzero().flatten()), dim, index[keep], size)
    return [grad.to(x.dtype)]


@builtin_kernel("ResizeNearestNeighborV2Grad")
def _resize_nearest_neighbor_v2_grad(inputs, attrs, node):
    """y [.., size[0], size[1]] = the gradient of ResizeNearestNeighborV2 w.r.t. its input, given
    grads = the gradient of its output (TensorFlow's nearest rules; NCHW as TorchAir sets it)."""
    grads, size = inputs
    in_size, h_dim, w_dim, align_corners, half_pixel = nearest_resize_frame(node, "grads", grads, size, attrs)
    rows = _nearest_source(grads.shape[h_dim], in_size[0], align_corners, half_pixel)
    cols = _nearest_source(grads.shape[w_dim], in_size[1], align_corners, half_pixel)
    wide = opmath(grads)
    y = _scatter_back(_scatter_back(wide, h_dim, rows, in_size[0]), w_dim, cols, in_size[1])
    return [y.to(grads.dtype)]

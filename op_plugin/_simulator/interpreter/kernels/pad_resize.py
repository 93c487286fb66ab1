"""Padding and resampling GE ops: PadV3, MirrorPad, ResizeNearestNeighborV2, GridSampler2D, GridSampler3D.

Written from the CANN prototypes (``REG_OP`` in TorchAir's ``auto_generated_ge_raw_ops.py``; PadV3's
modes and paddings layout as CANN/MindSpore document them; MirrorPad and ResizeNearestNeighborV2 are
TensorFlow's ops, whose definitions CANN keeps) and the converters that emit them
(``ge_converter/aten/constant_pad_nd.py``, ``replication_pad1d.py``, ``reflection_pad2d.py``,
``upsample_nearest2d.py``, ``grid_sampler_2d.py``, ``grid_sampler_3d.py``).

Padding is done per dim by gathering source indices, so it works for any rank and dtype; a
negative pad crops. 16-bit floats are resampled in float32 and rounded once.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from .common import check_dtype, fail, input_layout, int_list, opmath
from ..registry import builtin_kernel


def _source_index(node, size, before, after, mode):
    """For each output position along one dim, the input position it copies (-1: the constant)."""
    positions = torch.arange(-before, size + after)
    if mode == "constant":
        return torch.where((positions >= 0) & (positions < size), positions, torch.full_like(positions, -1))
    if size == 0:
        fail(node, f"mode {mode!r} cannot pad an empty dim")
    if mode == "edge":
        return positions.clamp(0, size - 1)
    if mode == "circular":
        if max(before, after) > size:
            fail(node, f"circular pads ({before}, {after}) exceed the dim size {size}")
        return positions.remainder(size)
    if mode == "reflect":  # the edge element is not repeated
        if max(before, after) >= size:
            fail(node, f"reflect pads ({before}, {after}) must be smaller than the dim size {size}")
        if size == 1:
            return torch.zeros_like(positions)
        period = positions.remainder(2 * size - 2)
        return torch.where(period >= size, 2 * size - 2 - period, period)
    if mode == "symmetric":  # the edge element is repeated
        if max(before, after) > size:
            fail(node, f"symmetric pads ({before}, {after}) exceed the dim size {size}")
        period = positions.remainder(2 * size)
        return torch.where(period >= size, 2 * size - 1 - period, period)
    fail(node, f"mode {mode!r} is not supported")


def _pad(node, x, pairs, mode, value=None):
    """x padded by (before, after) per dim."""
    if mode == "constant" and all(before >= 0 and after >= 0 for before, after in pairs) and x.numel():
        # The op eager calls (aten.constant_pad_nd); F.pad takes the pads last dim first.
        flat = [p for before_after in reversed(list(pairs)) for p in before_after]
        return F.pad(x, flat, value=0 if value is None else value.reshape(()).item())
    y = x
    for dim, (before, after) in enumerate(pairs):
        if before == 0 and after == 0:
            continue
        index = _source_index(node, x.shape[dim], before, after, mode)
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


def _pairs(node, paddings, rank, contiguous):
    check_dtype(node, "paddings", paddings, (torch.int32, torch.int64))
    flat = int_list(paddings)
    if len(flat) != 2 * rank:
        fail(node, f"paddings {flat} must hold 2 entries per dim of x (rank {rank})")
    if contiguous:  # [begin0, end0, begin1, end1, ...]
        return [(flat[2 * i], flat[2 * i + 1]) for i in range(rank)]
    return [(flat[i], flat[rank + i]) for i in range(rank)]  # [begin0, begin1, ..., end0, end1, ...]


@builtin_kernel("PadV3")
def _pad_v3(inputs, attrs, node):
    """Pad (or, with negative pads, crop) every dim: mode constant (constant_values, default 0),
    reflect, edge, circular or symmetric."""
    x, paddings = inputs[0], inputs[1]
    value = inputs[2] if len(inputs) > 2 else None
    mode = attrs.get("mode", "constant")
    if mode not in ("constant", "reflect", "edge", "circular", "symmetric"):
        fail(node, f"mode {mode!r} is not constant, reflect, edge, circular or symmetric")
    pairs = _pairs(node, paddings, x.dim(), attrs.get("paddings_contiguous", True))
    if value is not None:
        if value.numel() != 1:
            fail(node, f"constant_values must hold one value, got shape {list(value.shape)}")
        # TorchAir feeds aten's Python default 0 as an int64 Const whatever x's dtype
        # (constant_pad_nd, replication_pad1d); the NPU takes the value converted to x's dtype.
        value = value.to(x.dtype)
    if mode != "constant" and any(b < 0 or a < 0 for b, a in pairs):
        fail(node, f"negative paddings {pairs} are only defined for mode 'constant'")
    for dim, (before, after) in enumerate(pairs):
        if x.shape[dim] + before + after < 0:
            fail(node, f"paddings {pairs} crop dim {dim} (size {x.shape[dim]}) below zero")
    return [_pad(node, x, pairs, mode, value)]


@builtin_kernel("MirrorPad")
def _mirror_pad(inputs, attrs, node):
    """Pad by mirroring: paddings is [rank, 2]; mode REFLECT leaves out the edge element, SYMMETRIC
    repeats it (TensorFlow's MirrorPad)."""
    x, paddings = inputs
    if paddings.shape != (x.dim(), 2):
        fail(node, f"paddings must have shape [{x.dim()}, 2], got {list(paddings.shape)}")
    mode = attrs["mode"]
    if mode not in ("REFLECT", "SYMMETRIC"):
        fail(node, f"mode {mode!r} is not REFLECT or SYMMETRIC")
    pairs = _pairs(node, paddings, x.dim(), True)
    if any(b < 0 or a < 0 for b, a in pairs):
        fail(node, f"paddings {pairs} must be non-negative")
    return [_pad(node, x, pairs, mode.lower())]


# ---- resampling -------------------------------------------------------------------------------

_RESIZE_DTYPES = (torch.int8, torch.uint8, torch.int16, torch.uint16, torch.int32, torch.int64, torch.float16,
                  torch.float32, torch.float64)


def _nearest_source(out_size, in_size, align_corners, half_pixel_centers):
    """TensorFlow's nearest source index along one dim."""
    dst = torch.arange(out_size, dtype=torch.float64)
    if align_corners and out_size > 1:
        scale = (in_size - 1) / (out_size - 1)
    else:
        scale = in_size / out_size if out_size else 0.0
    if half_pixel_centers:
        src = torch.floor((dst + 0.5) * scale)
    elif align_corners:
        src = torch.floor(dst * scale + 0.5)  # roundf: halves away from zero (values are >= 0)
    else:
        src = torch.floor(dst * scale)
    return src.long().clamp(0, max(in_size - 1, 0))


def nearest_resize_frame(node, what, x, size, attrs):
    """Checks shared by ResizeNearestNeighborV2 and its grad: (the two sizes in `size`, the H and W
    dims of `x` in its layout (NCHW as TorchAir sets it, else NHWC, the op's own), align_corners,
    half_pixel_centers)."""
    check_dtype(node, what, x, _RESIZE_DTYPES)
    check_dtype(node, "size", size, (torch.int32,))
    sizes = int_list(size)
    if x.dim() != 4 or len(sizes) != 2 or min(sizes) < 0:
        fail(node, f"{what} must be 4-D and size two non-negative ints, got {list(x.shape)} and {sizes}")
    align_corners, half_pixel = attrs.get("align_corners", False), attrs.get("half_pixel_centers", False)
    if align_corners and half_pixel:
        fail(node, "align_corners and half_pixel_centers cannot both be set")
    layout = input_layout(node, 0, "NHWC")
    if layout not in ("NCHW", "NHWC"):
        fail(node, f"{what} layout {layout!r} is not NCHW or NHWC")
    h_dim, w_dim = (2, 3) if layout == "NCHW" else (1, 2)
    return sizes, h_dim, w_dim, align_corners, half_pixel


@builtin_kernel("ResizeNearestNeighborV2")
def _resize_nearest_neighbor_v2(inputs, attrs, node):
    """Nearest-neighbour resize of the H and W dims to `size` [new_h, new_w] (TensorFlow's definition:
    source = floor(dst * in / out); align_corners rounds with (in - 1) / (out - 1); half_pixel_centers
    samples at dst + 0.5). Layout from the x desc: NCHW as TorchAir sets it, NHWC (the op's own format)
    otherwise."""
    x, size = inputs
    new_size, h_dim, w_dim, align_corners, half_pixel = nearest_resize_frame(node, "x", x, size, attrs)
    rows = _nearest_source(new_size[0], x.shape[h_dim], align_corners, half_pixel)
    cols = _nearest_source(new_size[1], x.shape[w_dim], align_corners, half_pixel)
    return [x.index_select(h_dim, rows).index_select(w_dim, cols).contiguous()]


_GRID_DTYPES = (torch.float16, torch.float32, torch.float64)


def _grid_sample(node, inputs, attrs, spatial, modes):
    x, grid = inputs
    check_dtype(node, "x", x, _GRID_DTYPES)
    if grid.dtype != x.dtype:
        fail(node, f"grid dtype {grid.dtype} differs from x dtype {x.dtype}")
    if x.dim() != spatial + 2 or grid.dim() != spatial + 2 or grid.shape[-1] != spatial \
            or grid.shape[0] != x.shape[0]:
        fail(node, f"x {list(x.shape)} and grid {list(grid.shape)} do not fit a {spatial}-D grid sample")
    mode = attrs.get("interpolation_mode", "bilinear")
    if mode not in modes:
        fail(node, f"interpolation_mode {mode!r} is not one of {', '.join(modes)}")
    padding_mode = attrs.get("padding_mode", "zeros")
    if padding_mode not in ("zeros", "border", "reflection"):
        fail(node, f"padding_mode {padding_mode!r} is not zeros, border or reflection")
    y = F.grid_sample(opmath(x), opmath(grid), mode=mode, padding_mode=padding_mode,
                      align_corners=attrs.get("align_corners", False))
    return [y.to(x.dtype)]


@builtin_kernel("GridSampler2D")
def _grid_sampler_2d(inputs, attrs, node):
    """Sample NCHW x at grid [N, H_out, W_out, 2] (x, y in [-1, 1]), as aten.grid_sampler_2d defines it."""
    return _grid_sample(node, inputs, attrs, 2, ("bilinear", "nearest", "bicubic"))


@builtin_kernel("GridSampler3D")
def _grid_sampler_3d(inputs, attrs, node):
    """Sample NCDHW x at grid [N, D_out, H_out, W_out, 3], as aten.grid_sampler_3d defines it."""
    data_format = attrs.get("data_format", "NCDHW")
    if data_format != "NCDHW":
        fail(node, f"data_format {data_format!r} is not supported (NCDHW)")
    return _grid_sample(node, inputs, attrs, 3, ("bilinear", "nearest"))

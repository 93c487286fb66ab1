"""Image resampling GE ops, forward and backward (CANN files them together in ops-cv ``image/``:
``resize_nearest_neighbor_v2``, ``resize_nearest_neighbor_v2_grad``, ``grid_sample``,
``grid_sampler2_d_grad``): ResizeNearestNeighborV2, ResizeNearestNeighborV2Grad, GridSampler2D,
GridSampler3D, GridSampler2DGrad.

Written from the CANN prototypes (``REG_OP`` in TorchAir's ``auto_generated_ge_raw_ops.py``;
ResizeNearestNeighborV2 is TensorFlow's op, whose definition CANN keeps) and the converters that emit
them (``ge_converter/aten/upsample_nearest2d.py``, ``upsample_nearest2d_backward.py``,
``grid_sampler_2d.py``, ``grid_sampler_3d.py``, ``grid_sampler_2d_backward.py``).

ResizeNearestNeighborV2Grad is the adjoint of ResizeNearestNeighborV2 (same source-index maps, so the
pair agrees by construction): every output-gradient element is added to the input position the
forward copied it from. The grid sampler gradient is aten's. 16-bit floats are resampled (and
accumulated) in float32 and rounded once.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from ...registry import ge_kernel, refuse
from ..common import input_layout, int_list, opmath

# ---- nearest-neighbour resize --------------------------------------------------------------------

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


def _nearest_resize_frame(node, what, x, size, align_corners, half_pixel_centers):
    """Checks shared by ResizeNearestNeighborV2 and its grad (dtypes are the decorator's): the two
    sizes in `size` and the H and W dims of `x` in its layout (NCHW as TorchAir sets it, else NHWC,
    the op's own)."""
    sizes = int_list(size)
    if x.dim() != 4 or len(sizes) != 2 or min(sizes) < 0:
        refuse(f"{what} must be 4-D and size two non-negative ints, got {list(x.shape)} and {sizes}")
    if align_corners and half_pixel_centers:
        refuse("align_corners and half_pixel_centers cannot both be set")
    layout = input_layout(node, 0, "NHWC")
    if layout not in ("NCHW", "NHWC"):
        refuse(f"{what} layout {layout!r} is not NCHW or NHWC")
    h_dim, w_dim = (2, 3) if layout == "NCHW" else (1, 2)
    return sizes, h_dim, w_dim


@ge_kernel("ResizeNearestNeighborV2", accepts={"x": _RESIZE_DTYPES, "size": (torch.int32,)})
def resize_nearest_neighbor_v2(x, size, *, align_corners, half_pixel_centers, node):
    """Nearest-neighbour resize of the H and W dims to `size` [new_h, new_w] (TensorFlow's definition:
    source = floor(dst * in / out); align_corners rounds with (in - 1) / (out - 1); half_pixel_centers
    samples at dst + 0.5). Layout from the x desc: NCHW as TorchAir sets it, NHWC (the op's own format)
    otherwise."""
    new_size, h_dim, w_dim = _nearest_resize_frame(node, "x", x, size, align_corners, half_pixel_centers)
    rows = _nearest_source(new_size[0], x.shape[h_dim], align_corners, half_pixel_centers)
    cols = _nearest_source(new_size[1], x.shape[w_dim], align_corners, half_pixel_centers)
    return x.index_select(h_dim, rows).index_select(w_dim, cols).contiguous()


def _scatter_back(grad, dim, index, size):
    """The adjoint of `x.index_select(dim, index)` for an x of `size` along `dim`."""
    shape = list(grad.shape)
    shape[dim] = size
    return torch.zeros(shape, dtype=grad.dtype).index_add_(dim, index, grad)


@ge_kernel("ResizeNearestNeighborV2Grad", accepts={"grads": _RESIZE_DTYPES, "size": (torch.int32,)}, widen=True)
def resize_nearest_neighbor_v2_grad(grads, size, *, align_corners, half_pixel_centers, node):
    """y [.., size[0], size[1]] = the gradient of ResizeNearestNeighborV2 w.r.t. its input, given
    grads = the gradient of its output (TensorFlow's nearest rules; NCHW as TorchAir sets it)."""
    in_size, h_dim, w_dim = _nearest_resize_frame(node, "grads", grads, size, align_corners, half_pixel_centers)
    rows = _nearest_source(grads.shape[h_dim], in_size[0], align_corners, half_pixel_centers)
    cols = _nearest_source(grads.shape[w_dim], in_size[1], align_corners, half_pixel_centers)
    return _scatter_back(_scatter_back(grads, h_dim, rows, in_size[0]), w_dim, cols, in_size[1])


# ---- grid sampling --------------------------------------------------------------------------------

_GRID_DTYPES = (torch.float16, torch.float32, torch.float64)
_PADDING_MODES = ("zeros", "border", "reflection")


def _grid_sample(x, grid, spatial, modes, interpolation_mode, padding_mode, align_corners):
    if x.dim() != spatial + 2 or grid.dim() != spatial + 2 or grid.shape[-1] != spatial \
            or grid.shape[0] != x.shape[0]:
        refuse(f"x {list(x.shape)} and grid {list(grid.shape)} do not fit a {spatial}-D grid sample")
    if interpolation_mode not in modes:
        refuse(f"interpolation_mode {interpolation_mode!r} is not one of {', '.join(modes)}")
    if padding_mode not in _PADDING_MODES:
        refuse(f"padding_mode {padding_mode!r} is not zeros, border or reflection")
    return F.grid_sample(x, grid, mode=interpolation_mode, padding_mode=padding_mode, align_corners=align_corners)


@ge_kernel("GridSampler2D", accepts={"x": _GRID_DTYPES}, one_dtype=("x", "grid"), widen=True)
def grid_sampler_2d(x, grid, *, interpolation_mode, padding_mode, align_corners):
    """Sample NCHW x at grid [N, H_out, W_out, 2] (x, y in [-1, 1]), as aten.grid_sampler_2d defines it."""
    return _grid_sample(x, grid, 2, ("bilinear", "nearest", "bicubic"), interpolation_mode, padding_mode,
                        align_corners)


@ge_kernel("GridSampler3D", accepts={"x": _GRID_DTYPES}, one_dtype=("x", "grid"), widen=True)
def grid_sampler_3d(x, grid, *, interpolation_mode, padding_mode, data_format, align_corners):
    """Sample NCDHW x at grid [N, D_out, H_out, W_out, 3], as aten.grid_sampler_3d defines it."""
    if data_format != "NCDHW":
        refuse(f"data_format {data_format!r} is not supported (NCDHW)")
    return _grid_sample(x, grid, 3, ("bilinear", "nearest"), interpolation_mode, padding_mode, align_corners)


_INTERPOLATION = {"bilinear": 0, "nearest": 1, "bicubic": 2}
_PADDING = {"zeros": 0, "border": 1, "reflection": 2}


@ge_kernel("GridSampler2DGrad", accepts={"x": (torch.float16, torch.float32, torch.float64)})
def grid_sampler_2d_grad(grad, x, grid, *, interpolation_mode, padding_mode, align_corners):
    """dx, dgrid of grid_sample(x [N, C, H, W], grid [N, Ho, Wo, 2]) for the given modes."""
    if interpolation_mode not in _INTERPOLATION or padding_mode not in _PADDING:
        refuse(f"interpolation_mode {interpolation_mode!r} / padding_mode {padding_mode!r} not supported "
               f"({'/'.join(_INTERPOLATION)}, {'/'.join(_PADDING)})")
    if x.dim() != 4 or grid.dim() != 4 or grid.shape[-1] != 2:
        refuse(f"x {list(x.shape)} must be 4-D and grid {list(grid.shape)} [N, Ho, Wo, 2]")
    dx, dgrid = torch.ops.aten.grid_sampler_2d_backward(
        opmath(grad), opmath(x), opmath(grid), _INTERPOLATION[interpolation_mode], _PADDING[padding_mode],
        align_corners, [True, True])
    return dx.to(x.dtype), dgrid.to(grid.dtype)

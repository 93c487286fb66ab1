"""Corrections (`when="corrects"`; `registry`) of TorchAir's nearest-neighbour 2-D upsampling when the
scale factors are given, and a converter of its `.vec` form (`when="missing"`: TorchAir's is a stub).

`F.interpolate(x, scale_factor=s, mode="nearest")` (recompute_scale_factor None or False) reaches
`aten.upsample_nearest2d(x, output_size, scales_h=s_h, scales_w=s_w)`. aten picks the source row of
output row `o` as (aten/src/ATen/native/UpSample.h, `nearest_idx`):

- `o` when the output size equals the input size, `o >> 1` when it is twice the input size;
- otherwise `min(floorf(o * scale), in - 1)` in float32, where `scale = float(1.0 / s)` when `s` is
  given and positive (`compute_scales_value`), else `float(in) / out`.

torch_npu's eager kernel passes the scales on too (aclnnUpsampleNearest2dV2 with scales_h/scales_w,
Ascend/op-plugin UpsampleNearest2dKernelOpApi.cpp). TorchAir's converter never reads the scales:
`ResizeNearestNeighborV2(x, output_size)` takes `in / out`, which picks other rows for a fractional
factor (1.7 on a 5x7 input), silently, on every host. No GE resize op of this wheel takes 2-D scales,
so the corrected lowering gathers the source rows and columns aten picks: `GatherV2` on the H axis,
then on the W axis, the indices a Const computed as aten computes them (static sizes) or built from
`Range` / `Mul` / `Floor` / `Minimum` / `SelectV2` (symbolic sizes). Without scales TorchAir's
lowering is kept (its in/out rule is aten's). The backward (`upsample_nearest2d_backward`) sums the
gradient of every output position into its source: `InplaceIndexAdd` on H, then on W, into zeros, in
float32 (as TorchAir's ResizeNearestNeighborV2Grad path), cast to the node's dtype.
"""
from __future__ import annotations

import math

import numpy as np
import torch

from .cases import F16, F32, Support
from .registry import aten_converter
from .torchair_api import TorchAirApi

aten = torch.ops.aten
_H, _W = 2, 3


def _has_scale(scale) -> bool:
    return scale is not None and scale > 0


def _static_source_index(in_size: int, out_size: int, scale: float | None) -> list[int]:
    """aten's `nearest_idx` for every output index (module docstring), float32 as aten computes it."""
    if out_size == in_size:
        return list(range(out_size))
    if out_size == 2 * in_size:
        return [o >> 1 for o in range(out_size)]
    step = np.float32(1.0 / scale) if _has_scale(scale) else np.float32(in_size) / np.float32(out_size)
    picked = np.floor(np.arange(out_size, dtype=np.float32) * step).astype(np.int64)
    return np.minimum(picked, in_size - 1).tolist()


def _source_index(ta: TorchAirApi, in_size, out_size, scale: float | None):
    """The source index of every output index along one axis, int32: a Const for static sizes, else
    aten's rule in GE ops."""
    graph, ge = ta.graph, ta.ge
    i32, f32 = graph.DataType.DT_INT32, graph.DataType.DT_FLOAT
    if isinstance(in_size, int) and isinstance(out_size, int):
        return graph.Const(_static_source_index(in_size, out_size, scale), dtype=i32)
    in_t, out_t = (ta.dtype_promote(v, target_dtype=i32) for v in (in_size, out_size))
    out_index = ge.Range(graph.Const(0, dtype=i32), out_t, graph.Const(1, dtype=i32))
    if _has_scale(scale):
        step = graph.Const(float(np.float32(1.0 / scale)), dtype=f32)
    else:
        step = ge.RealDiv(graph.Cast(in_t, dst_type=f32), graph.Cast(out_t, dst_type=f32))
    picked = graph.Cast(ge.Floor(ge.Mul(graph.Cast(out_index, dst_type=f32), step)), dst_type=i32)
    picked = ge.Minimum(picked, ge.Sub(in_t, graph.Const(1, dtype=i32)))
    halved = ge.FloorDiv(out_index, graph.Const(2, dtype=i32))
    picked = ge.SelectV2(ge.Equal(out_t, ge.Mul(in_t, graph.Const(2, dtype=i32))), halved, picked)
    return ge.SelectV2(ge.Equal(out_t, in_t), out_index, picked)


def _size(ta: TorchAirApi, sizes, index: int):
    """Size `index` of a size list (ints or GE scalars), or of one GE int tensor (TorchAir packs a list
    holding symbolic sizes into one), as an int or a 0-d GE tensor."""
    if isinstance(sizes, ta.graph.Tensor):
        return ta.ge.Gather(sizes, ta.graph.Const(index, dtype=ta.graph.DataType.DT_INT32))
    return sizes[index]


def _size_vector(ta: TorchAirApi, sizes: list):
    """An int64 1-D GE tensor of `sizes` (ints or 0-d GE tensors): a Const, or a Pack of the items."""
    i64 = ta.graph.DataType.DT_INT64
    if all(isinstance(s, int) for s in sizes):
        return ta.graph.Const(sizes, dtype=i64)
    return ta.ge.Pack([ta.dtype_promote(s, target_dtype=i64) for s in sizes], N=len(sizes), axis=0)


def _input_size(ta: TorchAirApi, x, axis: int):
    """x's size along `axis`: an int when static, else gathered from `Shape(x)`."""
    size = x.symsize[axis]
    if isinstance(size, int):
        return size
    return _size(ta, ta.ge.Shape(x, dtype=ta.graph.DataType.DT_INT32), axis)


def _gather_nearest(ta: TorchAirApi, x, output_size, scales_h, scales_w):
    graph, ge = ta.graph, ta.ge
    rows = _source_index(ta, _input_size(ta, x, _H), _size(ta, output_size, 0), scales_h)
    cols = _source_index(ta, _input_size(ta, x, _W), _size(ta, output_size, 1), scales_w)
    axis = graph.DataType.DT_INT32
    return ge.GatherV2(ge.GatherV2(x, rows, graph.Const(_H, dtype=axis)), cols, graph.Const(_W, dtype=axis))


_SCALED_CASES = [Support(F32(1, 2, 5, 7), [8, 18], 1.7, 2.7), Support(F16(2, 3, 4, 6), [6, 9], 1.5, 1.5),
                 Support(F32(1, 1, 5, 5), [10, 5], 2.1, 1.1), Support(F32(1, 2, 8, 8), [4, 5], 0.6, 0.7)]


@aten_converter(aten.upsample_nearest2d.default, when="corrects",
                cases=[*_SCALED_CASES, Support(F32(1, 2, 5, 7), [8, 9])])
def upsample_nearest2d(ta: TorchAirApi, self, output_size, scales_h=None, scales_w=None, meta_outputs=None):
    """`aten.upsample_nearest2d` with scales: aten's source rows and columns gathered (module docstring);
    without scales TorchAir's ResizeNearestNeighborV2."""
    if not (_has_scale(scales_h) or _has_scale(scales_w)):
        return ta.original(self, output_size, scales_h, scales_w, meta_outputs=meta_outputs)
    return _gather_nearest(ta, self, output_size, scales_h, scales_w)


@aten_converter(aten.upsample_nearest2d.vec, when="missing",
                cases=[Support(F32(1, 2, 5, 7), None, [1.7, 2.7]), Support(F32(1, 2, 5, 7), [8, 9], None)])
def upsample_nearest2d_vec(ta: TorchAirApi, input, output_size, scale_factors, meta_outputs=None):  # aten's names
    """`aten.upsample_nearest2d.vec(x, output_size, scale_factors)`: TorchAir's converter raises
    NotImplementedError. aten's definition (UpSampleNearest2d.cpp, `upsample_nearest2d(input,
    output_size, scale_factors)`): the output size from `compute_output_size` (given, or
    `int(in * s)` per axis, in double), then upsample_nearest2d with scales_h/scales_w = scale_factors."""
    scale_h, scale_w = scale_factors if scale_factors is not None else (None, None)
    if output_size is None:
        if scale_factors is None:
            raise NotImplementedError("aten.upsample_nearest2d.vec: neither output_size nor scale_factors given")
        sizes = x_sizes = [input.symsize[_H], input.symsize[_W]]
        if not all(isinstance(s, int) for s in x_sizes):
            raise NotImplementedError("aten.upsample_nearest2d.vec: scale_factors with symbolic input sizes cannot "
                                      "be lowered (the output size is int(in * scale)); trace with static sizes")
        output_size = [math.floor(float(size) * float(s)) for size, s in zip(sizes, scale_factors, strict=True)]
    if not (_has_scale(scale_h) or _has_scale(scale_w)):
        sizes = ta.dtype_promote(output_size, target_dtype=ta.graph.DataType.DT_INT32)
        out = ta.ge.ResizeNearestNeighborV2(input, sizes, align_corners=False, half_pixel_centers=False)
        ta.utils.specific_op_input_layout(out, indices=0, layout="NCHW")
        ta.utils.specific_op_output_layout(out, indices=0, layout="NCHW")
        return out
    return _gather_nearest(ta, input, output_size, scale_h, scale_w)


@aten_converter(aten.upsample_nearest2d_backward.default, when="corrects",
                cases=[Support(F32(1, 2, 8, 18), [8, 18], [1, 2, 5, 7], 1.7, 2.7),
                       Support(F16(2, 3, 6, 9), [6, 9], [2, 3, 4, 6], 1.5, 1.5)])
def upsample_nearest2d_backward(ta: TorchAirApi, grad_output, output_size, input_size, scales_h=None, scales_w=None,
                                meta_outputs=None):
    """`aten.upsample_nearest2d_backward` with scales: each output position's gradient added into the
    source aten picks for it (module docstring); without scales TorchAir's ResizeNearestNeighborV2Grad."""
    if not (_has_scale(scales_h) or _has_scale(scales_w)):
        return ta.original(grad_output, output_size, input_size, scales_h, scales_w, meta_outputs=meta_outputs)
    graph, ge = ta.graph, ta.ge
    f32 = graph.DataType.DT_FLOAT
    grad = ta.dtype_promote(grad_output, target_dtype=f32)
    out_h, out_w = _size(ta, output_size, 0), _size(ta, output_size, 1)
    sizes = [_size(ta, input_size, i) for i in range(4)]
    rows = _source_index(ta, sizes[_H], out_h, scales_h)
    cols = _source_index(ta, sizes[_W], out_w, scales_w)
    zero = graph.Const(0.0, dtype=f32)
    by_rows = ge.Fill(_size_vector(ta, [*sizes[:_W], out_w]), zero)
    by_rows = ge.InplaceIndexAdd(by_rows, rows, grad, None, axis=_H)
    summed = ge.Fill(_size_vector(ta, sizes), zero)
    summed = ge.InplaceIndexAdd(summed, cols, by_rows, None, axis=_W)
    return graph.Cast(summed, dst_type=meta_outputs.dtype)

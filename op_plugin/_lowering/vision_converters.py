"""op_plugin's GE converters for the padding and pixel-rearranging aten ops vision and audio code
produces and TorchAir does not lower (`when="missing"`; `registry`).

- `aten.reflection_pad1d` / `reflection_pad3d` (+ backward): `F.pad(x, ..., mode="reflect")` on
  3-D/5-D input (neural audio codecs and vocoders pad their 1-D convolutions by reflection: EnCodec,
  DAC, HiFi-GAN); TorchAir has no converter at all for reflection_pad1d and a stub for 3d.
- `aten.replication_pad2d` / `replication_pad3d` (+ backward): `mode="replicate"` on 4-D/5-D input.
- `aten.pixel_shuffle` / `pixel_unshuffle`: sub-pixel convolution upsampling (ESPCN, Swin2SR,
  super-resolution heads) and its inverse; TorchAir's converter raises NotImplementedError.
- `aten.col2im`: `F.fold` (MobileViTv2 folds its unfolded patches back), GE `Col2im` as torch_npu's
  eager col2im runs it.

The pads lower to the CANN op TorchAir itself uses for its reflection/replication pads,
`PadV3(x, paddings, mode, paddings_contiguous=True)` (TorchAir's replication_pad1d converter;
torch_npu's aclop reflection_pad1d unsqueezes and runs reflection_pad2d, Ascend/op-plugin
op_plugin/ops/aclops/ReflectionPad1dKernelNpu.cpp), and their backward to `PadV3Grad`, as
TorchAir's reflection_pad2d_backward does. PadV3's `paddings` list one (before, after) pair per
dim, first dim first, where torch's pad list starts with the last dim.
"""
from __future__ import annotations

import torch

from .cases import F32, Support
from .registry import aten_converter
from .torchair_api import TorchAirApi


def _ge_paddings(padding, rank: int) -> list[int]:
    """torch's pad list (last dim first, (left, right) pairs) as PadV3's contiguous paddings: one
    (before, after) pair per dim of a rank-`rank` tensor, first dim first."""
    padding = list(padding)
    if len(padding) % 2 or len(padding) // 2 > rank:
        raise NotImplementedError(f"pad list {padding} does not fit a {rank}-D input")
    pairs = [(padding[2 * i], padding[2 * i + 1]) for i in range(len(padding) // 2)]
    pairs += [(0, 0)] * (rank - len(pairs))
    return [p for pair in reversed(pairs) for p in pair]


def _static_padding(op_name: str, padding) -> list:
    if not isinstance(padding, (list, tuple)) or not all(isinstance(p, int) for p in padding):
        raise NotImplementedError(f"aten.{op_name}: op_plugin lowers a pad list of Python ints, got {padding!r}")
    return list(padding)


def _pad(ta: TorchAirApi, op_name: str, x, padding, mode: str):
    paddings = _ge_paddings(_static_padding(op_name, padding), x.rank)
    const = ta.graph.Const
    return ta.ge.PadV3(x, const(paddings, dtype=ta.graph.DataType.DT_INT64), None, mode=mode,
                       paddings_contiguous=True)


def _pad_backward(ta: TorchAirApi, op_name: str, grad_output, x, padding, mode: str):
    paddings = _ge_paddings(_static_padding(op_name, padding), x.rank)
    const = ta.graph.Const
    return ta.ge.PadV3Grad(grad_output, const(paddings, dtype=ta.graph.DataType.DT_INT64), mode=mode,
                           paddings_contiguous=True)


@aten_converter(torch.ops.aten.reflection_pad1d.default, when="missing",
                cases=[Support(F32(2, 3, 8), [2, 3]), Support(F32(3, 6), [1, 0]), Support(F32(1, 2, 5), [4, 4])])
def reflection_pad1d(ta: TorchAirApi, self, padding, meta_outputs=None):
    """`aten.reflection_pad1d` (`F.pad(x, (l, r), mode="reflect")` on [C, W] or [N, C, W]): the
    last dim mirrored without repeating its edge element. `PadV3(mode="reflect")`."""
    return _pad(ta, "reflection_pad1d", self, padding, "reflect")


@aten_converter(torch.ops.aten.reflection_pad3d.default, when="missing",
                cases=[Support(F32(1, 2, 3, 4, 5), [1, 2, 0, 1, 2, 1]), Support(F32(2, 4, 4, 3), [1, 1, 1, 1, 1, 1])])
def reflection_pad3d(ta: TorchAirApi, self, padding, meta_outputs=None):
    """`aten.reflection_pad3d` (mode="reflect" on [C, D, H, W] or [N, C, D, H, W]): `PadV3(mode="reflect")`."""
    return _pad(ta, "reflection_pad3d", self, padding, "reflect")


@aten_converter(torch.ops.aten.replication_pad2d.default, when="missing",
                cases=[Support(F32(2, 3, 4, 5), [1, 2, 0, 3]), Support(F32(3, 4, 4), [2, 2, 1, 1])])
def replication_pad2d(ta: TorchAirApi, self, padding, meta_outputs=None):
    """`aten.replication_pad2d` (mode="replicate" on [C, H, W] or [N, C, H, W]): the edge element
    repeated. `PadV3(mode="edge")`, as TorchAir lowers replication_pad1d."""
    return _pad(ta, "replication_pad2d", self, padding, "edge")


@aten_converter(torch.ops.aten.replication_pad3d.default, when="missing",
                cases=[Support(F32(1, 2, 3, 4, 5), [1, 0, 2, 1, 0, 1])])
def replication_pad3d(ta: TorchAirApi, self, padding, meta_outputs=None):
    """`aten.replication_pad3d` (mode="replicate" on 4-D/5-D input): `PadV3(mode="edge")`."""
    return _pad(ta, "replication_pad3d", self, padding, "edge")


@aten_converter(torch.ops.aten.reflection_pad1d_backward.default, when="missing",
                cases=[Support(F32(2, 3, 13), F32(2, 3, 8), [2, 3])])
def reflection_pad1d_backward(ta: TorchAirApi, grad_output, self, padding, meta_outputs=None):
    """`aten.reflection_pad1d_backward`: each mirrored position's gradient added to its source,
    `PadV3Grad(mode="reflect")` (TorchAir's reflection_pad2d_backward uses the same op)."""
    return _pad_backward(ta, "reflection_pad1d_backward", grad_output, self, padding, "reflect")


@aten_converter(torch.ops.aten.reflection_pad3d_backward.default, when="missing",
                cases=[Support(F32(1, 2, 4, 6, 8), F32(1, 2, 3, 4, 5), [1, 2, 0, 2, 1, 0])])
def reflection_pad3d_backward(ta: TorchAirApi, grad_output, self, padding, meta_outputs=None):
    """`aten.reflection_pad3d_backward`: `PadV3Grad(mode="reflect")`."""
    return _pad_backward(ta, "reflection_pad3d_backward", grad_output, self, padding, "reflect")


@aten_converter(torch.ops.aten.replication_pad2d_backward.default, when="missing",
                cases=[Support(F32(2, 3, 7, 8), F32(2, 3, 4, 5), [1, 2, 0, 3])])
def replication_pad2d_backward(ta: TorchAirApi, grad_output, self, padding, meta_outputs=None):
    """`aten.replication_pad2d_backward`: `PadV3Grad(mode="edge")`."""
    return _pad_backward(ta, "replication_pad2d_backward", grad_output, self, padding, "edge")


@aten_converter(torch.ops.aten.replication_pad3d_backward.default, when="missing",
                cases=[Support(F32(1, 2, 4, 7, 6), F32(1, 2, 3, 4, 5), [1, 0, 2, 1, 0, 1])])
def replication_pad3d_backward(ta: TorchAirApi, grad_output, self, padding, meta_outputs=None):
    """`aten.replication_pad3d_backward`: `PadV3Grad(mode="edge")`."""
    return _pad_backward(ta, "replication_pad3d_backward", grad_output, self, padding, "edge")


def _dims(ta: TorchAirApi, x, first: int, stop: int):
    """x's sizes [first, stop) as an int64 GE vector (symbolic sizes stay in the graph)."""
    int64 = ta.graph.DataType.DT_INT64
    return ta.ge.Gather(ta.ge.Shape(x, dtype=int64), ta.graph.Const(list(range(first, stop)), dtype=int64))


def _concat(ta: TorchAirApi, parts):
    return ta.ge.ConcatV2(parts, ta.graph.Const(0), N=len(parts))


@aten_converter(torch.ops.aten.pixel_shuffle.default, when="missing",
                cases=[Support(F32(2, 8, 3, 5), 2), Support(F32(9, 2, 2), 3), Support(F32(2, 1, 4, 2, 3), 2)])
def pixel_shuffle(ta: TorchAirApi, self, upscale_factor, meta_outputs=None):
    """`aten.pixel_shuffle` ([*, C r^2, H, W] -> [*, C, H r, W r]): TorchAir's converter raises
    NotImplementedError. aten's definition (aten/src/ATen/native/PixelShuffle.cpp,
    math_pixel_shuffle): reshape to [*, C, r, r, H, W], permute to [*, C, H, r, W, r], reshape.
    Lowered to those Reshape/Transpose/Reshape, sizes taken from `Shape(x)` so symbolic sizes
    stay symbolic."""
    ge, const, int64 = ta.ge, ta.graph.Const, ta.graph.DataType.DT_INT64
    r, rank = int(upscale_factor), self.rank
    lead = rank - 3
    height_width = _dims(ta, self, rank - 2, rank)
    lead_dims = [_dims(ta, self, 0, lead)] if lead else []
    split = ge.Reshape(self, _concat(ta, [*lead_dims, const([-1, r, r], dtype=int64), height_width]))
    perm = list(range(lead)) + [lead + i for i in (0, 3, 1, 4, 2)]
    moved = ge.Transpose(split, const(perm, dtype=int64))
    grown = ge.Mul(height_width, const([r, r], dtype=int64))
    return ge.Reshape(moved, _concat(ta, [*lead_dims, const([-1], dtype=int64), grown]))


@aten_converter(torch.ops.aten.pixel_unshuffle.default, when="missing",
                cases=[Support(F32(2, 2, 6, 4), 2), Support(F32(1, 9, 9), 3), Support(F32(2, 1, 3, 4, 6), 2)])
def pixel_unshuffle(ta: TorchAirApi, self, downscale_factor, meta_outputs=None):
    """`aten.pixel_unshuffle` ([*, C, H r, W r] -> [*, C r^2, H, W]): TorchAir has no converter.
    aten's definition (math_pixel_unshuffle): reshape to [*, C, H, r, W, r], permute to
    [*, C, r, r, H, W], reshape. Lowered to those Reshape/Transpose/Reshape, sizes from `Shape(x)`."""
    ge, const, int64 = ta.ge, ta.graph.Const, ta.graph.DataType.DT_INT64
    r, rank = int(downscale_factor), self.rank
    lead = rank - 3
    shrunk = ge.FloorDiv(_dims(ta, self, rank - 2, rank), const([r, r], dtype=int64))
    height, width = (ge.Gather(shrunk, const([i], dtype=int64)) for i in (0, 1))
    channels = _dims(ta, self, 0, lead + 1)  # the leading dims and C
    split = ge.Reshape(self, _concat(ta, [channels, height, const([r], dtype=int64), width,
                                          const([r], dtype=int64)]))
    perm = list(range(lead)) + [lead + i for i in (0, 2, 4, 1, 3)]
    moved = ge.Transpose(split, const(perm, dtype=int64))
    lead_dims = [_dims(ta, self, 0, lead)] if lead else []
    return ge.Reshape(moved, _concat(ta, [*lead_dims, const([-1], dtype=int64), shrunk]))


def _pair(values, default) -> list[int]:
    values = [int(v) for v in values] if values else [default]
    return values * 2 if len(values) == 1 else values


def _int32_vector(ta: TorchAirApi, values):
    """A list of sizes (ints, or symbolic sizes as GE scalars) or a GE vector, as one int32 GE vector."""
    graph = ta.graph
    int32 = graph.DataType.DT_INT32
    if isinstance(values, graph.Tensor):
        return ta.dtype_promote(values, target_dtype=int32)
    if all(isinstance(v, int) for v in values):
        return graph.Const([int(v) for v in values], dtype=int32)
    parts = [graph.Const([v], dtype=int32) if isinstance(v, int)
             else ta.ge.Reshape(ta.dtype_promote(v, target_dtype=int32),
                                graph.Const([1], dtype=graph.DataType.DT_INT64))
             for v in values]
    return _concat(ta, parts)


@aten_converter(torch.ops.aten.col2im.default, when="missing",
                cases=[Support(F32(2, 12, 12), [4, 5], [2, 2], [1, 1], [0, 0], [1, 1]),
                       Support(F32(1, 18, 6), [5, 4], [3, 3], [1, 1], [1, 1], [2, 2]),
                       Support(F32(8, 12), [4, 6], [2, 2], [1, 2], [0, 1], [2, 1])])
def col2im(ta: TorchAirApi, self, output_size, kernel_size, dilation, padding, stride, meta_outputs=None):
    """`aten.col2im` (`F.fold`: MobileViTv2 folds its patches back into a feature map): TorchAir's
    converter raises NotImplementedError. torch_npu's eager col2im (Ascend/op-plugin
    op_plugin/ops/aclops/Col2imKernelNpu.cpp) runs GE `Col2im` on x viewed as [N, C, kh * kw, L], with
    output_size [H, W] as an int32 input and kernel_size/dilation/padding/stride as [h, w] attrs
    (REG_OP Col2im: x float16/float32, output_size int32, four required ListInt attrs): y [N, C, H, W];
    a 2-D input is unsqueezed to a batch of one and squeezed back, as that kernel does. Lowered to the
    same op, x's [N, C * kh * kw, L] reshaped with sizes from `Shape(x)` (symbolic sizes stay symbolic),
    the output given the NCHW layout."""
    ge, const, int64 = ta.ge, ta.graph.Const, ta.graph.DataType.DT_INT64
    batched = self.rank == 3
    x = self if batched else ge.Unsqueeze(self, axes=[0])
    kernel = _pair(kernel_size, 1)
    columns = ge.Reshape(x, _concat(ta, [_dims(ta, x, 0, 1), const([-1, kernel[0] * kernel[1]], dtype=int64),
                                         _dims(ta, x, 2, 3)]))
    y = ge.Col2im(columns, _int32_vector(ta, output_size), kernel_size=kernel, dilation=_pair(dilation, 1),
                  padding=_pair(padding, 0), stride=_pair(stride, 1))
    ta.utils.specific_op_output_layout(y, indices=0, layout="NCHW")
    return y if batched else ge.Squeeze(y, axis=[0])

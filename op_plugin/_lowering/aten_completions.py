"""op_plugin's completions of TorchAir's converters (`when="completes"`).

Where TorchAir's converter lowers an op but raises (NotImplementedError, or an IndexError) for one
case real models produce, op_plugin's converter lowers that case and hands every other to
TorchAir's (`ta.original`). Installed on every host, only where TorchAir has a converter to
complete (`registry`). docs/npu-faithful-lowering.md lists them.
"""
from __future__ import annotations

import torch

from .cases import F32, Support
from .registry import aten_converter
from .torchair_api import TorchAirApi


@aten_converter(torch.ops.aten.constant_pad_nd.default, when="completes",
                cases=[Support(F32(2, 3, 5), [1, 2], 0.5), Support(F32(2, 3, 5), [0, 1, 2, 0]),
                       Support(F32(2, 3, 4), [1, 1, 1, 1, 0, 2], -1.0)])
def constant_pad_nd(ta: TorchAirApi, self, pad, value=0, meta_outputs=None):
    """`aten.constant_pad_nd` with symbolic pads (a dynamic-shape model padding by a size, e.g.
    Swin's window padding with `dynamic=True`): TorchAir gets the pad list as one GE tensor and
    raises. Lowered exactly as TorchAir lowers a pad list: torch's (last dim first) pairs are
    reversed into PadV3's per-dimension order and zero pairs fill the leading dimensions, only
    with GE ops on the tensor (Reshape [k, 2], ReverseV2 axis 0, Reshape [2k], ConcatV2 after
    zeros), then `PadV3(x, paddings, value)`. A static pad list is TorchAir's."""
    graph_module = ta.graph
    if not isinstance(pad, graph_module.Tensor):
        return ta.original(self, pad, value, meta_outputs=meta_outputs)
    ge = ta.ge
    length = pad.symsize[0] if pad.symsize else None
    if not isinstance(length, int) or length % 2:
        raise NotImplementedError(f"constant_pad_nd: pad list of length {length!r}")
    pairs = length // 2
    if pairs > self.rank:
        raise AssertionError("Length of pad should be no more than twice the number of dimensions of the input.")
    per_dim = ge.Reshape(ge.ReverseV2(ge.Reshape(pad, graph_module.Const([pairs, 2])), graph_module.Const([0])),
                         graph_module.Const([length]))
    if pairs < self.rank:
        zeros = graph_module.Const([0] * (2 * (self.rank - pairs)), dtype=pad.dtype)
        per_dim = ge.ConcatV2([zeros, per_dim], graph_module.Const(0), N=2)
    return ge.PadV3(self, per_dim, value)


@aten_converter(torch.ops.aten.clone.default, when="completes",
                cases=[Support(F32(2, 3, 4, 5), memory_format=torch.channels_last),
                       Support(F32(2, 3, 2, 4, 5), memory_format=torch.channels_last_3d),
                       Support(F32(2, 3), memory_format=torch.preserve_format), Support(F32(2, 3))])
def clone(ta: TorchAirApi, self, *, memory_format=None, meta_outputs=None):
    """`aten.clone` with `memory_format=torch.channels_last` (or channels_last_3d /
    preserve_format): TorchAir raises NotImplementedError for any format but contiguous;
    BEiT/YOLOS/PVT/DPT's position embedding interpolation produces it. A GE tensor has no strides
    (its layout is its shape), so the clone's values are its input's: `Identity(x)`. The graph
    output is contiguous where eager's is channels_last (same values; TorchAir gives contiguous
    outputs on an Ascend host too)."""
    if memory_format in (None, torch.contiguous_format):
        return ta.original(self, memory_format=memory_format, meta_outputs=meta_outputs)
    if memory_format not in (torch.channels_last, torch.channels_last_3d, torch.preserve_format):
        raise NotImplementedError(f"clone: memory_format {memory_format}")
    return ta.ge.Identity(self)


@aten_converter(torch.ops.aten._native_batch_norm_legit.no_stats, when="completes",
                cases=[Support(F32(4, 3, 5), F32(3), F32(3), True, 0.1, 1e-5),
                       Support(F32(1, 4, 27), None, None, True, 0.0, 1e-6)])
def batch_norm_no_stats(ta: TorchAirApi, input, weight, bias, training, momentum, eps,  # aten's names
                        meta_outputs=None):
    """`aten._native_batch_norm_legit.no_stats` (training batch norm without running statistics,
    e.g. BiT's weight-standardised convolutions normalising their weights with
    `F.batch_norm(w, None, None, training=True)`): TorchAir lowers it on arch35 SoCs only and
    raises NotImplementedError elsewhere. Lowered off arch35 exactly as TorchAir lowers it on
    arch35: its own `_native_batch_norm_legit_functional` converter (BatchNormV3, training) fed
    running statistics filled with 0 and 1, returning (y, save_mean, save_rstd) as TorchAir's
    arch35 branch does. Output 2 is BatchNormV3's `save_rstd`, the batch variance off arch35 (see
    `numeric_corrections.batch_norm_functional`), not eager's invstd."""
    if not training or ta.is_arch35():
        return ta.original(input, weight, bias, training, momentum, eps, meta_outputs=meta_outputs)
    ge, graph_module = ta.ge, ta.graph
    channels = ge.Gather(ge.Shape(input, dtype=graph_module.DataType.DT_INT32), 1)
    running_mean = ge.Fill(channels, graph_module.Cast(0.0, dst_type=input.dtype))
    running_var = ge.Fill(channels, graph_module.Cast(1.0, dst_type=input.dtype))
    # TorchAir's own converter (GE output order), not op_plugin's correction of it
    functional = ta.converter(torch.ops.aten._native_batch_norm_legit_functional.default)
    if functional is None:
        raise NotImplementedError("this TorchAir does not lower _native_batch_norm_legit_functional")
    y, _, _, save_mean, save_rstd = functional(input, weight, bias, running_mean, running_var, training,
                                               momentum, eps, meta_outputs=None)
    return y, save_mean, save_rstd


@aten_converter(torch.ops.aten.convolution_backward.default, when="completes",
                cases=[Support(F32(2, 4, 4, 4), F32(2, 4, 11, 11), F32(4, 1, 5, 5), None, [2], [0], [1], False, [0], 4,
                               [True, True, False]),
                       Support(F32(1, 2, 6), F32(1, 3, 8), F32(2, 3, 3), [2], [1], [0], [1], False, [0], 1,
                               [True, True, True])])
def convolution_backward(ta: TorchAirApi, grad_output, input, weight, bias_sizes, stride, padding,
                         dilation, transposed, output_padding, groups, output_mask, meta_outputs=None):
    """`aten.convolution_backward` with a one-element stride/padding/dilation/output_padding (aten
    passes `padding=[0]` for `padding="valid"`, e.g. EfficientNet's depthwise convs in training):
    ATen expands it to every spatial dim (Convolution.cpp, expand_param_if_needed); TorchAir's
    converter indexes `padding[1]` and fails with IndexError. Expanded as ATen does, then
    TorchAir's converter."""
    spatial = weight.rank - 2

    def expanded(param):
        return list(param) * spatial if isinstance(param, (list, tuple)) and len(param) == 1 else param

    return ta.original(grad_output, input, weight, bias_sizes, expanded(stride), expanded(padding),
                       expanded(dilation), transposed, expanded(output_padding), groups, output_mask,
                       meta_outputs=meta_outputs)


@aten_converter(torch.ops.aten.convolution.default, when="completes",
                cases=[Support(F32(2, 3, 13), F32(3, 2, 4), F32(2), [2], [1], [1], True, [1], 1),
                       Support(F32(1, 4, 5, 6), F32(4, 2, 3, 3), None, [2, 1], [1, 0], [1, 1], True, [0, 0], 2)])
def convolution(ta: TorchAirApi, x, weight, bias, stride, padding, dilation, transposed, output_padding, groups,
                meta_outputs=None):
    """`aten.convolution`, transposed, 1-D and 2-D (ConvTranspose1d/2d: neural audio codecs'
    upsampling decoders, dense-prediction vision decoders): TorchAir's converter computes
    Conv2DTranspose's `input_size` from an int32 `Shape` (ge_converter/aten/convolution.py
    `_conv_transpose2d_npu_output_size`), but the Python ints it combines with it (groups, 1,
    stride) become int64 Consts, because TorchAir does not know the dtype of a `Gather` output
    when it promotes them: `Mul(int32, int64)`, which GE refuses (it does not promote), on an NPU
    as in the simulator. Completed: the same Conv2DTranspose TorchAir builds (strides, pads,
    dilations, output_padding and layouts as `_npu_conv_transpose2d` sets them, a 1-D input
    unsqueezed at dim 2 as TorchAir does), with `input_size` computed in int32 throughout:
    `(in - 1) * stride + dilation * (k - 1) + 1 - 2 * pad + output_padding` per spatial dim,
    channels `weight.shape[1] * groups` (aten's transposed-convolution output size). Other
    cases (not transposed, 3-D, attributes given as tensors) keep TorchAir's converter."""
    rank = meta_outputs.rank
    attrs = (stride, padding, dilation, output_padding, groups, transposed)
    if (not transposed or rank not in (3, 4) or any(isinstance(a, ta.graph.Tensor) for a in attrs)
            or (bias is not None and bias.dtype == ta.graph.DataType.DT_HIFLOAT8)):
        return ta.original(x, weight, bias, stride, padding, dilation, transposed, output_padding, groups,
                           meta_outputs=meta_outputs)
    ge, utils = ta.ge, ta.utils
    int32 = ta.graph.DataType.DT_INT32

    def c32(value):
        return ta.graph.Const(value, dtype=int32)

    stride, padding, dilation, output_padding = (list(v) for v in (stride, padding, dilation, output_padding))
    if bias is not None:
        bias = ta.dtype_promote(bias, target_dtype=meta_outputs.dtype)
    x, weight = ta.dtype_promote(x, weight, target_dtype=meta_outputs.dtype)
    if rank == 3:
        stride, padding, dilation = [1, stride[0]], [0, padding[0]], [1, dilation[0]]
        output_padding = [0, output_padding[0]]
        x, weight = ge.Unsqueeze(x, axes=[2]), ge.Unsqueeze(weight, axes=[2])
    stride, padding, dilation, output_padding = (v * 2 if len(v) == 1 else v
                                                 for v in (stride, padding, dilation, output_padding))
    x_shape, w_shape = ge.Shape(x, dtype=int32), ge.Shape(weight, dtype=int32)

    def dim(shape, i):
        return ge.Gather(shape, c32(i))

    def length(i):
        grown = ge.Mul(ge.Sub(dim(x_shape, 2 + i), c32(1)), c32(stride[i]))
        kernel = ge.Mul(c32(dilation[i]), ge.Sub(dim(w_shape, 2 + i), c32(1)))
        return ge.Add(ge.Add(grown, kernel), c32(1 - 2 * padding[i] + output_padding[i]))

    sizes = [dim(x_shape, 0), ge.Mul(dim(w_shape, 1), c32(groups)), length(0), length(1)]
    output = ge.Conv2DTranspose(
        input_size=ge.Pack(sizes, N=4, axis=0), x=x, filter=weight, bias=bias, offset_w=None,
        strides=[1, 1, stride[0], stride[1]], pads=[padding[0], padding[0], padding[1], padding[1]],
        dilations=[1, 1, dilation[0], dilation[1]], groups=groups, data_format="NCHW",
        output_padding=[0, 0, output_padding[0], output_padding[1]])
    utils.specific_op_input_layout(output, indices=[0, 3] if bias is not None else [0], layout="ND")
    utils.specific_op_input_layout(output, indices=[1, 2], layout="NCHW")
    utils.specific_op_output_layout(output, indices=0, layout="NCHW")
    return ge.Squeeze(output, axis=[2]) if rank == 3 else output


@aten_converter(torch.ops.aten.scalar_tensor.default, when="completes",
                cases=[Support(3), Support(2.5, dtype=torch.float16), Support(7, dtype=torch.int32)])
def scalar_tensor(ta: TorchAirApi, s, *, dtype=None, layout=None, device=None, pin_memory=None, meta_outputs=None):
    """`aten.scalar_tensor` without a dtype (aten's result is then the default dtype, float32):
    TorchAir's converter returns a GE tensor argument unchanged and a Python int as an int64
    Const, which TorchAir then labels float32 (the node's meta). With `dynamic=True` a size used
    in float arithmetic (1-D nearest or align_corners interpolation's `scale = in / out`) becomes
    `scalar_tensor(size)`: the next op gets the int64 size described as float32 (the executor
    refuses the size's `Gather`; GE would compute the consumers in the wrong dtype). Completed:
    the value Cast (or made a Const) in the node's dtype; an explicit dtype stays TorchAir's."""
    if dtype is None:
        return ta.dtype_promote(s, target_dtype=meta_outputs.dtype)
    return ta.original(s, dtype=dtype, layout=layout, device=device, pin_memory=pin_memory, meta_outputs=meta_outputs)


_INT32_MAX = 2**31 - 1


@aten_converter(torch.ops.aten.slice_backward.default, when="completes",
                cases=[Support(F32(3, 2), [3, 4], 1, 1, 2**63 - 1, 2), Support(F32(2, 3), [5, 3], 0, 0, 2**63 - 1, 3)])
def slice_backward(ta: TorchAirApi, grad_output, input_sizes, dim, start, end, step, meta_outputs=None):
    """`aten.slice_backward` with a step other than 1 and symbolic input sizes (`x[1::2]`,
    `x[:-1:2]` in training with dynamic=True: Mamba's selective scan): TorchAir casts an open end
    (aten passes INT64_MAX) to an int32 Const ("value cannot be converted to type int32 without
    overflow") and then takes `Minimum(size, end)`, but neither wraps a negative start or end nor
    clamps the start (aten does both, against the dim's size), so `x[:-1:2]` gives `Range(0, -1,
    2)`, which fails (as TensorFlow's Range, which CANN follows). Completed with GE ops on the
    size: a negative bound `max(size + bound, 0)`, the start clamped to the size, an end past int32
    handed over as INT32_MAX (TorchAir's Minimum clamps it to the size); then TorchAir's converter."""
    if step != 1 and isinstance(input_sizes, ta.graph.Tensor):
        ge, dtype = ta.ge, input_sizes.dtype
        size = ge.Gather(input_sizes, dim)

        def const(value):
            return ta.dtype_promote(value, target_dtype=dtype)

        def wrapped(bound):
            return ge.Maximum(ge.Add(size, const(bound)), const(0)) if bound < 0 else bound

        if isinstance(end, int):
            end = _INT32_MAX if end > _INT32_MAX else wrapped(end)
        if isinstance(start, int) and start != 0:
            start = ge.Minimum(wrapped(start) if start < 0 else const(start), size)
    return ta.original(grad_output, input_sizes, dim, start, end, step, meta_outputs=meta_outputs)

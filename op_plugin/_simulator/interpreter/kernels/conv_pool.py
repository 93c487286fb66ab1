"""Convolution GE ops: Conv2D, Conv3D, Conv2DTranspose, Conv3DTranspose (pooling is in pooling.py).

Written from the ops' CANN prototypes (``REG_OP`` in TorchAir's ``auto_generated_ge_raw_ops.py``)
and from what TorchAir's aten converters put in the attrs (``ge_converter/aten/convolution.py``,
TorchAir's ``_npu_conv3d`` / ``_npu_conv_transpose2d`` / ``_convolution_transpose3d_nocheck``). GE carries the tensor layout (NCHW, NHWC, ...) on each input/output
desc rather than in the data, so the kernels read it from ``node.input_desc[i].layout``.

16-bit float inputs are computed in float32 and rounded once, as the cube/vector units do.
Attr values the simulator does not implement raise ``ValueError`` naming the node, never
compute something else.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .common import check_dtype, fail, input_layout, int_list, opmath
from ..registry import builtin_kernel


def _pair_from_4d(node, name, values, data_format, fill):
    """(h, w) of a 4-element NCHW/NHWC attr (strides, dilations); its N and C entries must be ``fill``."""
    if len(values) != 4:
        fail(node, f"{name} must have 4 entries (one per {data_format} dim), got {values}")
    h_index, w_index = (2, 3) if data_format == "NCHW" else (1, 2)
    others = [values[i] for i in range(4) if i not in (h_index, w_index)]
    if any(v != fill for v in others):
        fail(node, f"{name}={values}: the N and C entries must be {fill} for {data_format}")
    return values[h_index], values[w_index]


# ---- Conv2D ----------------------------------------------------------------------------------

# filter layout -> permutation to torch's [out, in/groups, kh, kw]
_FILTER_TO_OIHW = {"NCHW": (0, 1, 2, 3), "NHWC": (0, 3, 1, 2), "HWCN": (3, 2, 0, 1)}


@builtin_kernel("Conv2D")
def _conv2d(inputs, attrs, node):
    """y = conv(x, filter) + bias; pads are [top, bottom, left, right] and may be asymmetric."""
    x, weight = inputs[0], inputs[1]
    bias = inputs[2] if len(inputs) > 2 else None
    if len(inputs) > 3 and inputs[3] is not None:
        fail(node, "offset_w (int8 quantised weights) is not supported by the simulator")
    if attrs.get("offset_x", 0) != 0:
        fail(node, f"offset_x={attrs['offset_x']} (int8 quantisation) is not supported by the simulator")
    floats = (torch.float16, torch.float32, torch.bfloat16)
    check_dtype(node, "x", x, floats)  # int8 is in the prototype, but only with quantisation
    if weight.dtype != x.dtype:
        fail(node, f"filter dtype {weight.dtype} differs from x dtype {x.dtype}")
    data_format = attrs.get("data_format", "NHWC")
    if data_format not in ("NCHW", "NHWC"):
        fail(node, f"data_format {data_format!r} is not supported (NCHW or NHWC)")
    if x.dim() != 4 or weight.dim() != 4:
        fail(node, f"x and filter must be 4-D, got {list(x.shape)} and {list(weight.shape)}")
    filter_format = input_layout(node, 1, "NCHW" if data_format == "NCHW" else "")
    if filter_format not in _FILTER_TO_OIHW:
        fail(node, f"filter layout {filter_format or 'ND'!r} is not supported (NCHW, NHWC or HWCN)")
    stride = _pair_from_4d(node, "strides", attrs["strides"], data_format, 1)
    dilation = _pair_from_4d(node, "dilations", attrs.get("dilations", [1, 1, 1, 1]), data_format, 1)
    pads = attrs["pads"]
    if len(pads) != 4 or any(p < 0 for p in pads):
        fail(node, f"pads must be 4 non-negative ints [top, bottom, left, right], got {pads}")
    top, bottom, left, right = pads
    groups = attrs.get("groups", 1)

    wide = opmath(x)
    if data_format == "NHWC":
        wide = wide.permute(0, 3, 1, 2)
    kernel = opmath(weight).permute(_FILTER_TO_OIHW[filter_format])
    if wide.shape[1] != kernel.shape[1] * groups or kernel.shape[0] % groups:
        fail(node, f"x has {wide.shape[1]} channels, filter {list(kernel.shape)} (OIHW) with groups={groups} "
                    "does not match")
    if top == bottom and left == right:  # symmetric: the call eager makes
        y = F.conv2d(wide, kernel, None, stride, (top, left), dilation, groups)
    else:
        wide = F.pad(wide, (left, right, top, bottom))  # zero padding, any asymmetry
        y = F.conv2d(wide, kernel, None, stride, 0, dilation, groups)
    if bias is not None:
        y = y + opmath(bias).reshape(1, -1, 1, 1)
    if data_format == "NHWC":
        y = y.permute(0, 2, 3, 1)
    return [y.to(x.dtype).contiguous()]


# ---- Conv3D and the transposed convolutions ----------------------------------------------------

_FLOATS = (torch.float16, torch.float32, torch.bfloat16)
# The prototypes list float16 (and int8 with quantisation) only; TorchAir emits these ops for float32
# and bfloat16 models too and CANN's convolution kernels (aclnnConvolution) take them, so the
# simulator accepts the three float types, computing in float32.


def _spatial_from_full(node, name, values, data_format, fill):
    """The spatial entries of a per-dim attr (strides, dilations, output_padding) in `data_format`;
    its N and C entries must be `fill`."""
    if len(values) != len(data_format):
        fail(node, f"{name} must have {len(data_format)} entries (one per {data_format} dim), got {values}")
    channel = data_format.index("C")
    if values[0] != fill or values[channel] != fill:
        fail(node, f"{name}={values}: the N and C entries must be {fill} for {data_format}")
    return [v for i, v in enumerate(values) if i not in (0, channel)]


def _checked_conv_inputs(node, inputs, attrs, x_index, formats, filter_formats):
    x, weight = inputs[x_index], inputs[x_index + 1]
    bias = inputs[x_index + 2] if len(inputs) > x_index + 2 else None
    if len(inputs) > x_index + 3 and inputs[x_index + 3] is not None:
        fail(node, "offset_w (int8 quantised weights) is not supported by the simulator")
    if attrs.get("offset_x", 0) != 0:
        fail(node, f"offset_x={attrs['offset_x']} (int8 quantisation) is not supported by the simulator")
    check_dtype(node, "x", x, _FLOATS)
    if weight.dtype != x.dtype:
        fail(node, f"filter dtype {weight.dtype} differs from x dtype {x.dtype}")
    data_format = attrs.get("data_format", formats[-1])
    if data_format not in formats:
        fail(node, f"data_format {data_format!r} is not supported ({' or '.join(formats)})")
    rank = len(data_format)
    if x.dim() != rank or weight.dim() != rank:
        fail(node, f"x and filter must be {rank}-D, got {list(x.shape)} and {list(weight.shape)}")
    filter_format = input_layout(node, x_index + 1, data_format)
    if filter_format not in filter_formats:
        fail(node, f"filter layout {filter_format!r} is not supported ({' or '.join(filter_formats)})")
    channels_last = data_format[1] != "C"
    wide = opmath(x).movedim(-1, 1) if channels_last else opmath(x)
    kernel = opmath(weight)
    if filter_format != filter_formats[0]:  # channels-last filter: [out, spatial..., in] -> [out, in, spatial...]
        kernel = kernel.movedim(-1, 1)
    return x, wide, kernel, bias, data_format, channels_last


def _finish(x, y, bias, channels_last):
    if bias is not None:
        y = y + opmath(bias).reshape(1, -1, *([1] * (y.dim() - 2)))
    if channels_last:
        y = y.movedim(1, -1)
    return [y.to(x.dtype).contiguous()]


@builtin_kernel("Conv3D")
def _conv3d(inputs, attrs, node):
    """y = conv3d(x, filter) + bias; pads are [front, back, top, bottom, left, right], any asymmetry."""
    x, wide, kernel, bias, data_format, channels_last = _checked_conv_inputs(
        node, inputs, attrs, 0, ("NCDHW", "NDHWC"), ("NCDHW", "NDHWC"))
    stride = _spatial_from_full(node, "strides", attrs["strides"], data_format, 1)
    dilation = _spatial_from_full(node, "dilations", attrs.get("dilations", [1] * 5), data_format, 1)
    pads, groups = attrs["pads"], attrs.get("groups", 1)
    if len(pads) != 6 or any(p < 0 for p in pads):
        fail(node, f"pads must be 6 non-negative ints [front, back, top, bottom, left, right], got {pads}")
    if groups <= 0 or wide.shape[1] != kernel.shape[1] * groups or kernel.shape[0] % groups:
        fail(node, f"x has {wide.shape[1]} channels, filter {list(kernel.shape)} (OIDHW) with groups={groups} "
                   "does not match")
    front, back, top, bottom, left, right = pads
    wide = F.pad(wide, (left, right, top, bottom, front, back))
    return _finish(x, F.conv3d(wide, kernel, None, stride, 0, dilation, groups), bias, channels_last)


def _conv_transpose(inputs, attrs, node, formats):
    """The transposed convolution whose output shape is input_size: the full transposed result, its
    leading pads cut and its trailing pads cut less output_padding (which adds rows at the end)."""
    x, wide, kernel, bias, data_format, channels_last = _checked_conv_inputs(node, inputs, attrs, 1, formats,
                                                                             (formats[0],))
    check_dtype(node, "input_size", inputs[0], (torch.int32, torch.int64))
    spatial = len(data_format) - 2
    stride = _spatial_from_full(node, "strides", attrs["strides"], data_format, 1)
    dilation = _spatial_from_full(node, "dilations", attrs.get("dilations", [1] * (spatial + 2)), data_format, 1)
    output_padding = _spatial_from_full(node, "output_padding",
                                        attrs.get("output_padding", [0] * (spatial + 2)), data_format, 0)
    pads, groups = attrs["pads"], attrs.get("groups", 1)
    if len(pads) != 2 * spatial or any(p < 0 for p in pads):
        fail(node, f"pads must be {2 * spatial} non-negative ints (before, after per spatial dim), got {pads}")
    if groups <= 0 or kernel.shape[0] != wide.shape[1] or wide.shape[1] % groups:
        fail(node, f"x has {wide.shape[1]} channels, filter {list(kernel.shape)} (in, out/groups, ...) "
                   f"with groups={groups} does not match")
    out_shape = int_list(inputs[0])
    if len(out_shape) != spatial + 2:
        fail(node, f"input_size {out_shape} must have {spatial + 2} entries ({data_format})")
    if channels_last:
        out_shape = [out_shape[0], out_shape[-1], *out_shape[1:-1]]
    transpose = F.conv_transpose2d if spatial == 2 else F.conv_transpose3d
    full = transpose(wide, kernel, None, stride, 0, 0, groups, dilation)
    if out_shape[:2] != list(full.shape[:2]):
        fail(node, f"input_size {int_list(inputs[0])} does not match the batch and channels of the result")
    index, extra = [slice(None), slice(None)], []
    for dim in range(spatial):
        before, after, size = pads[2 * dim], pads[2 * dim + 1], out_shape[2 + dim]
        if size != full.shape[2 + dim] - before - after + output_padding[dim]:
            fail(node, f"input_size {int_list(inputs[0])} disagrees with pads {pads} and output_padding "
                       f"{attrs.get('output_padding')} for a full result of {list(full.shape)}")
        index.append(slice(before, before + size))
        extra = [0, max(0, output_padding[dim] - after)] + extra  # F.pad lists the last dim first
    y = F.pad(full, extra)[tuple(index)]
    return _finish(x, y, bias, channels_last)


@builtin_kernel("Conv2DTranspose")
def _conv2d_transpose(inputs, attrs, node):
    """Transposed 2-D convolution (input_size, x, filter[, bias]); pads [top, bottom, left, right]."""
    return _conv_transpose(inputs, attrs, node, ("NCHW", "NHWC"))


@builtin_kernel("Conv3DTranspose")
def _conv3d_transpose(inputs, attrs, node):
    """Transposed 3-D convolution (input_size, x, filter[, bias]); pads [front, back, top, bottom, left, right]."""
    return _conv_transpose(inputs, attrs, node, ("NCDHW", "NDHWC"))

"""Convolution GE ops, forward and backward (CANN files them together in ops-nn ``conv/``): Conv2D,
Conv3D, Conv2DTranspose, Conv3DTranspose, Conv2DBackpropInput/Filter, Conv3DBackpropInput/Filter.
Pooling is in ``pooling/``.

Written from the ops' CANN prototypes (``REG_OP`` in TorchAir's ``auto_generated_ge_raw_ops.py``)
and from what TorchAir's aten converters put in the attrs (``ge_converter/aten/convolution.py``,
``convolution_backward.py``, TorchAir's ``_npu_conv3d`` / ``_npu_conv_transpose2d`` /
``_convolution_transpose3d_nocheck``). GE carries the tensor layout (NCHW, NHWC, ...) on each
input/output desc rather than in the data, so the kernels read it from ``node.input_desc[i].layout``.

A gradient is the vector-Jacobian product of the forward op the attrs describe, so the backprop
kernels build that forward with torch and take its VJP: the attrs (strides, pads, dilations,
groups, data_format) are all read by the forward they define.

16-bit float inputs are computed in float32 and rounded once, as the cube/vector units do.
Attr values the simulator does not implement are refused, never computed as something else.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from ...registry import ge_kernel, refuse
from ..common import input_layout, int_list, opmath

_FLOATS = (torch.float16, torch.float32, torch.bfloat16)
# The prototypes list float16 (and int8 with quantisation) only; TorchAir emits these ops for float32
# and bfloat16 models too and CANN's convolution kernels (aclnnConvolution) take them, so the
# simulator accepts the three float types, computing in float32. (Conv2D: int8 is in the prototype,
# but only with quantisation.)


def _refuse_quantisation(offset_w, offset_x):
    if offset_w is not None:
        refuse("offset_w (int8 quantised weights) is not supported by the simulator")
    if offset_x != 0:
        refuse(f"offset_x={offset_x} (int8 quantisation) is not supported by the simulator")


def _pair_from_4d(name, values, data_format, fill):
    """(h, w) of a 4-element NCHW/NHWC attr (strides, dilations); its N and C entries must be ``fill``."""
    if len(values) != 4:
        refuse(f"{name} must have 4 entries (one per {data_format} dim), got {values}")
    h_index, w_index = (2, 3) if data_format == "NCHW" else (1, 2)
    others = [values[i] for i in range(4) if i not in (h_index, w_index)]
    if any(v != fill for v in others):
        refuse(f"{name}={values}: the N and C entries must be {fill} for {data_format}")
    return values[h_index], values[w_index]


# ---- Conv2D ----------------------------------------------------------------------------------

# filter layout -> permutation to torch's [out, in/groups, kh, kw]
_FILTER_TO_OIHW = {"NCHW": (0, 1, 2, 3), "NHWC": (0, 3, 1, 2), "HWCN": (3, 2, 0, 1)}


@ge_kernel("Conv2D", accepts={"x": _FLOATS}, one_dtype=("x", "filter"), widen=True, prepared=True)
def conv2d(x, filter, bias, offset_w, *, strides, pads, dilations, groups, data_format, offset_x, node):
    """y = conv(x, filter) + bias; pads are [top, bottom, left, right] and may be asymmetric."""
    _refuse_quantisation(offset_w, offset_x)
    if data_format not in ("NCHW", "NHWC"):
        refuse(f"data_format {data_format!r} is not supported (NCHW or NHWC)")
    if x.dim() != 4 or filter.dim() != 4:
        refuse(f"x and filter must be 4-D, got {list(x.shape)} and {list(filter.shape)}")
    filter_format = input_layout(node, 1, "NCHW" if data_format == "NCHW" else "")
    if filter_format not in _FILTER_TO_OIHW:
        refuse(f"filter layout {filter_format or 'ND'!r} is not supported (NCHW, NHWC or HWCN)")
    stride = _pair_from_4d("strides", strides, data_format, 1)
    dilation = _pair_from_4d("dilations", dilations, data_format, 1)
    if len(pads) != 4 or any(p < 0 for p in pads):
        refuse(f"pads must be 4 non-negative ints [top, bottom, left, right], got {pads}")
    top, bottom, left, right = pads
    nhwc = data_format == "NHWC"
    channels = x.shape[3] if nhwc else x.shape[1]
    to_oihw = _FILTER_TO_OIHW[filter_format]
    oihw = [filter.shape[i] for i in to_oihw]
    if channels != oihw[1] * groups or oihw[0] % groups:
        refuse(f"x has {channels} channels, filter {oihw} (OIHW) with groups={groups} does not match")
    # A 1-D bias goes into the convolution, as eager's conv2d passes it.
    fused = bias is not None and bias.dim() == 1 and bias.dtype == x.dtype
    symmetric = top == bottom and left == right
    conv, padding = torch.conv2d, (top, left)
    if not nhwc and filter_format == "NCHW" and symmetric and (bias is None or fused):  # the call eager makes
        return lambda x, filter, bias, offset_w: conv(x, filter, bias, stride, padding, dilation, groups).contiguous()

    def call(x, filter, bias, offset_w):
        wide = x.permute(0, 3, 1, 2) if nhwc else x
        kernel = filter if filter_format == "NCHW" else filter.permute(to_oihw)
        if symmetric:
            y = conv(wide, kernel, bias if fused else None, stride, (top, left), dilation, groups)
        else:
            wide = F.pad(wide, (left, right, top, bottom))  # zero padding, any asymmetry
            y = conv(wide, kernel, bias if fused else None, stride, 0, dilation, groups)
        if bias is not None and not fused:
            y = y + bias.reshape(1, -1, 1, 1)
        if nhwc:
            y = y.permute(0, 2, 3, 1)
        return y.contiguous()

    return call


# ---- Conv3D and the transposed convolutions ----------------------------------------------------

def _spatial_from_full(name, values, data_format, fill):
    """The spatial entries of a per-dim attr (strides, dilations, output_padding) in `data_format`;
    its N and C entries must be `fill`."""
    if len(values) != len(data_format):
        refuse(f"{name} must have {len(data_format)} entries (one per {data_format} dim), got {values}")
    channel = data_format.index("C")
    if values[0] != fill or values[channel] != fill:
        refuse(f"{name}={values}: the N and C entries must be {fill} for {data_format}")
    return [v for i, v in enumerate(values) if i not in (0, channel)]


def _channels_first(node, x, weight, filter_index, data_format, formats, filter_formats):
    """x and the filter widened and moved to torch's channels-first layouts, after checking
    data_format, the ranks and the filter's layout; and whether x is channels last."""
    if data_format not in formats:
        refuse(f"data_format {data_format!r} is not supported ({' or '.join(formats)})")
    rank = len(data_format)
    if x.dim() != rank or weight.dim() != rank:
        refuse(f"x and filter must be {rank}-D, got {list(x.shape)} and {list(weight.shape)}")
    filter_format = input_layout(node, filter_index, data_format)
    if filter_format not in filter_formats:
        refuse(f"filter layout {filter_format!r} is not supported ({' or '.join(filter_formats)})")
    channels_last = data_format[1] != "C"
    wide = opmath(x).movedim(-1, 1) if channels_last else opmath(x)
    kernel = opmath(weight)
    if filter_format != filter_formats[0]:  # channels-last filter: [out, spatial..., in] -> [out, in, spatial...]
        kernel = kernel.movedim(-1, 1)
    return wide, kernel, channels_last


def _finish(dtype, y, bias, channels_last):
    if bias is not None:
        y = y + opmath(bias).reshape(1, -1, *([1] * (y.dim() - 2)))
    if channels_last:
        y = y.movedim(1, -1)
    return y.to(dtype).contiguous()


@ge_kernel("Conv3D", accepts={"x": _FLOATS}, one_dtype=("x", "filter"), widen=True)
def conv3d(x, filter, bias, offset_w, *, strides, pads, dilations, groups, data_format, offset_x, node):
    """y = conv3d(x, filter) + bias; pads are [front, back, top, bottom, left, right], any asymmetry."""
    _refuse_quantisation(offset_w, offset_x)
    formats = ("NCDHW", "NDHWC")
    wide, kernel, channels_last = _channels_first(node, x, filter, 1, data_format, formats, formats)
    stride = _spatial_from_full("strides", strides, data_format, 1)
    dilation = _spatial_from_full("dilations", dilations, data_format, 1)
    if len(pads) != 6 or any(p < 0 for p in pads):
        refuse(f"pads must be 6 non-negative ints [front, back, top, bottom, left, right], got {pads}")
    if groups <= 0 or wide.shape[1] != kernel.shape[1] * groups or kernel.shape[0] % groups:
        refuse(f"x has {wide.shape[1]} channels, filter {list(kernel.shape)} (OIDHW) with groups={groups} "
               "does not match")
    front, back, top, bottom, left, right = pads
    wide = F.pad(wide, (left, right, top, bottom, front, back))
    return _finish(x.dtype, F.conv3d(wide, kernel, None, stride, 0, dilation, groups), bias, channels_last)


def _conv_transpose(node, input_size, x, weight, bias, offset_w, attrs, formats):
    """The transposed convolution whose output shape is input_size: the full transposed result, its
    leading pads cut and its trailing pads cut less output_padding (which adds rows at the end)."""
    strides, pads, dilations, groups, data_format, output_padding, offset_x = attrs
    _refuse_quantisation(offset_w, offset_x)
    wide, kernel, channels_last = _channels_first(node, x, weight, 2, data_format, formats, (formats[0],))
    spatial = len(data_format) - 2
    stride = _spatial_from_full("strides", strides, data_format, 1)
    dilation = _spatial_from_full("dilations", dilations, data_format, 1)
    extra_rows = _spatial_from_full("output_padding", output_padding, data_format, 0)
    if len(pads) != 2 * spatial or any(p < 0 for p in pads):
        refuse(f"pads must be {2 * spatial} non-negative ints (before, after per spatial dim), got {pads}")
    if groups <= 0 or kernel.shape[0] != wide.shape[1] or wide.shape[1] % groups:
        refuse(f"x has {wide.shape[1]} channels, filter {list(kernel.shape)} (in, out/groups, ...) "
               f"with groups={groups} does not match")
    out_shape = int_list(input_size)
    if len(out_shape) != spatial + 2:
        refuse(f"input_size {out_shape} must have {spatial + 2} entries ({data_format})")
    if channels_last:
        out_shape = [out_shape[0], out_shape[-1], *out_shape[1:-1]]
    transpose = F.conv_transpose2d if spatial == 2 else F.conv_transpose3d
    full = transpose(wide, kernel, None, stride, 0, 0, groups, dilation)
    if out_shape[:2] != list(full.shape[:2]):
        refuse(f"input_size {int_list(input_size)} does not match the batch and channels of the result")
    index, extra = [slice(None), slice(None)], []
    for dim in range(spatial):
        before, after, size = pads[2 * dim], pads[2 * dim + 1], out_shape[2 + dim]
        if size != full.shape[2 + dim] - before - after + extra_rows[dim]:
            refuse(f"input_size {int_list(input_size)} disagrees with pads {pads} and output_padding "
                   f"{output_padding} for a full result of {list(full.shape)}")
        index.append(slice(before, before + size))
        extra = [0, max(0, extra_rows[dim] - after)] + extra  # F.pad lists the last dim first
    y = F.pad(full, extra)[tuple(index)]
    return _finish(x.dtype, y, bias, channels_last)


_INPUT_SIZE_DTYPES = (torch.int32, torch.int64)


@ge_kernel("Conv2DTranspose", accepts={"x": _FLOATS, "input_size": _INPUT_SIZE_DTYPES}, one_dtype=("x", "filter"))
def conv2d_transpose(input_size, x, filter, bias, offset_w, *, strides, pads, dilations, groups,
                     data_format, output_padding, offset_x, node):
    """Transposed 2-D convolution (input_size, x, filter[, bias]); pads [top, bottom, left, right]."""
    attrs = (strides, pads, dilations, groups, data_format, output_padding, offset_x)
    return _conv_transpose(node, input_size, x, filter, bias, offset_w, attrs, ("NCHW", "NHWC"))


@ge_kernel("Conv3DTranspose", accepts={"x": _FLOATS, "input_size": _INPUT_SIZE_DTYPES}, one_dtype=("x", "filter"))
def conv3d_transpose(input_size, x, filter, bias, offset_w, *, strides, pads, dilations, groups,
                     data_format, output_padding, offset_x, node):
    """Transposed 3-D convolution (input_size, x, filter[, bias]); pads [front, back, top, bottom, left, right]."""
    attrs = (strides, pads, dilations, groups, data_format, output_padding, offset_x)
    return _conv_transpose(node, input_size, x, filter, bias, offset_w, attrs, ("NCDHW", "NDHWC"))


# ---- backprop: the VJPs of Conv2D / Conv3D -------------------------------------------------------

_F16_F32_F64 = (torch.float16, torch.float32, torch.float64)
_CONV = {2: ("NCHW", "NHWC", F.conv2d), 3: ("NCDHW", "NDHWC", F.conv3d)}


def _conv_geometry(spatial, strides, pads, dilations, data_format):
    """(stride, dilation, pads per spatial dim as (before, after)) from the attrs."""
    channels_first, channels_last, _ = _CONV[spatial]
    if data_format not in (channels_first, channels_last):
        refuse(f"data_format {data_format!r} is not supported ({channels_first} or {channels_last})")
    rank = spatial + 2
    positions = list(range(2, rank)) if data_format == channels_first else list(range(1, rank - 1))
    values = {}
    for name, given in (("strides", strides), ("dilations", dilations)):
        if len(given) != rank:
            refuse(f"{name} must have {rank} entries (one per {data_format} dim), got {given}")
        if any(given[i] != 1 for i in range(rank) if i not in positions):
            refuse(f"{name}={given}: the N and C entries must be 1 for {data_format}")
        values[name] = [given[i] for i in positions]
    if len(pads) != 2 * spatial or any(p < 0 for p in pads):
        refuse(f"pads must be {2 * spatial} non-negative ints (before/after per spatial dim), got {pads}")
    pairs = [(pads[2 * i], pads[2 * i + 1]) for i in range(spatial)]
    return values["strides"], values["dilations"], pairs


def _to_channels_first(tensor, data_format, spatial):
    if data_format == _CONV[spatial][0]:
        return tensor
    return tensor.permute(0, tensor.dim() - 1, *range(1, tensor.dim() - 1))


def _from_channels_first(tensor, data_format, spatial):
    if data_format == _CONV[spatial][0]:
        return tensor
    return tensor.permute(0, *range(2, tensor.dim()), 1)


def _conv_vjp(x, weight, dy, geometry, spatial, wrt):
    """The VJP of y = conv(pad(x), weight) with the node's geometry, with respect to x or weight."""
    strides, pads, dilations, groups, data_format = geometry
    stride, dilation, pairs = _conv_geometry(spatial, strides, pads, dilations, data_format)
    conv = _CONV[spatial][2]
    x = _to_channels_first(x, data_format, spatial).detach().requires_grad_(wrt == "x")
    weight = weight.detach().requires_grad_(wrt == "filter")
    dy = _to_channels_first(dy, data_format, spatial)
    if x.shape[1] != weight.shape[1] * groups or weight.shape[0] % groups:
        refuse(f"x has {x.shape[1]} channels, filter {list(weight.shape)} with groups={groups} does not match")
    flat_pads = [p for pair in reversed(pairs) for p in pair]  # F.pad wants the last dim first
    with torch.enable_grad():
        y = conv(F.pad(x, flat_pads), weight, None, stride, 0, dilation, groups)
        if y.shape != dy.shape:
            refuse(f"out_backprop has shape {list(dy.shape)}, the convolution gives {list(y.shape)}")
        (grad,) = torch.autograd.grad(y, x if wrt == "x" else weight, dy)
    return grad


def _backprop_operands(spatial, known, size, dy):
    """Check a conv backprop's operands: the known tensor (x or filter, its dtype checked by the
    decorator) and out_backprop share a dtype, and all three (with the size operand's shape) have
    rank spatial + 2. Returns the size operand's shape."""
    (known_name, tensor), (size_name, size_tensor) = known, size
    if dy.dtype != tensor.dtype:
        refuse(f"out_backprop dtype {dy.dtype} differs from {known_name} dtype {tensor.dtype}")
    shape = int_list(size_tensor)
    if len(shape) != spatial + 2 or tensor.dim() != spatial + 2 or dy.dim() != spatial + 2:
        refuse(f"{size_name} {shape}, {known_name} {list(tensor.shape)} and out_backprop {list(dy.shape)} "
               f"must all be {spatial + 2}-D")
    return shape


def _conv_backprop_input(spatial):
    def conv_backprop_input(input_size, filter, out_backprop, *, strides, pads, dilations, groups,
                            data_format, node):
        """y = d(conv)/d(x) applied to out_backprop; input_size gives x's shape in data_format order."""
        shape = _backprop_operands(spatial, ("filter", filter), ("input_size", input_size), out_backprop)
        filter_layout = input_layout(node, 1, _CONV[spatial][0])
        if filter_layout != _CONV[spatial][0]:
            refuse(f"filter layout {filter_layout!r} is not supported ({_CONV[spatial][0]})")
        x = torch.zeros(shape, dtype=opmath(out_backprop).dtype)  # only its shape matters to the VJP
        geometry = (strides, pads, dilations, groups, data_format)
        grad = _conv_vjp(x, opmath(filter), opmath(out_backprop), geometry, spatial, "x")
        return _from_channels_first(grad, data_format, spatial).to(out_backprop.dtype).contiguous()

    conv_backprop_input.__name__ = f"conv{spatial}d_backprop_input"
    return conv_backprop_input


def _conv_backprop_filter(spatial):
    def conv_backprop_filter(x, filter_size, out_backprop, *, strides, pads, dilations, groups, data_format):
        """y = d(conv)/d(filter) applied to out_backprop; filter_size gives the filter's shape (OIHW/OIDHW)."""
        shape = _backprop_operands(spatial, ("x", x), ("filter_size", filter_size), out_backprop)
        weight = torch.zeros(shape, dtype=opmath(x).dtype)
        geometry = (strides, pads, dilations, groups, data_format)
        grad = _conv_vjp(opmath(x), weight, opmath(out_backprop), geometry, spatial, "filter")
        # The cube unit accumulates a filter gradient in float32 and TorchAir casts it back itself.
        return grad.to(torch.float32 if x.dtype in (torch.float16, torch.bfloat16) else x.dtype)

    conv_backprop_filter.__name__ = f"conv{spatial}d_backprop_filter"
    return conv_backprop_filter


ge_kernel("Conv2DBackpropInput", accepts={"filter": _F16_F32_F64})(_conv_backprop_input(2))
ge_kernel("Conv3DBackpropInput", accepts={"filter": _F16_F32_F64})(_conv_backprop_input(3))
ge_kernel("Conv2DBackpropFilter", accepts={"x": _F16_F32_F64})(_conv_backprop_filter(2))
ge_kernel("Conv3DBackpropFilter", accepts={"x": _F16_F32_F64})(_conv_backprop_filter(3))


def _spatial_pair(name, values) -> list[int]:
    """An attr of [h, w]; one value applies to both spatial dims."""
    values = int_list(values)
    if len(values) == 1:
        return values * 2
    if len(values) != 2:
        refuse(f"{name} must have 1 or 2 values, got {values}")
    return values


@ge_kernel("Im2col", accepts={"x": _FLOATS}, widen=True)
def im2col(x, *, ksizes, strides, dilations, padding_mode, pads, node):
    """CANN Im2col (REG_OP Im2col: input x, output y, attrs ksizes, strides={1}, dilations={1},
    padding_mode="CALCULATED", pads={0}), as torch_npu's eager im2col runs it (Ascend/op-plugin
    aclops/Im2colKernelNpu.cpp: x in NCHW, ksizes/strides/dilations [h, w], pads [top, bottom,
    left, right]): y [N, C * kh * kw, L], aten im2col's layout (F.unfold). One-element attrs
    apply to both spatial dims; padding modes other than CALCULATED and other layouts are refused."""
    if padding_mode != "CALCULATED":
        refuse(f"padding_mode {padding_mode!r} is not supported (CALCULATED)")
    layout = input_layout(node, 0, "NCHW")
    if layout != "NCHW" or x.dim() != 4:
        refuse(f"x must be a 4-D NCHW tensor, got layout {layout!r} and shape {list(x.shape)}")

    pads = int_list(pads)
    if len(pads) == 1:
        pads = pads * 4
    if len(pads) != 4:
        refuse(f"pads must have 1 or 4 values [top, bottom, left, right], got {pads}")
    padded = F.pad(x, (pads[2], pads[3], pads[0], pads[1]))
    return F.unfold(padded, _spatial_pair("ksizes", ksizes), dilation=_spatial_pair("dilations", dilations),
                    stride=_spatial_pair("strides", strides))


@ge_kernel("Col2im", accepts={"x": (torch.float16, torch.float32)}, widen=True)
def col2im(x, output_size, *, kernel_size, dilation, padding, stride):
    """CANN Col2im (REG_OP Col2im: inputs x (float16/float32) and output_size (int32), output y; required
    attrs kernel_size, dilation, padding, stride), as torch_npu's eager col2im runs it (Ascend/op-plugin
    aclops/Col2imKernelNpu.cpp: x viewed as [N, C, kh * kw, L], output_size [H, W], each attr [h, w]):
    y [N, C, H, W], every column's values summed back into the padded image (aten col2im, F.fold), the
    padding cropped. One-element attrs apply to both spatial dims."""
    if x.dim() != 4:
        refuse(f"x must be 4-D [N, C, kh * kw, L], got shape {list(x.shape)}")
    size = int_list(output_size)
    if len(size) != 2:
        refuse(f"output_size must hold [H, W], got {size}")

    kernel = _spatial_pair("kernel_size", kernel_size)
    if x.shape[2] != kernel[0] * kernel[1]:
        refuse(f"x's dim 2 ({x.shape[2]}) is not kh * kw = {kernel[0] * kernel[1]}")
    n, c, k, blocks = x.shape
    return F.fold(x.reshape(n, c * k, blocks), size, kernel, dilation=_spatial_pair("dilation", dilation),
                  padding=_spatial_pair("padding", padding), stride=_spatial_pair("stride", stride))

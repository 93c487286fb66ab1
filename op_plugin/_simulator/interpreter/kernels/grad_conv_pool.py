"""Backward GE ops of convolution and pooling: Conv2DBackpropInput/Filter, Conv3DBackpropInput/Filter,
MaxPoolGradWithArgmaxV1/V3, AvgPoolV2Grad, AdaptiveAvgPool2dGrad, GridSampler2DGrad.

Written from the CANN prototypes (REG_OP in TorchAir's ``auto_generated_ge_raw_ops.py``) and what
TorchAir's converters put in the attrs (``ge_converter/aten/convolution_backward.py``,
``max_pool2d_with_indices_backward.py``, ``avg_pool2d_backward.py``, ...). A gradient is the vector-
Jacobian product of the forward op the attrs describe, so the kernels build that forward with torch
and take its VJP: the attrs (strides, pads, dilations, groups, ceil_mode, ...) are all read by the
forward they define.

Argmax layouts: MaxPoolGradWithArgmaxV3 takes CANN's flat index into each input plane (h * W + w,
int32 or int64 by ``dtype``), as MaxPoolWithArgmaxV3 defines it. MaxPoolGradWithArgmaxV1 on an NPU
reads the hardware bit mask MaxPoolWithArgmaxV1 writes; the simulator's MaxPoolWithArgmaxV1 writes
flat plane indices instead (see conv_pool.py), and this kernel reads that stand-in. TorchAir always
pairs the two in one graph (the backward recomputes the forward), so the pair is consistent.

16-bit inputs are computed in float32 and rounded once.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from .common import check_dtype, fail, input_layout, int_list, opmath
from ..registry import builtin_kernel

_F16_F32_F64 = (torch.float16, torch.float32, torch.float64)


# ---- convolution --------------------------------------------------------------------------------

_CONV = {2: ("NCHW", "NHWC", F.conv2d), 3: ("NCDHW", "NDHWC", F.conv3d)}


def _conv_geometry(node, attrs, spatial):
    """(data_format, stride, dilation, pads per spatial dim as (before, after), groups) from the attrs."""
    channels_first, channels_last, _ = _CONV[spatial]
    data_format = attrs.get("data_format", channels_last)
    if data_format not in (channels_first, channels_last):
        fail(node, f"data_format {data_format!r} is not supported ({channels_first} or {channels_last})")
    rank = spatial + 2
    positions = list(range(2, rank)) if data_format == channels_first else list(range(1, rank - 1))
    values = {}
    for name, default in (("strides", None), ("dilations", [1] * rank)):
        given = attrs.get(name, default)
        if given is None or len(given) != rank:
            fail(node, f"{name} must have {rank} entries (one per {data_format} dim), got {given}")
        if any(given[i] != 1 for i in range(rank) if i not in positions):
            fail(node, f"{name}={given}: the N and C entries must be 1 for {data_format}")
        values[name] = [given[i] for i in positions]
    pads = attrs["pads"]
    if len(pads) != 2 * spatial or any(p < 0 for p in pads):
        fail(node, f"pads must be {2 * spatial} non-negative ints (before/after per spatial dim), got {pads}")
    pairs = [(pads[2 * i], pads[2 * i + 1]) for i in range(spatial)]
    return data_format, values["strides"], values["dilations"], pairs, attrs.get("groups", 1)


def _to_channels_first(tensor, data_format, spatial):
    if data_format == _CONV[spatial][0]:
        return tensor
    return tensor.permute(0, tensor.dim() - 1, *range(1, tensor.dim() - 1))


def _from_channels_first(tensor, data_format, spatial):
    if data_format == _CONV[spatial][0]:
        return tensor
    return tensor.permute(0, *range(2, tensor.dim()), 1)


def _conv_vjp(node, x, weight, dy, attrs, spatial, wrt):
    """The VJP of y = conv(pad(x), weight) with the node's geometry, with respect to x or weight."""
    data_format, stride, dilation, pairs, groups = _conv_geometry(node, attrs, spatial)
    conv = _CONV[spatial][2]
    x = _to_channels_first(x, data_format, spatial).detach().requires_grad_(wrt == "x")
    weight = weight.detach().requires_grad_(wrt == "filter")
    dy = _to_channels_first(dy, data_format, spatial)
    if x.shape[1] != weight.shape[1] * groups or weight.shape[0] % groups:
        fail(node, f"x has {x.shape[1]} channels, filter {list(weight.shape)} with groups={groups} does not match")
    flat_pads = [p for pair in reversed(pairs) for p in pair]  # F.pad wants the last dim first
    with torch.enable_grad():
        y = conv(F.pad(x, flat_pads), weight, None, stride, 0, dilation, groups)
        if y.shape != dy.shape:
            fail(node, f"out_backprop has shape {list(dy.shape)}, the convolution gives {list(y.shape)}")
        (grad,) = torch.autograd.grad(y, x if wrt == "x" else weight, dy)
    return grad


def _backprop_operands(node, spatial, known, size, dy):
    """Check a conv backprop's operands: the known tensor (x or filter) and out_backprop share a
    float dtype, and all three (with the size operand's shape) have rank spatial + 2. Returns the
    size operand's shape."""
    (known_name, tensor), (size_name, size_tensor) = known, size
    check_dtype(node, known_name, tensor, _F16_F32_F64)
    if dy.dtype != tensor.dtype:
        fail(node, f"out_backprop dtype {dy.dtype} differs from {known_name} dtype {tensor.dtype}")
    shape = int_list(size_tensor)
    if len(shape) != spatial + 2 or tensor.dim() != spatial + 2 or dy.dim() != spatial + 2:
        fail(node, f"{size_name} {shape}, {known_name} {list(tensor.shape)} and out_backprop {list(dy.shape)} "
                   f"must all be {spatial + 2}-D")
    return shape


def _conv_backprop_input(spatial):
    def kernel(inputs, attrs, node):
        """y = d(conv)/d(x) applied to out_backprop; input_size gives x's shape in data_format order."""
        input_size, weight, dy = inputs
        shape = _backprop_operands(node, spatial, ("filter", weight), ("input_size", input_size), dy)
        filter_layout = input_layout(node, 1, _CONV[spatial][0])
        if filter_layout != _CONV[spatial][0]:
            fail(node, f"filter layout {filter_layout!r} is not supported ({_CONV[spatial][0]})")
        data_format = attrs.get("data_format", _CONV[spatial][1])
        x = torch.zeros(shape, dtype=opmath(dy).dtype)  # only its shape matters to the VJP
        grad = _conv_vjp(node, x, opmath(weight), opmath(dy), attrs, spatial, "x")
        return [_from_channels_first(grad, data_format, spatial).to(dy.dtype).contiguous()]

    return kernel


def _conv_backprop_filter(spatial):
    def kernel(inputs, attrs, node):
        """y = d(conv)/d(filter) applied to out_backprop; filter_size gives the filter's shape (OIHW/OIDHW)."""
        x, filter_size, dy = inputs
        shape = _backprop_operands(node, spatial, ("x", x), ("filter_size", filter_size), dy)
        weight = torch.zeros(shape, dtype=opmath(x).dtype)
        grad = _conv_vjp(node, opmath(x), weight, opmath(dy), attrs, spatial, "filter")
        # The cube unit accumulates a filter gradient in float32 and TorchAir casts it back itself.
        return [grad.to(torch.float32 if x.dtype in (torch.float16, torch.bfloat16) else x.dtype)]

    return kernel


builtin_kernel("Conv2DBackpropInput")(_conv_backprop_input(2))
builtin_kernel("Conv3DBackpropInput")(_conv_backprop_input(3))
builtin_kernel("Conv2DBackpropFilter")(_conv_backprop_filter(2))
builtin_kernel("Conv3DBackpropFilter")(_conv_backprop_filter(3))


# ---- max pooling --------------------------------------------------------------------------------

def _pool_output_size(size, kernel, stride, pad, dilation, ceil_mode):
    """PyTorch's (and CANN's) pooled length, ceil_mode windows starting inside the padded input."""
    span = size + 2 * pad - dilation * (kernel - 1) - 1
    out = (span + (stride - 1 if ceil_mode else 0)) // stride + 1
    if ceil_mode and (out - 1) * stride >= size + pad:
        out -= 1
    return out


def _scatter_argmax(node, x, grad, argmax, geometry):
    """y[plane, argmax] += grad, after checking grad's spatial size against the pooling geometry."""
    kernel, stride, pad, dilation, ceil_mode = geometry
    if x.dim() != 4 or grad.dim() != 4 or argmax.shape != grad.shape:
        fail(node, f"x {list(x.shape)}, grad {list(grad.shape)} and argmax {list(argmax.shape)} must be 4-D NCHW, "
                   "grad and argmax of one shape")
    expected = [_pool_output_size(x.shape[2 + i], kernel[i], stride[i], pad[i], dilation[i], ceil_mode)
                for i in range(2)]
    if list(grad.shape[2:]) != expected or list(grad.shape[:2]) != list(x.shape[:2]):
        fail(node, f"grad has shape {list(grad.shape)}; pooling x {list(x.shape)} with ksize={kernel}, "
                   f"strides={stride}, pads={pad}, dilation={dilation}, ceil_mode={ceil_mode} gives "
                   f"{list(x.shape[:2]) + expected}")
    planes, area = x.shape[0] * x.shape[1], x.shape[2] * x.shape[3]
    index = argmax.reshape(planes, -1).long()
    if index.numel() and bool(((index < 0) | (index >= area)).any()):
        fail(node, f"argmax holds an index outside one input plane [0, {area})")
    out = torch.zeros(planes, area, dtype=torch.float32)
    out.scatter_add_(1, index, opmath(grad).float().reshape(planes, -1))
    return [out.reshape(x.shape).to(x.dtype)]


@builtin_kernel("MaxPoolGradWithArgmaxV1")
def _max_pool_grad_with_argmax_v1(inputs, attrs, node):
    """ksize/strides/pads/dilation are [1, h, w, 1] (pads' outer entries are placeholders, as TorchAir
    writes them); argmax is the simulator's flat plane index from MaxPoolWithArgmaxV1 (int32)."""
    x, grad, argmax = inputs
    check_dtype(node, "x", x, (torch.float16, torch.float32))
    check_dtype(node, "argmax", argmax, (torch.int32,))
    if attrs.get("dtype", 3) != 3:
        fail(node, f"argmax dtype {attrs['dtype']} is not supported (3, DT_INT32)")
    layout = input_layout(node, 0, "NCHW")
    if layout != "NCHW":
        fail(node, f"x layout {layout!r} is not supported (NCHW)")
    parts = {}
    for name, placeholders in (("ksize", (1,)), ("strides", (1,)), ("pads", (0, 1)), ("dilation", (1,))):
        values = attrs.get(name, [1, 1, 1, 1])
        if len(values) != 4 or values[0] not in placeholders or values[3] not in placeholders:
            fail(node, f"{name}={values}: expected 4 entries [1, h, w, 1]")
        parts[name] = values[1:3]
    geometry = (parts["ksize"], parts["strides"], parts["pads"], parts["dilation"], attrs.get("ceil_mode", False))
    return _scatter_argmax(node, x, grad, argmax, geometry)


@builtin_kernel("MaxPoolGradWithArgmaxV3")
def _max_pool_grad_with_argmax_v3(inputs, attrs, node):
    """ksize/strides/pads/dilation are [h, w]; argmax holds flat indices h * W + w into each input plane,
    in the dtype ``dtype`` names (3: int32, 9: int64)."""
    x, grad, argmax = inputs
    check_dtype(node, "x", x, (torch.float16, torch.float32, torch.bfloat16))
    wanted = {3: torch.int32, 9: torch.int64}.get(attrs.get("dtype", 3))
    if wanted is None:
        fail(node, f"dtype {attrs['dtype']} is not an argmax dtype (3: int32, 9: int64)")
    if argmax.dtype != wanted:
        fail(node, f"argmax has dtype {argmax.dtype}, the dtype attr says {wanted}")
    data_format = attrs.get("data_format", "NCHW")
    if data_format not in ("NCHW", "NHWC"):
        fail(node, f"data_format {data_format!r} is not supported (NCHW or NHWC)")
    parts = {}
    for name, default in (("ksize", None), ("strides", None), ("pads", None), ("dilation", [1, 1])):
        values = attrs.get(name, default)
        if values is None or len(values) not in (1, 2):
            fail(node, f"{name} must have 1 or 2 entries [h, w], got {values}")
        parts[name] = list(values) * (3 - len(values))
    geometry = (parts["ksize"], parts["strides"], parts["pads"], parts["dilation"], attrs.get("ceil_mode", False))
    if data_format == "NHWC":
        nchw = [t.permute(0, 3, 1, 2) for t in (x, grad, argmax)]
        (y,) = _scatter_argmax(node, *nchw, geometry)
        return [y.permute(0, 2, 3, 1).contiguous()]
    return _scatter_argmax(node, x, grad, argmax, geometry)


# ---- average pooling ------------------------------------------------------------------------------

@builtin_kernel("AvgPoolV2Grad")
def _avg_pool_v2_grad(inputs, attrs, node):
    """The gradient of AvgPoolV2: each pooled gradient spread evenly over its window, divided by the
    window's element count (exclusive: padding not counted), or by divisor_override when non-zero."""
    orig_shape, grad = inputs
    check_dtype(node, "input_grad", grad, (torch.float16, torch.float32, torch.float64, torch.bfloat16))
    shape = int_list(orig_shape)
    data_format = attrs.get("data_format", "NCHW")
    if data_format not in ("NCHW", "NHWC") or len(shape) != 4 or grad.dim() != 4:
        fail(node, f"data_format {data_format!r} with orig_input_shape {shape} and grad {list(grad.shape)}: "
                   "needs NCHW or NHWC 4-D")
    hw = (2, 3) if data_format == "NCHW" else (1, 2)
    ksize, strides = attrs["ksize"], attrs["strides"]
    if len(ksize) != 4 or len(strides) != 4:
        fail(node, f"ksize {ksize} and strides {strides} need 4 entries (one per {data_format} dim)")
    pads = attrs.get("pads", [0, 0, 0, 0])
    mode = attrs.get("padding_mode", "CALCULATED")
    if mode == "VALID":
        pads = [0, 0, 0, 0]
    elif mode != "CALCULATED":
        fail(node, f"padding_mode {mode!r} is not supported (CALCULATED or VALID)")
    if len(pads) != 4 or pads[0] != pads[1] or pads[2] != pads[3]:
        fail(node, f"pads {pads} must be symmetric [top, top, left, left] (the simulator has no asymmetric form)")
    kernel = [ksize[hw[0]], ksize[hw[1]]]
    stride = [strides[hw[0]], strides[hw[1]]]
    if attrs.get("global_pooling", False):
        kernel, stride, pads = [shape[hw[0]], shape[hw[1]]], [1, 1], [0, 0, 0, 0]
    divisor = attrs.get("divisor_override", 0) or None
    wide = opmath(grad)
    if data_format == "NHWC":
        wide = wide.permute(0, 3, 1, 2)
        shape = [shape[0], shape[3], shape[1], shape[2]]
    x = torch.zeros(shape, dtype=wide.dtype)
    expected = list(F.avg_pool2d(x, kernel, stride, [pads[0], pads[2]], attrs.get("ceil_mode", False)).shape)
    if list(wide.shape) != expected:
        fail(node, f"input_grad has shape {list(wide.shape)} (NCHW), the pooling gives {expected}")
    y = torch.ops.aten.avg_pool2d_backward(wide, x, kernel, stride, [pads[0], pads[2]], attrs.get("ceil_mode", False),
                                           not attrs.get("exclusive", True), divisor)
    if data_format == "NHWC":
        y = y.permute(0, 2, 3, 1)
    return [y.to(grad.dtype).contiguous()]


@builtin_kernel("AdaptiveAvgPool2dGrad")
def _adaptive_avg_pool2d_grad(inputs, attrs, node):
    """Each pooled gradient spread evenly over its adaptive window of the [N,] C, H, W input."""
    (grad,) = inputs
    check_dtype(node, "input_grad", grad, (torch.float32, torch.float16))
    shape = attrs["orig_input_shape"]
    if len(shape) not in (3, 4) or len(shape) != grad.dim() or list(shape[:-2]) != list(grad.shape[:-2]):
        fail(node, f"orig_input_shape {shape} does not match input_grad {list(grad.shape)}")
    x = torch.zeros(shape, dtype=torch.float32)
    return [torch.ops.aten._adaptive_avg_pool2d_backward(opmath(grad).float(), x).to(grad.dtype)]


# ---- grid sampling --------------------------------------------------------------------------------

_INTERPOLATION = {"bilinear": 0, "nearest": 1, "bicubic": 2}
_PADDING = {"zeros": 0, "border": 1, "reflection": 2}


@builtin_kernel("GridSampler2DGrad")
def _grid_sampler_2d_grad(inputs, attrs, node):
    """dx, dgrid of grid_sample(x [N, C, H, W], grid [N, Ho, Wo, 2]) for the given modes."""
    grad, x, grid = inputs
    check_dtype(node, "x", x, _F16_F32_F64)
    mode, padding = attrs.get("interpolation_mode", "bilinear"), attrs.get("padding_mode", "zeros")
    if mode not in _INTERPOLATION or padding not in _PADDING:
        fail(node, f"interpolation_mode {mode!r} / padding_mode {padding!r} not supported "
                   f"({'/'.join(_INTERPOLATION)}, {'/'.join(_PADDING)})")
    if x.dim() != 4 or grid.dim() != 4 or grid.shape[-1] != 2:
        fail(node, f"x {list(x.shape)} must be 4-D and grid {list(grid.shape)} [N, Ho, Wo, 2]")
    dx, dgrid = torch.ops.aten.grid_sampler_2d_backward(
        opmath(grad), opmath(x), opmath(grid), _INTERPOLATION[mode], _PADDING[padding],
        attrs.get("align_corners", False), [True, True])
    return [dx.to(x.dtype), dgrid.to(grid.dtype)]

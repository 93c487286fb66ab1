"""Fast calls of the convolution, batch-norm, padding, pooling and reduction kernels (kernels/conv.py,
norm_batch.py, pad.py, pooling_max.py, reduce.py), for float32/float64 data: each returns the aten call
the kernel makes on that path, with the kernel's attr arithmetic done once."""
from __future__ import annotations

import torch

from ..kernels.common import input_layout, int_list
from . import specialises

_WIDE = (torch.float32, torch.float64)  # dtypes the kernels compute in as they are (no widening)


@specialises("Conv2D")
def conv2d(x, filter, bias, offset_w, *, strides, pads, dilations, groups, data_format, offset_x, node):
    if (x.dtype not in _WIDE or filter.dtype != x.dtype or offset_w is not None or offset_x != 0
            or data_format != "NCHW" or input_layout(node, 1, "NCHW") != "NCHW" or len(pads) != 4):
        return None
    top, bottom, left, right = pads
    if top != bottom or left != right:
        return None
    fused = bias is not None and bias.dim() == 1 and bias.dtype == x.dtype
    if bias is not None and not fused:
        return None
    stride, dilation, padding = (strides[2], strides[3]), (dilations[2], dilations[3]), (top, left)
    conv = torch.conv2d

    def call(x, filter, bias, offset_w):
        return conv(x, filter, bias, stride, padding, dilation, groups).contiguous()

    return call


@specialises("BNInfer")
def bn_infer(x, scale, offset, mean, variance, *, epsilon, node):
    if (x.dtype != torch.float32 or input_layout(node, 0, "NCHW") != "NCHW"
            or any(t.dtype != torch.float32 for t in (scale, offset, mean, variance))):
        return None
    norm = torch.batch_norm
    # F.batch_norm's arguments after its Python checks: (input, weight, bias, running_mean, running_var,
    # training, momentum, eps, cudnn_enabled)
    enabled = torch.backends.cudnn.enabled

    def call(x, scale, offset, mean, variance):
        return norm(x, scale, offset, mean, variance, False, 0.0, epsilon, enabled)

    return call


@specialises("PadV3", reads_values=("paddings",))
def pad_v3(x, paddings, constant_values, *, mode, paddings_contiguous):
    if mode != "constant" or not (x.dtype.is_floating_point or x.dtype == torch.int64) or x.dim() == 0:
        return None
    if constant_values is not None and constant_values.dtype != x.dtype:
        return None  # the kernel converts the value per call: left to it
    flat = int_list(paddings)
    rank = x.dim()
    pairs = ([(flat[2 * i], flat[2 * i + 1]) for i in range(rank)] if paddings_contiguous
             else [(flat[i], flat[rank + i]) for i in range(rank)])
    if any(before < 0 or after < 0 for before, after in pairs) or not any(b or a for b, a in pairs):
        return None
    torch_pads = [p for before, after in reversed(pairs) for p in (before, after)]  # last dim first
    pad = torch.constant_pad_nd
    if constant_values is None:
        return lambda x, paddings, constant_values: pad(x, torch_pads, 0).contiguous()
    return lambda x, paddings, constant_values: pad(x, torch_pads, constant_values.item()).contiguous()


@specialises("ReduceMean", reads_values=("axes",))
def reduce_mean(x, axes, *, keep_dims, noop_with_empty_axes):
    dims = int_list(axes)
    if x.dtype not in _WIDE or not dims:
        return None
    return lambda x, axes: x.mean(dim=dims, keepdim=keep_dims)


@specialises("MaxPoolWithArgmaxV1")
def max_pool_with_argmax_v1(x, *, ksize, strides, pads, dtype, dilation, ceil_mode, node):
    if x.dtype != torch.float32 or x.dim() != 4 or input_layout(node, 0, "NCHW") != "NCHW" or dtype != 3:
        return None
    pool, int32 = torch._C._nn.max_pool2d_with_indices, torch.int32
    geometry = ((ksize[1], ksize[2]), (strides[1], strides[2]), (pads[1], pads[2]), (dilation[1], dilation[2]))

    def call(x):
        y, argmax = pool(x, *geometry, ceil_mode)
        return y, argmax.to(int32)

    return call


@specialises("Relu")
def relu(x):
    return torch.relu


@specialises("Swish")
def swish(x, *, scale):
    if x.dtype not in _WIDE or scale != 1.0:
        return None
    return torch._C._nn.silu

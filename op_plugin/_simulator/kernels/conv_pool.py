"""Convolution and pooling GE ops: Conv2D, MaxPoolWithArgmaxV1, AdaptiveAvgPool2d.

Written from the ops' CANN prototypes (``REG_OP`` in TorchAir's ``auto_generated_ge_raw_ops.py``)
and from what TorchAir's aten converters put in the attrs (``ge_converter/aten/convolution.py``,
``max_pool2d_with_indices.py``, ``_adaptive_avg_pool2d.py``). GE carries the tensor layout (NCHW, NHWC, ...) on each input/output
desc rather than in the data, so the kernels read it from ``node.input_desc[i].layout``.

16-bit float inputs are computed in float32 and rounded once, as the cube/vector units do.
Attr values the simulator does not implement raise ``ValueError`` naming the node, never
compute something else.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .common import check_dtype, fail, input_layout, opmath
from .registry import builtin_kernel



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
    wide = F.pad(wide, (left, right, top, bottom))  # zero padding, any asymmetry
    y = F.conv2d(wide, kernel, None, stride, 0, dilation, groups)
    if bias is not None:
        y = y + opmath(bias).reshape(1, -1, 1, 1)
    if data_format == "NHWC":
        y = y.permute(0, 2, 3, 1)
    return [y.to(x.dtype).contiguous()]


# ---- pooling ---------------------------------------------------------------------------------

@builtin_kernel("MaxPoolWithArgmaxV1")
def _max_pool_with_argmax_v1(inputs, attrs, node):
    """Max pooling of NCHW data; ksize/strides/pads/dilation are [1, h, w, 1] whatever the layout
    (TorchAir writes pads as [1, pad_h, pad_w, 1]: positions 0 and 3 are placeholders).

    ``argmax``: the NPU writes a hardware bit mask (uint16, 5HD tiling) that only its own backward
    kernel reads; TorchAir's converter never consumes it (it returns Identity(y) cast to int64 as
    the FX indices). The simulator returns PyTorch-style flat indices (h * W + w) in int32 there:
    a stand-in with the right dtype, not the NPU's mask layout.
    """
    x = inputs[0]
    check_dtype(node, "x", x, (torch.float16, torch.float32))
    layout = input_layout(node, 0, "NCHW")
    if layout != "NCHW":
        fail(node, f"x layout {layout!r} is not supported (NCHW)")
    if x.dim() != 4:
        fail(node, f"x must be 4-D NCHW, got shape {list(x.shape)}")
    ksize, strides, pads = attrs["ksize"], attrs["strides"], attrs["pads"]
    dilation = attrs.get("dilation", [1, 1, 1, 1])
    for name, values, placeholders in (("ksize", ksize, (1,)), ("strides", strides, (1,)),
                                       ("dilation", dilation, (1,)), ("pads", pads, (0, 1))):
        if len(values) != 4 or values[0] not in placeholders or values[3] not in placeholders:
            fail(node, f"{name}={values}: expected 4 entries [{placeholders[-1]}, h, w, {placeholders[-1]}]")
    if attrs.get("dtype", 3) != 3:  # DT_INT32; the prototype's other argmax type is uint16
        fail(node, f"argmax dtype {attrs['dtype']} is not supported (3, DT_INT32)")
    y, argmax = F.max_pool2d(opmath(x), kernel_size=ksize[1:3], stride=strides[1:3], padding=pads[1:3],
                             dilation=dilation[1:3], ceil_mode=attrs.get("ceil_mode", False), return_indices=True)
    return [y.to(x.dtype), argmax.to(torch.int32)]


@builtin_kernel("AdaptiveAvgPool2d")
def _adaptive_avg_pool2d(inputs, attrs, node):
    """Average over the adaptive windows of the last two dims ([N,] C, H, W), as aten does."""
    x = inputs[0]
    check_dtype(node, "x", x, (torch.float32, torch.float16, torch.bfloat16))
    output_size = attrs["output_size"]
    if len(output_size) != 2 or any(s <= 0 for s in output_size):
        fail(node, f"output_size must be two positive ints, got {output_size}")
    if x.dim() not in (3, 4):
        fail(node, f"x must be 3-D or 4-D, got shape {list(x.shape)}")
    return [F.adaptive_avg_pool2d(opmath(x), output_size).to(x.dtype)]

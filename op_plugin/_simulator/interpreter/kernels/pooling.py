"""Pooling GE ops: AvgPoolV2, MaxPoolWithArgmaxV1/V3, MaxPool3DWithArgmaxV2, AdaptiveAvgPool2d.

Written from the ops' CANN prototypes (``REG_OP`` in TorchAir's ``auto_generated_ge_raw_ops.py``), the
hicann ops-nn kernels (``pooling/max_pool_with_argmax_v3``) and what TorchAir's converters put in the
attrs (``ge_converter/aten/avg_pool2d.py``, ``max_pool2d_with_indices.py``,
``max_pool3d_with_indices.py``, ``_adaptive_avg_pool2d.py``).

Argmax layouts (the backward kernels in grad_conv_pool.py consume them):
* MaxPoolWithArgmaxV3: the flat index h * W + w of the maximum inside its own (n, c) input plane,
  for NCHW and NHWC alike (ops-nn's NHWC kernel divides the channel stride out), int32 or int64 by
  the ``dtype`` attr; with several equal maxima the first in window order, NaN counting as largest.
* MaxPool3DWithArgmaxV2: the flat index (d * H + h) * W + w inside the (n, c) input volume.
* MaxPoolWithArgmaxV1: see its docstring (a stand-in for the NPU's bit mask).

16-bit float inputs are computed in float32 and rounded once. Attr values the simulator does not
implement raise ``ValueError`` naming the node, never compute something else.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from .common import check_dtype, fail, input_layout, opmath
from ..registry import builtin_kernel

_ARGMAX_DTYPES = {3: torch.int32, 9: torch.int64}  # GE enum: DT_INT32, DT_INT64


def _spatial_list(node, name, values, count):
    """An attr of `count` spatial entries; a single entry stands for all of them (as aten's int args)."""
    values = list(values)
    if len(values) == 1:
        values = values * count
    if len(values) != count:
        fail(node, f"{name} must have {count} entries, got {values}")
    return values


def _argmax_dtype(node, attrs, default=3):
    number = attrs.get("dtype", default)
    if number not in _ARGMAX_DTYPES:
        fail(node, f"dtype {number} is not an argmax dtype (3: int32, 9: int64)")
    return _ARGMAX_DTYPES[number]


def _data_format(node, attrs, allowed, default):
    data_format = attrs.get("data_format", default)
    if data_format not in allowed:
        fail(node, f"data_format {data_format!r} is not supported ({', '.join(allowed)})")
    layout = input_layout(node, 0, data_format)
    if layout != data_format:
        fail(node, f"x layout {layout!r} differs from data_format {data_format!r}")
    return data_format


# ---- average pooling --------------------------------------------------------------------------

def _out_size(size, k, s, before, after, ceil_mode):
    """aten/CANN pooling output length; with ceil_mode the last window must start inside the input
    or its leading pad."""
    span = size + before + after - k
    out = (math.ceil(span / s) if ceil_mode else span // s) + 1
    if ceil_mode and (out - 1) * s >= size + before:
        out -= 1
    return out


def _windows(t, dims, ks, ss, outs):
    """t unfolded into [..., out_0, out_1, k_0, k_1] windows over the two `dims`, zero-filled past the end."""
    need = [(o - 1) * s + k for o, s, k in zip(outs, ss, ks)]
    extra = [max(0, n - t.shape[d]) for n, d in zip(need, dims)]
    t = F.pad(t, (0, extra[1], 0, extra[0]))
    return t.unfold(dims[0], ks[0], ss[0]).unfold(dims[1], ks[1], ss[1])


@builtin_kernel("AvgPoolV2")
def _avg_pool_v2(inputs, attrs, node):
    """Mean over ksize windows of the H and W dims. pads are [top, bottom, left, right] (zeros) with
    padding_mode CALCULATED; SAME / VALID compute them as TF does. exclusive=True divides by the
    number of input elements in the window, False by the window clipped to the padded input;
    divisor_override (non-zero) replaces either. global_pooling averages the whole plane."""
    x = inputs[0]
    check_dtype(node, "x", x, (torch.float16, torch.float32, torch.float64))
    data_format = _data_format(node, attrs, ("NCHW", "NHWC"), "NCHW")
    if x.dim() != 4:
        fail(node, f"x must be 4-D {data_format}, got shape {list(x.shape)}")
    wide = opmath(x) if data_format == "NCHW" else opmath(x).permute(0, 3, 1, 2)
    height, width = wide.shape[2:]
    ksize, strides = attrs["ksize"], attrs["strides"]
    if len(ksize) != 4 or len(strides) != 4:
        fail(node, f"ksize {ksize} and strides {strides} must have 4 entries (one per {data_format} dim)")
    hw = (2, 3) if data_format == "NCHW" else (1, 2)
    if any(ksize[i] != 1 or strides[i] != 1 for i in range(4) if i not in hw):
        fail(node, f"ksize {ksize} / strides {strides}: the N and C entries must be 1")
    ks, ss = [ksize[i] for i in hw], [strides[i] for i in hw]
    pads, ceil_mode = list(attrs.get("pads", [0, 0, 0, 0])), attrs.get("ceil_mode", False)
    padding_mode = attrs.get("padding_mode", "CALCULATED")
    if attrs.get("global_pooling", False):
        ks, ss, pads, ceil_mode = [height, width], [1, 1], [0, 0, 0, 0], False
    elif padding_mode == "SAME":
        pads = []
        for size, k, s in zip((height, width), ks, ss):
            total = max((math.ceil(size / s) - 1) * s + k - size, 0)
            pads += [total // 2, total - total // 2]
        ceil_mode = False
    elif padding_mode == "VALID":
        pads, ceil_mode = [0, 0, 0, 0], False  # TF VALID: ceil((size - k + 1) / s) windows
    elif padding_mode != "CALCULATED":
        fail(node, f"padding_mode {padding_mode!r} is not CALCULATED, SAME or VALID")
    if len(pads) != 4 or any(p < 0 for p in pads) or any(k <= 0 for k in ks) or any(s <= 0 for s in ss):
        fail(node, f"pads {pads} must be 4 non-negative ints, ksize and strides positive")
    top, bottom, left, right = pads
    outs = [_out_size(height, ks[0], ss[0], top, bottom, ceil_mode),
            _out_size(width, ks[1], ss[1], left, right, ceil_mode)]
    if min(outs) <= 0:
        fail(node, f"the window {ks} does not fit the padded {height}x{width} input")
    divisor_override = attrs.get("divisor_override", 0)
    if top == bottom <= ks[0] // 2 and left == right <= ks[1] // 2:
        # The op eager calls (aten.avg_pool2d): the same windows (ceil_mode: the last one starts in
        # the input), count_include_pad=False is exclusive, True divides by the window clipped to
        # the padded input, as CANN's exclusive=False does.
        y = F.avg_pool2d(wide, ks, ss, (top, left), ceil_mode, not attrs.get("exclusive", True),
                         divisor_override or None)
        return [(y.permute(0, 2, 3, 1) if data_format == "NHWC" else y).to(x.dtype).contiguous()]
    padded = F.pad(wide, (left, right, top, bottom))
    sums = _windows(padded, (2, 3), ks, ss, outs).sum((-1, -2))
    if divisor_override:
        y = sums / divisor_override
    elif attrs.get("exclusive", True):
        mask = F.pad(torch.ones(1, 1, height, width), (left, right, top, bottom))
        counts = _windows(mask, (2, 3), ks, ss, outs).sum((-1, -2))
        if bool((counts == 0).any()):
            fail(node, "a window lies wholly in the padding: its exclusive mean is undefined")
        y = sums / counts
    else:
        spans = []
        for out, k, s, size in zip(outs, ks, ss, (height + top + bottom, width + left + right)):
            start = torch.arange(out) * s
            spans.append(torch.clamp(start + k, max=size) - start)
        y = sums / (spans[0][:, None] * spans[1][None, :])
    if data_format == "NHWC":
        y = y.permute(0, 2, 3, 1)
    return [y.to(x.dtype).contiguous()]


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


# ---- max pooling with argmax ------------------------------------------------------------------

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


def _max_pool_geometry(node, attrs, count):
    ksize = _spatial_list(node, "ksize", attrs["ksize"], count)
    strides = _spatial_list(node, "strides", attrs["strides"], count)
    pads = _spatial_list(node, "pads", attrs["pads"], count)
    dilation = _spatial_list(node, "dilation", attrs.get("dilation", [1] * count), count)
    if any(k <= 0 for k in ksize) or any(s <= 0 for s in strides) or any(d <= 0 for d in dilation):
        fail(node, f"ksize {ksize}, strides {strides} and dilation {dilation} must be positive")
    if any(p < 0 or 2 * p > k for p, k in zip(pads, ksize)):
        fail(node, f"pads {pads} must be in [0, ksize / 2] (ksize {ksize})")
    return dict(kernel_size=ksize, stride=strides, padding=pads, dilation=dilation,
                ceil_mode=attrs.get("ceil_mode", False), return_indices=True)


_MAX_POOL_DTYPES = (torch.float16, torch.float32, torch.bfloat16)


@builtin_kernel("MaxPoolWithArgmaxV3")
def _max_pool_with_argmax_v3(inputs, attrs, node):
    """2-D max pooling; ksize/strides/pads/dilation are [h, w] (pads symmetric, -inf filled);
    argmax is the flat h * W + w input index of each maximum within its plane (module docstring)."""
    x = inputs[0]
    check_dtype(node, "x", x, _MAX_POOL_DTYPES)
    data_format = _data_format(node, attrs, ("NCHW", "NHWC"), "NCHW")
    argmax_dtype = _argmax_dtype(node, attrs)
    if x.dim() not in (3, 4):
        fail(node, f"x must be 3-D or 4-D {data_format}, got shape {list(x.shape)}")
    geometry = _max_pool_geometry(node, attrs, 2)
    wide = opmath(x)
    if data_format == "NHWC":
        wide = wide.movedim(-1, -3)
    y, argmax = F.max_pool2d(wide, **geometry)
    if data_format == "NHWC":
        y, argmax = y.movedim(-3, -1), argmax.movedim(-3, -1)
    return [y.to(x.dtype).contiguous(), argmax.to(argmax_dtype).contiguous()]


@builtin_kernel("MaxPool3DWithArgmaxV2")
def _max_pool3d_with_argmax_v2(inputs, attrs, node):
    """3-D max pooling of NCDHW data; ksize/strides/pads/dilation are [d, h, w]; argmax is the flat
    (d * H + h) * W + w input index of each maximum within its (n, c) volume."""
    x = inputs[0]
    check_dtype(node, "x", x, _MAX_POOL_DTYPES)
    _data_format(node, attrs, ("NCDHW",), "NCDHW")
    argmax_dtype = _argmax_dtype(node, attrs)
    if x.dim() not in (4, 5):
        fail(node, f"x must be 4-D or 5-D NCDHW, got shape {list(x.shape)}")
    y, argmax = F.max_pool3d(opmath(x), **_max_pool_geometry(node, attrs, 3))
    return [y.to(x.dtype), argmax.to(argmax_dtype)]

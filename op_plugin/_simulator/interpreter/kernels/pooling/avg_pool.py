"""Average pooling GE ops, forward and backward (CANN files them together in ops-nn ``pooling/``):
AvgPoolV2, AvgPoolV2Grad, AdaptiveAvgPool2d, AdaptiveAvgPool2dGrad. Max pooling with argmax is in
max_pool.py (split by sub-concept: the argmax layouts the max pair shares are its own topic).

Written from the ops' CANN prototypes (``REG_OP`` in TorchAir's ``auto_generated_ge_raw_ops.py``) and
what TorchAir's converters put in the attrs (``ge_converter/aten/avg_pool2d.py``,
``avg_pool2d_backward.py``, ``_adaptive_avg_pool2d.py``, ``_adaptive_avg_pool2d_backward.py``). A
gradient is the vector-Jacobian product of the forward op the attrs describe.

16-bit float inputs are computed in float32 and rounded once. Attr values the simulator does not
implement are refused, never computed as something else.
"""
from __future__ import annotations

import math
import torch
import torch.nn.functional as F
from ...registry import ge_kernel, refuse
from ..common import input_layout, int_list, opmath

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
    need = [(o - 1) * s + k for o, s, k in zip(outs, ss, ks, strict=True)]
    extra = [max(0, n - t.shape[d]) for n, d in zip(need, dims, strict=True)]
    t = F.pad(t, (0, extra[1], 0, extra[0]))
    return t.unfold(dims[0], ks[0], ss[0]).unfold(dims[1], ks[1], ss[1])


@ge_kernel("AvgPoolV2", accepts={"x": (torch.float16, torch.float32, torch.float64)}, widen=True)
def avg_pool_v2(x, *, ksize, strides, padding_mode, pads, data_format, global_pooling, ceil_mode, exclusive,
                divisor_override, node):
    """Mean over ksize windows of the H and W dims. pads are [top, bottom, left, right] (zeros) with
    padding_mode CALCULATED; SAME / VALID compute them as TF does. exclusive=True divides by the
    number of input elements in the window, False by the window clipped to the padded input;
    divisor_override (non-zero) replaces either. global_pooling averages the whole plane."""
    if data_format not in ("NCHW", "NHWC"):
        refuse(f"data_format {data_format!r} is not supported (NCHW, NHWC)")
    layout = input_layout(node, 0, data_format)
    if layout != data_format:
        refuse(f"x layout {layout!r} differs from data_format {data_format!r}")
    if x.dim() != 4:
        refuse(f"x must be 4-D {data_format}, got shape {list(x.shape)}")
    wide = x if data_format == "NCHW" else x.permute(0, 3, 1, 2)
    height, width = wide.shape[2:]
    if len(ksize) != 4 or len(strides) != 4:
        refuse(f"ksize {ksize} and strides {strides} must have 4 entries (one per {data_format} dim)")
    hw = (2, 3) if data_format == "NCHW" else (1, 2)
    if any(ksize[i] != 1 or strides[i] != 1 for i in range(4) if i not in hw):
        refuse(f"ksize {ksize} / strides {strides}: the N and C entries must be 1")
    ks, ss = [ksize[i] for i in hw], [strides[i] for i in hw]
    pads = list(pads)
    if global_pooling:
        ks, ss, pads, ceil_mode = [height, width], [1, 1], [0, 0, 0, 0], False
    elif padding_mode == "SAME":
        pads = []
        for size, k, s in zip((height, width), ks, ss, strict=True):
            total = max((math.ceil(size / s) - 1) * s + k - size, 0)
            pads += [total // 2, total - total // 2]
        ceil_mode = False
    elif padding_mode == "VALID":
        pads, ceil_mode = [0, 0, 0, 0], False  # TF VALID: ceil((size - k + 1) / s) windows
    elif padding_mode != "CALCULATED":
        refuse(f"padding_mode {padding_mode!r} is not CALCULATED, SAME or VALID")
    if len(pads) != 4 or any(p < 0 for p in pads) or any(k <= 0 for k in ks) or any(s <= 0 for s in ss):
        refuse(f"pads {pads} must be 4 non-negative ints, ksize and strides positive")
    top, bottom, left, right = pads
    outs = [_out_size(height, ks[0], ss[0], top, bottom, ceil_mode),
            _out_size(width, ks[1], ss[1], left, right, ceil_mode)]
    if min(outs) <= 0:
        refuse(f"the window {ks} does not fit the padded {height}x{width} input")
    if top == bottom <= ks[0] // 2 and left == right <= ks[1] // 2:
        # The op eager calls (aten.avg_pool2d): the same windows (ceil_mode: the last one starts in
        # the input), count_include_pad=False is exclusive, True divides by the window clipped to
        # the padded input, as CANN's exclusive=False does.
        y = F.avg_pool2d(wide, ks, ss, (top, left), ceil_mode, not exclusive, divisor_override or None)
        return (y.permute(0, 2, 3, 1) if data_format == "NHWC" else y).contiguous()
    padded = F.pad(wide, (left, right, top, bottom))
    sums = _windows(padded, (2, 3), ks, ss, outs).sum((-1, -2))
    if divisor_override:
        y = sums / divisor_override
    elif exclusive:
        mask = F.pad(torch.ones(1, 1, height, width), (left, right, top, bottom))
        counts = _windows(mask, (2, 3), ks, ss, outs).sum((-1, -2))
        if bool((counts == 0).any()):
            refuse("a window lies wholly in the padding: its exclusive mean is undefined")
        y = sums / counts
    else:
        spans = []
        for out, k, s, size in zip(outs, ks, ss, (height + top + bottom, width + left + right), strict=True):
            start = torch.arange(out) * s
            spans.append(torch.clamp(start + k, max=size) - start)
        y = sums / (spans[0][:, None] * spans[1][None, :])
    if data_format == "NHWC":
        y = y.permute(0, 2, 3, 1)
    return y.contiguous()


@ge_kernel("AvgPoolV2Grad", accepts={"input_grad": (torch.float16, torch.float32, torch.float64, torch.bfloat16)})
def avg_pool_v2_grad(orig_input_shape, input_grad, *, ksize, strides, padding_mode, pads, data_format,
                     global_pooling, ceil_mode, exclusive, divisor_override):
    """The gradient of AvgPoolV2: each pooled gradient spread evenly over its window, divided by the
    window's element count (exclusive: padding not counted), or by divisor_override when non-zero."""
    grad = input_grad
    shape = int_list(orig_input_shape)
    if data_format not in ("NCHW", "NHWC") or len(shape) != 4 or grad.dim() != 4:
        refuse(f"data_format {data_format!r} with orig_input_shape {shape} and grad {list(grad.shape)}: "
               "needs NCHW or NHWC 4-D")
    hw = (2, 3) if data_format == "NCHW" else (1, 2)
    if len(ksize) != 4 or len(strides) != 4:
        refuse(f"ksize {ksize} and strides {strides} need 4 entries (one per {data_format} dim)")
    if padding_mode == "VALID":
        pads = [0, 0, 0, 0]
    elif padding_mode != "CALCULATED":
        refuse(f"padding_mode {padding_mode!r} is not supported (CALCULATED or VALID)")
    if len(pads) != 4 or pads[0] != pads[1] or pads[2] != pads[3]:
        refuse(f"pads {pads} must be symmetric [top, top, left, left] (the simulator has no asymmetric form)")
    kernel = [ksize[hw[0]], ksize[hw[1]]]
    stride = [strides[hw[0]], strides[hw[1]]]
    if global_pooling:
        kernel, stride, pads = [shape[hw[0]], shape[hw[1]]], [1, 1], [0, 0, 0, 0]
    divisor = divisor_override or None
    wide = opmath(grad)
    if data_format == "NHWC":
        wide = wide.permute(0, 3, 1, 2)
        shape = [shape[0], shape[3], shape[1], shape[2]]
    x = torch.zeros(shape, dtype=wide.dtype)
    expected = list(F.avg_pool2d(x, kernel, stride, [pads[0], pads[2]], ceil_mode).shape)
    if list(wide.shape) != expected:
        refuse(f"input_grad has shape {list(wide.shape)} (NCHW), the pooling gives {expected}")
    y = torch.ops.aten.avg_pool2d_backward(wide, x, kernel, stride, [pads[0], pads[2]], ceil_mode,
                                           not exclusive, divisor)
    if data_format == "NHWC":
        y = y.permute(0, 2, 3, 1)
    return y.to(grad.dtype).contiguous()


# ---- adaptive average pooling ---------------------------------------------------------------------

@ge_kernel("AdaptiveAvgPool2d", accepts={"x": (torch.float32, torch.float16, torch.bfloat16)}, widen=True)
def adaptive_avg_pool2d(x, *, output_size):
    """Average over the adaptive windows of the last two dims ([N,] C, H, W), as aten does."""
    if len(output_size) != 2 or any(s <= 0 for s in output_size):
        refuse(f"output_size must be two positive ints, got {output_size}")
    if x.dim() not in (3, 4):
        refuse(f"x must be 3-D or 4-D, got shape {list(x.shape)}")
    return F.adaptive_avg_pool2d(x, output_size)


@ge_kernel("AdaptiveAvgPool2dGrad", accepts={"input_grad": (torch.float32, torch.float16)}, widen=True)
def adaptive_avg_pool2d_grad(input_grad, *, orig_input_shape):
    """Each pooled gradient spread evenly over its adaptive window of the [N,] C, H, W input."""
    shape = orig_input_shape
    if len(shape) not in (3, 4) or len(shape) != input_grad.dim() or list(shape[:-2]) != list(input_grad.shape[:-2]):
        refuse(f"orig_input_shape {shape} does not match input_grad {list(input_grad.shape)}")
    x = torch.zeros(shape, dtype=torch.float32)
    return torch.ops.aten._adaptive_avg_pool2d_backward(input_grad.float(), x)

"""Max pooling GE ops with argmax, forward and backward (CANN files them together in ops-nn
``pooling/``): MaxPoolWithArgmaxV1, MaxPoolWithArgmaxV3, MaxPool3DWithArgmaxV2,
MaxPoolGradWithArgmaxV1, MaxPoolGradWithArgmaxV3. Average pooling is in avg_pool.py; this module is
split from it by sub-concept: each backward here reads the argmax layout its forward writes.

Written from the ops' CANN prototypes (``REG_OP`` in TorchAir's ``auto_generated_ge_raw_ops.py``), the
hicann ops-nn kernels (``pooling/max_pool_with_argmax_v3``) and what TorchAir's converters put in the
attrs (``ge_converter/aten/max_pool2d_with_indices.py``, ``max_pool3d_with_indices.py``,
``max_pool2d_with_indices_backward.py``). A gradient is the vector-Jacobian product of the forward
op the attrs describe.

Argmax layouts:
* MaxPoolWithArgmaxV3: the flat index h * W + w of the maximum inside its own (n, c) input plane,
  for NCHW and NHWC alike (ops-nn's NHWC kernel divides the channel stride out), int32 or int64 by
  the ``dtype`` attr; with several equal maxima the first in window order, NaN counting as largest.
  MaxPoolGradWithArgmaxV3 takes that index, as MaxPoolWithArgmaxV3 defines it.
* MaxPool3DWithArgmaxV2: the flat index (d * H + h) * W + w inside the (n, c) input volume.
* MaxPoolWithArgmaxV1: on an NPU a hardware bit mask that only MaxPoolGradWithArgmaxV1 reads; the
  simulator's MaxPoolWithArgmaxV1 writes flat plane indices instead (see its docstring), and
  MaxPoolGradWithArgmaxV1 reads that stand-in. TorchAir always pairs the two in one graph (the
  backward recomputes the forward), so the pair is consistent.

16-bit float inputs are computed in float32 and rounded once. Attr values the simulator does not
implement are refused, never computed as something else.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from ...registry import ge_kernel, refuse
from ..common import input_layout, opmath

_ARGMAX_DTYPES = {3: torch.int32, 9: torch.int64}  # GE enum: DT_INT32, DT_INT64
_MAX_POOL_DTYPES = (torch.float16, torch.float32, torch.bfloat16)
_F16_F32 = (torch.float16, torch.float32)


def _spatial_list(name, values, count):
    """An attr of `count` spatial entries; a single entry stands for all of them (as aten's int args)."""
    values = list(values)
    if len(values) == 1:
        values = values * count
    if len(values) != count:
        refuse(f"{name} must have {count} entries, got {values}")
    return values


def _argmax_dtype(number):
    if number not in _ARGMAX_DTYPES:
        refuse(f"dtype {number} is not an argmax dtype (3: int32, 9: int64)")
    return _ARGMAX_DTYPES[number]


def _data_format(node, data_format, allowed):
    if data_format not in allowed:
        refuse(f"data_format {data_format!r} is not supported ({', '.join(allowed)})")
    layout = input_layout(node, 0, data_format)
    if layout != data_format:
        refuse(f"x layout {layout!r} differs from data_format {data_format!r}")
    return data_format


def _hw_of_1hw1(attrs):
    """The (h, w) entries of V1's 4-entry attrs [1, h, w, 1], given as (name, values, placeholders):
    the outer entries must be one of the placeholders (TorchAir writes pads as [1, pad_h, pad_w, 1])."""
    parts = {}
    for name, values, placeholders in attrs:
        if len(values) != 4 or values[0] not in placeholders or values[3] not in placeholders:
            refuse(f"{name}={values}: expected 4 entries [{placeholders[-1]}, h, w, {placeholders[-1]}]")
        parts[name] = list(values[1:3])
    return parts


# ---- forward ------------------------------------------------------------------------------------

@ge_kernel("MaxPoolWithArgmaxV1", accepts={"x": _F16_F32}, widen=True, prepared=True)
def max_pool_with_argmax_v1(x, *, ksize, strides, pads, dtype, dilation, ceil_mode, node):
    """Max pooling of NCHW data; ksize/strides/pads/dilation are [1, h, w, 1] whatever the layout
    (TorchAir writes pads as [1, pad_h, pad_w, 1]: positions 0 and 3 are placeholders).

    ``argmax``: the NPU writes a hardware bit mask (uint16, 5HD tiling) that only its own backward
    kernel reads; TorchAir's converter never consumes it (it returns Identity(y) cast to int64 as
    the FX indices). The simulator returns PyTorch-style flat indices (h * W + w) in int32 there:
    a stand-in with the right dtype, not the NPU's mask layout.
    """
    layout = input_layout(node, 0, "NCHW")
    if layout != "NCHW":
        refuse(f"x layout {layout!r} is not supported (NCHW)")
    if x.dim() != 4:
        refuse(f"x must be 4-D NCHW, got shape {list(x.shape)}")
    hw = _hw_of_1hw1((("ksize", ksize, (1,)), ("strides", strides, (1,)), ("dilation", dilation, (1,)),
                      ("pads", pads, (0, 1))))
    if dtype != 3:  # DT_INT32; the prototype's other argmax type is uint16
        refuse(f"argmax dtype {dtype} is not supported (3, DT_INT32)")
    # what F.max_pool2d(..., return_indices=True) calls
    pool, int32 = torch._C._nn.max_pool2d_with_indices, torch.int32
    geometry = (hw["ksize"], hw["strides"], hw["pads"], hw["dilation"], ceil_mode)

    def call(x):
        y, argmax = pool(x, *geometry)
        return y, argmax.to(int32)

    return call


def _max_pool_geometry(count, ksize, strides, pads, dilation, ceil_mode):
    ksize = _spatial_list("ksize", ksize, count)
    strides = _spatial_list("strides", strides, count)
    pads = _spatial_list("pads", pads, count)
    dilation = _spatial_list("dilation", dilation, count)
    if any(k <= 0 for k in ksize) or any(s <= 0 for s in strides) or any(d <= 0 for d in dilation):
        refuse(f"ksize {ksize}, strides {strides} and dilation {dilation} must be positive")
    if any(p < 0 or 2 * p > k for p, k in zip(pads, ksize, strict=True)):
        refuse(f"pads {pads} must be in [0, ksize / 2] (ksize {ksize})")
    return {"kernel_size": ksize, "stride": strides, "padding": pads, "dilation": dilation,
            "ceil_mode": ceil_mode, "return_indices": True}


@ge_kernel("MaxPoolWithArgmaxV3", accepts={"x": _MAX_POOL_DTYPES}, widen=True)
def max_pool_with_argmax_v3(x, *, ksize, strides, pads, dtype, dilation, ceil_mode, data_format, node):
    """2-D max pooling; ksize/strides/pads/dilation are [h, w] (pads symmetric, -inf filled);
    argmax is the flat h * W + w input index of each maximum within its plane (module docstring)."""
    _data_format(node, data_format, ("NCHW", "NHWC"))
    argmax_dtype = _argmax_dtype(dtype)
    if x.dim() not in (3, 4):
        refuse(f"x must be 3-D or 4-D {data_format}, got shape {list(x.shape)}")
    geometry = _max_pool_geometry(2, ksize, strides, pads, dilation, ceil_mode)
    wide = x.movedim(-1, -3) if data_format == "NHWC" else x
    y, argmax = F.max_pool2d(wide, **geometry)
    if data_format == "NHWC":
        y, argmax = y.movedim(-3, -1), argmax.movedim(-3, -1)
    return y.contiguous(), argmax.to(argmax_dtype).contiguous()


@ge_kernel("MaxPool3DWithArgmaxV2", accepts={"x": _MAX_POOL_DTYPES}, widen=True)
def max_pool3d_with_argmax_v2(x, *, ksize, strides, pads, dilation, ceil_mode, data_format, dtype, node):
    """3-D max pooling of NCDHW data; ksize/strides/pads/dilation are [d, h, w]; argmax is the flat
    (d * H + h) * W + w input index of each maximum within its (n, c) volume."""
    _data_format(node, data_format, ("NCDHW",))
    argmax_dtype = _argmax_dtype(dtype)
    if x.dim() not in (4, 5):
        refuse(f"x must be 4-D or 5-D NCDHW, got shape {list(x.shape)}")
    y, argmax = F.max_pool3d(x, **_max_pool_geometry(3, ksize, strides, pads, dilation, ceil_mode))
    return y, argmax.to(argmax_dtype)


# ---- backward -----------------------------------------------------------------------------------

def _pool_output_size(size, kernel, stride, pad, dilation, ceil_mode):
    """PyTorch's (and CANN's) pooled length, ceil_mode windows starting inside the padded input."""
    span = size + 2 * pad - dilation * (kernel - 1) - 1
    out = (span + (stride - 1 if ceil_mode else 0)) // stride + 1
    if ceil_mode and (out - 1) * stride >= size + pad:
        out -= 1
    return out


def _scatter_argmax(x, grad, argmax, geometry):
    """y[plane, argmax] += grad, after checking grad's spatial size against the pooling geometry."""
    kernel, stride, pad, dilation, ceil_mode = geometry
    if x.dim() != 4 or grad.dim() != 4 or argmax.shape != grad.shape:
        refuse(f"x {list(x.shape)}, grad {list(grad.shape)} and argmax {list(argmax.shape)} must be 4-D NCHW, "
               "grad and argmax of one shape")
    expected = [_pool_output_size(x.shape[2 + i], kernel[i], stride[i], pad[i], dilation[i], ceil_mode)
                for i in range(2)]
    if list(grad.shape[2:]) != expected or list(grad.shape[:2]) != list(x.shape[:2]):
        refuse(f"grad has shape {list(grad.shape)}; pooling x {list(x.shape)} with ksize={kernel}, "
               f"strides={stride}, pads={pad}, dilation={dilation}, ceil_mode={ceil_mode} gives "
               f"{list(x.shape[:2]) + expected}")
    planes, area = x.shape[0] * x.shape[1], x.shape[2] * x.shape[3]
    index = argmax.reshape(planes, -1).long()
    if index.numel() and bool(((index < 0) | (index >= area)).any()):
        refuse(f"argmax holds an index outside one input plane [0, {area})")
    out = torch.zeros(planes, area, dtype=torch.float32)
    out.scatter_add_(1, index, opmath(grad).float().reshape(planes, -1))
    return out.reshape(x.shape).to(x.dtype)


@ge_kernel("MaxPoolGradWithArgmaxV1", accepts={"x": _F16_F32, "argmax": (torch.int32,)})
def max_pool_grad_with_argmax_v1(x, grad, argmax, *, ksize, strides, pads, dtype, dilation, ceil_mode, node):
    """ksize/strides/pads/dilation are [1, h, w, 1] (pads' outer entries are placeholders, as TorchAir
    writes them); argmax is the simulator's flat plane index from MaxPoolWithArgmaxV1 (int32)."""
    if dtype != 3:
        refuse(f"argmax dtype {dtype} is not supported (3, DT_INT32)")
    layout = input_layout(node, 0, "NCHW")
    if layout != "NCHW":
        refuse(f"x layout {layout!r} is not supported (NCHW)")
    hw = _hw_of_1hw1((("ksize", ksize, (1,)), ("strides", strides, (1,)), ("pads", pads, (0, 1)),
                      ("dilation", dilation, (1,))))
    geometry = (hw["ksize"], hw["strides"], hw["pads"], hw["dilation"], ceil_mode)
    return _scatter_argmax(x, grad, argmax, geometry)


@ge_kernel("MaxPoolGradWithArgmaxV3", accepts={"x": _MAX_POOL_DTYPES})
def max_pool_grad_with_argmax_v3(x, grad, argmax, *, ksize, strides, pads, dtype, dilation, ceil_mode, data_format):
    """ksize/strides/pads/dilation are [h, w]; argmax holds flat indices h * W + w into each input plane,
    in the dtype ``dtype`` names (3: int32, 9: int64)."""
    wanted = _ARGMAX_DTYPES.get(dtype)
    if wanted is None:
        refuse(f"dtype {dtype} is not an argmax dtype (3: int32, 9: int64)")
    if argmax.dtype != wanted:
        refuse(f"argmax has dtype {argmax.dtype}, the dtype attr says {wanted}")
    if data_format not in ("NCHW", "NHWC"):
        refuse(f"data_format {data_format!r} is not supported (NCHW or NHWC)")
    parts = {}
    for name, values in (("ksize", ksize), ("strides", strides), ("pads", pads), ("dilation", dilation)):
        if len(values) not in (1, 2):
            refuse(f"{name} must have 1 or 2 entries [h, w], got {values}")
        parts[name] = list(values) * (3 - len(values))
    geometry = (parts["ksize"], parts["strides"], parts["pads"], parts["dilation"], ceil_mode)
    if data_format == "NHWC":
        nchw = [t.permute(0, 3, 1, 2) for t in (x, grad, argmax)]
        return _scatter_argmax(*nchw, geometry).permute(0, 2, 3, 1).contiguous()
    return _scatter_argmax(x, grad, argmax, geometry)

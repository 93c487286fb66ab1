"""Softmax GE ops, forward and backward: SoftmaxV2, LogSoftmaxV2, SoftmaxGrad, LogSoftmaxGrad, and the fused
MaskedSoftmaxWithRelPosBias.

CANN files them under ops-nn ``activation/`` (``softmax_v2``, ``log_softmax_v2``, ``softmax_grad``,
``log_softmax_grad``); they are a module of their own beside `pointwise.py` because they reduce
over axes where the other activations are elementwise. Formulas from the REG_OP docs and those
READMEs; TorchAir's converters are ``ge_converter/aten/_softmax*.py`` and ``_log_softmax*.py``.

Statistics of 16-bit float inputs are computed in float32 and rounded once, as the NPU kernels do.

* MaskedSoftmaxWithRelPosBias (ops-nn ``norm/masked_softmax_with_rel_pos_bias`` README): y = softmax(scale_value
  · x + atten_mask + relative_pos_bias) over the last dim, in float32, rounded once; x (B*W, N, S1, S2) or (B, W,
  N, S1, S2), atten_mask (W, S1, S2) in any of the README's 3/4/5-D forms, relative_pos_bias (N, S1, S2) likewise.
  inner_precision_mode is an NPU precision choice the README does not describe: the CPU computes in float32.
"""
from __future__ import annotations

import torch
from ...registry import ge_kernel, refuse
from ..common import opmath

_FLOATS = (torch.float16, torch.float32, torch.bfloat16)


def _one_axis(axes):
    if len(axes) != 1:
        refuse(f"softmax over several axes {axes} is not supported by the simulator")
    return axes[0]


@ge_kernel("SoftmaxV2", prepared=True)
def softmax_v2(x, *, axes, half_to_float):
    """y = exp(x) / sum(exp(x), axes), in float32 for 16-bit x; half_to_float gives a float32 y."""
    out_dtype = torch.float32 if half_to_float else x.dtype
    axis, softmax = _one_axis(axes), torch.softmax
    if x.dtype == out_dtype and x.dtype in (torch.float32, torch.float64):
        return lambda x: softmax(x, axis)
    return lambda x: softmax(opmath(x), dim=axis).to(out_dtype)


@ge_kernel("LogSoftmaxV2", widen=True)
def log_softmax_v2(logits, *, axes):
    """y = x - log(sum(exp(x), axes)); LogSoftmaxV2 has no half_to_float."""
    return torch.log_softmax(logits, dim=_one_axis(axes))


def _axes(values, rank):
    if not values:
        refuse("needs at least one axis")
    for axis in values:
        if not -max(rank, 1) <= axis < max(rank, 1):
            refuse(f"axis {axis} is out of range for rank {rank}")
    return sorted({axis % max(rank, 1) for axis in values})


@ge_kernel("SoftmaxGrad", one_dtype=("softmax", "grad_softmax"),
           accepts={"softmax": _FLOATS + (torch.int32, torch.int8, torch.uint8)})
def softmax_grad(softmax, grad_softmax, *, axes):
    """grad_x = (grad_softmax - sum(grad_softmax * softmax, axes)) * softmax; integer inputs are
    computed in float32 too (the rounding back to them is explicit, not the decorator's widening)."""
    if softmax.shape != grad_softmax.shape:
        refuse(f"softmax {list(softmax.shape)} and grad_softmax {list(grad_softmax.shape)} must have one shape")
    dims = _axes(axes, softmax.dim())
    y, dy = opmath(softmax).float(), opmath(grad_softmax).float()
    if softmax.dim() == 0:
        return ((dy - dy * y) * y).to(softmax.dtype)
    return ((dy - (dy * y).sum(dim=dims, keepdim=True)) * y).to(softmax.dtype)


@ge_kernel("LogSoftmaxGrad", one_dtype=("grad", "x"), accepts={"x": _FLOATS}, widen=True)
def log_softmax_grad(grad, x, *, axis):
    """y = grad - exp(x) * sum(grad, axis), x being LogSoftmax's output."""
    if grad.shape != x.shape:
        refuse(f"grad {list(grad.shape)} and x {list(x.shape)} must have one shape")
    dims = _axes(axis, x.dim())
    total = grad if x.dim() == 0 else grad.sum(dim=dims, keepdim=True)
    return grad - torch.exp(x) * total
_WINDOW_FLOATS = (torch.float16, torch.bfloat16, torch.float32)


def windows_softmax(x, atten_mask, relative_pos_bias, scale_value):
    """The README's formula over x viewed as (B, W, N, S1, S2); None when a shape is not one the README lists."""
    *_, n, s1, s2 = x.shape
    if x.dim() not in (4, 5) or relative_pos_bias.numel() != n * s1 * s2:
        return None
    windows = 1 if atten_mask is None else atten_mask.numel() // (s1 * s2)
    if atten_mask is not None and (atten_mask.numel() != windows * s1 * s2 or x.numel() % (windows * n * s1 * s2)):
        return None
    wide = x.float().reshape(-1, windows, n, s1, s2) * scale_value
    if atten_mask is not None:
        wide = wide + atten_mask.float().reshape(1, windows, 1, s1, s2)
    wide = wide + relative_pos_bias.float().reshape(1, 1, n, s1, s2)
    return torch.softmax(wide, dim=-1).reshape(x.shape).to(x.dtype)


@ge_kernel("MaskedSoftmaxWithRelPosBias", accepts={"x": _WINDOW_FLOATS, "atten_mask": _WINDOW_FLOATS,
                                                   "relative_pos_bias": _WINDOW_FLOATS})
def masked_softmax_with_rel_pos_bias(x, atten_mask, relative_pos_bias, *, scale_value, inner_precision_mode):
    y = windows_softmax(x, atten_mask, relative_pos_bias, scale_value)
    if y is None:
        refuse(f"x {list(x.shape)}, atten_mask {None if atten_mask is None else list(atten_mask.shape)}, "
               f"relative_pos_bias {list(relative_pos_bias.shape)} are not the README's (B*W or B, W, N, S1, S2), "
               "(W, S1, S2), (N, S1, S2) forms")
    return y

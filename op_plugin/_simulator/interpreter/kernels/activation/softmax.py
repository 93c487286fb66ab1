"""Softmax GE ops, forward and backward: SoftmaxV2, LogSoftmaxV2, SoftmaxGrad, LogSoftmaxGrad.

CANN files them under ops-nn ``activation/`` (``softmax_v2``, ``log_softmax_v2``, ``softmax_grad``,
``log_softmax_grad``); they are a module of their own beside `activation.py` because they reduce
over axes where the other activations are elementwise. Formulas from the REG_OP docs and those
READMEs; TorchAir's converters are ``ge_converter/aten/_softmax*.py`` and ``_log_softmax*.py``.

Statistics of 16-bit float inputs are computed in float32 and rounded once, as the NPU kernels do.
"""
from __future__ import annotations

import torch

from ..registry import ge_kernel, refuse
from .common import opmath

_FLOATS = (torch.float16, torch.float32, torch.bfloat16)


def _one_axis(axes):
    if len(axes) != 1:
        refuse(f"softmax over several axes {axes} is not supported by the simulator")
    return axes[0]


@ge_kernel("SoftmaxV2")
def softmax_v2(x, *, axes, half_to_float):
    """y = exp(x) / sum(exp(x), axes); half_to_float gives a float32 y (SoftmaxV2 only)."""
    out_dtype = torch.float32 if half_to_float else x.dtype
    return torch.softmax(opmath(x), dim=_one_axis(axes)).to(out_dtype)


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

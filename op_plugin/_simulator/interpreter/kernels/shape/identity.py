"""CANN's conversion ops (hicann ops-math `conversion/`) that act element by element: ClipByValue,
ClipByValueV2, MaskedFill, ZerosLike, Identity, IdentityN and TensorMove; with them the GE
framework's identity-like ops Snapshot, StopGradient and PreventGradient (no ops-math kernel: GE
itself passes the tensor through).

They came out of the element-wise modules with the math ops; ops-math files them under
`conversion/`, not `math/`, so they are kept apart here, to join the conversion class's module.
Each follows its CANN prototype (TorchAir's `_ge_concrete_graph/auto_generated_ge_raw_ops.py`).
"""
from __future__ import annotations

import torch

from ..registry import ge_kernel

_NUMBERS = (torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.int8, torch.int16, torch.int32,
            torch.int64, torch.uint8, torch.uint16, torch.uint32, torch.uint64, torch.complex64, torch.complex128)


@ge_kernel("ClipByValue")
def clip_by_value(x, clip_value_min, clip_value_max):
    """y = min(max(x, clip_value_min), clip_value_max), broadcasting."""
    return torch.minimum(torch.maximum(x, clip_value_min), clip_value_max)


@ge_kernel("ClipByValueV2", one_dtype=("x", "clip_value_min", "clip_value_max"), accepts={"x": _NUMBERS})
def clip_by_value_v2(x, clip_value_min, clip_value_max):
    """y = min(max(x, clip_value_min), clip_value_max); NaN in x stays NaN; min > max gives max."""
    return torch.minimum(torch.maximum(x, clip_value_min), clip_value_max)


@ge_kernel("MaskedFill")
def masked_fill(x, mask, value):
    """y = value (converted to x's dtype) where mask, else x."""
    return torch.where(mask.bool(), value.to(x.dtype), x)


@ge_kernel("ZerosLike")
def zeros_like(x):
    return torch.zeros_like(x)


@ge_kernel("Identity")
def identity(x):
    return x


@ge_kernel("IdentityN")
def identity_n(x):
    """The dynamic input's tensors, one output each."""
    return tuple(x)


@ge_kernel("TensorMove")
def tensor_move(x):
    """A copy of x in a buffer of its own."""
    return torch.clone(x)


@ge_kernel("Snapshot")
def snapshot(x):
    """A copy of x in a buffer of its own."""
    return torch.clone(x)


@ge_kernel("StopGradient")
def stop_gradient(x):
    """The identity: the gradient it stops is not the forward's business."""
    return x


@ge_kernel("PreventGradient", layout_only={"message": "the error text for a gradient taken through it; "
                                                     "the forward is the identity"})
def prevent_gradient(x):
    return x

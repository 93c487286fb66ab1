"""Identity-like GE ops: ZerosLike, Identity, IdentityN and TensorMove (hicann ops-math ``conversion/``), the GE
framework's Snapshot, StopGradient and PreventGradient (no ops-math kernel: GE itself passes the tensor
through), and Cmo (the cache prefetch npu_prefetch lowers to).

Each follows its CANN prototype (TorchAir's `_ge_concrete_graph/auto_generated_ge_raw_ops.py`).

* Cmo: a prefetch of ``src`` into the NPU's L2 cache (type 6); it has no outputs and changes no value, so
  the CPU does nothing but check its attrs.
"""
from __future__ import annotations

import torch
from ...registry import ge_kernel
from ...registry import refuse
from ..common import unary_kernel


ge_kernel("ZerosLike", prepared=True)(unary_kernel("zeros_like", torch.zeros_like))


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


@ge_kernel("Cmo")
def cmo(src, *, max_size, type, offset):  # the prototype's attr name
    """A cache prefetch: no outputs, no effect on any value."""
    if max_size <= 0 or offset < 0:
        refuse(f"max_size {max_size} must be > 0 and offset {offset} >= 0")
    if type != 6:
        refuse(f"type {type}: only 6 (prefetch, what npu_prefetch emits) is known; CANN documents no other here")
    return ()

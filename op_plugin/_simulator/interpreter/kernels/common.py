"""Helpers shared by the GE kernels: output buffers, index inputs as ints, dtype checks, int8 outputs.

Kernels refuse what they do not implement with `refuse(message)` (from `..registry`); the executor
names the node.
"""
from __future__ import annotations

import contextvars
import sys

import torch

from ...._base.numerics import opmath  # re-exported: every kernel module widens 16-bit floats alike
from ...._ge.values import ge_dtype_to_torch
from ..errors import refuse


# True while a plan runs a graph in which no node writes into an input (no ref op): there a view
# is indistinguishable from GE's own output buffer, so reshape-like kernels may return one.
VIEWS_ALLOWED = contextvars.ContextVar("op_plugin_views_allowed", default=False)


def fresh(tensor: torch.Tensor) -> torch.Tensor:
    """`tensor` as a GE output: contiguous, and a buffer of its own unless views are allowed."""
    if tensor.dtype == torch.int4:   # DT_INT4 (one value per byte): torch has no copy kernel for int4
        return fresh(tensor.view(torch.int8)).view(torch.int4)
    if not tensor.is_contiguous():
        return tensor.contiguous()
    return tensor if VIEWS_ALLOWED.get() else tensor.clone()


def identity_call(position: int):
    """The call of a node whose output is, bit for bit, its input at `position` (a product with a fixed one):
    that input as a GE output (`fresh`). `identity_of` tells the executor which input the output may share a
    buffer with (executor/donation.py)."""
    def identity(*args):
        return fresh(args[position])

    identity.identity_of = position
    return identity


# The attribute under which the executor stores the ints of an immutable small integer tensor.
CONST_INTS = "_op_plugin_const_ints"
_MAX_CONST_INTS = 64


def remember_ints(tensor) -> None:
    """Store a small integer tensor's values on it, for `int_list`: only for tensors nothing writes
    to (the plan's Consts and the values it folds per signature)."""
    if isinstance(tensor, torch.Tensor) and not tensor.is_floating_point() and not tensor.is_complex() \
            and tensor.numel() <= _MAX_CONST_INTS and tensor.dtype != torch.int4:   # int4: no scalar reads
        setattr(tensor, CONST_INTS, tuple(int(v) for v in tensor.reshape(-1).tolist()))


def int_list(value) -> list[int]:
    """A GE index input (tensor, scalar tensor, or list) as a list of Python ints."""
    if isinstance(value, torch.Tensor):
        known = getattr(value, CONST_INTS, None)  # a Const or folded value the plan never changes
        if known is not None:
            return list(known)
        return [int(v) for v in value.reshape(-1).tolist()]
    if isinstance(value, (list, tuple)):
        return [int(v) for v in value]
    return [int(value)]


def input_layout(node, index, default):
    """The layout GE reads input `index` in; TorchAir writes "ND" when a converter set none."""
    if index < len(node.input_desc):
        layout = node.input_desc[index].layout
        if layout and layout != "ND":
            return layout
    return default


def require_dtype(what: str, tensor, allowed) -> None:
    """Refuse `tensor` (named `what`) unless its dtype is one the GE prototype takes; for checks the
    decorator's `accepts=` cannot express (a dtype that depends on another input or an attr)."""
    if tensor.dtype not in allowed:
        names = ", ".join(str(d).replace("torch.", "") for d in allowed)
        refuse(f"{what} has dtype {str(tensor.dtype).replace('torch.', '')}; the GE prototype takes {names}")


def _caller_module() -> str:
    """The module that made a kernel with a factory below (docs and tools file the kernel under it)."""
    return sys._getframe(2).f_globals.get("__name__", __name__)


def binary_kernel(name: str, fn):
    """The prepare phase of a binary op whose prototype is (x1, x2) -> y with no attrs, computing
    fn(x1, x2) (register with `prepared=True`): its call is `fn` itself, whatever the specs."""
    def prepare(x1, x2):
        return fn

    prepare.__name__ = prepare.__qualname__ = name
    prepare.__module__ = _caller_module()
    return prepare


def unary_kernel(name: str, fn):
    """The prepare phase of a unary op whose prototype is (x) -> y with no attrs, computing fn(x)
    in x's dtype (register with `prepared=True`): its call is `fn` itself."""
    def prepare(x):
        return fn

    prepare.__name__ = prepare.__qualname__ = name
    prepare.__module__ = _caller_module()
    return prepare


_COMPUTED_AS_IS = (torch.float32, torch.float64)


def unary_in_float32(name: str, fn):
    """The prepare phase of a unary op computing fn(x) with 16-bit floats in float32, the result
    going back to x's dtype whatever it is (an integer x gives an integer y, which `widen=True`
    would not do). For float32/float64 x that is fn itself."""
    def prepare(x):
        if x.dtype in _COMPUTED_AS_IS:
            return fn
        dtype = x.dtype
        return lambda x: fn(opmath(x)).to(dtype)

    prepare.__name__ = prepare.__qualname__ = name
    prepare.__module__ = _caller_module()
    return prepare


def attr_dtype(what: str, number) -> torch.dtype:
    """A dtype attr (a GE-enum number, `Cast.dst_type`, `Tout`, `dtype`) as a torch dtype; a number
    with no torch dtype is refused, naming the attr."""
    try:
        return ge_dtype_to_torch(number, where=f"{what}: ")
    except ValueError as error:
        refuse(str(error))


_GE_INT8 = 2


def saturate_int8(values):
    """Integer-valued float `values` saturated to [-128, 127] as int8 (the fused quant ops' int8 outputs)."""
    return values.clamp(-128, 127).to(torch.int8)


def require_int8(dst_type):
    """Refuse a dst_type attr other than DT_INT8 (the fused quant ops simulate int8 outputs only)."""
    if int(dst_type) != _GE_INT8:
        refuse(f"dst_type={dst_type}: only DT_INT8 outputs are simulated (int4/fp8/hifloat8 are not)")

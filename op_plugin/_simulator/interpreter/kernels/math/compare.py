"""CANN's math ops (hicann ops-math `math/`), comparison, logic and bitwise: Equal, NotEqual, Less,
LessEqual, Greater, GreaterEqual, LogicalAnd, LogicalOr, LogicalNot, BitwiseAnd, BitwiseOr,
BitwiseXor, Invert, RightShift, the float tests IsFinite, IsNan, IsInf (Select / SelectV2 are in `select.py`).

Kept apart from the arithmetic (`arithmetic.py`): these ops produce
bools or bit patterns, never rounded numbers. Each follows its CANN prototype (TorchAir's
`_ge_concrete_graph/auto_generated_ge_raw_ops.py`); binary ops broadcast and do not promote.
"""
from __future__ import annotations

import torch
from ..common import binary_kernel, unary_kernel
from ...registry import ge_kernel

_INTEGERS = (torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8, torch.uint16, torch.uint32,
             torch.uint64)

# ---- comparison, logic and bitwise binary ops (broadcasting, no type promotion) --------------

_BINARY = {
    "Equal": ("equal", torch.eq), "NotEqual": ("not_equal", torch.ne), "Less": ("less", torch.lt),
    "LessEqual": ("less_equal", torch.le), "Greater": ("greater", torch.gt),
    "GreaterEqual": ("greater_equal", torch.ge),
    "LogicalAnd": ("logical_and", torch.logical_and), "LogicalOr": ("logical_or", torch.logical_or),
    "BitwiseAnd": ("bitwise_and", torch.bitwise_and), "BitwiseOr": ("bitwise_or", torch.bitwise_or),
    "BitwiseXor": ("bitwise_xor", torch.bitwise_xor),
}


for _op_type, (_name, _fn) in _BINARY.items():
    ge_kernel(_op_type, one_dtype=("x1", "x2"), prepared=True)(binary_kernel(_name, _fn))


@ge_kernel("RightShift", one_dtype=("x", "y"), accepts={"x": _INTEGERS, "y": _INTEGERS})
def right_shift(x, y):
    """z = x >> y, broadcasting; arithmetic (sign-filling) for signed types, as C++ on int types.

    A shift by the bit width or more, or by a negative amount, is undefined in CANN's definition
    (C++ shift); torch saturates it (0 or -1), and the simulator keeps torch's value.
    """
    return torch.bitwise_right_shift(x, y)


# ---- unary tests and negations ---------------------------------------------------------------

_UNARY = {
    "LogicalNot": ("logical_not", torch.logical_not), "IsFinite": ("is_finite", torch.isfinite),
    "IsNan": ("is_nan", torch.isnan), "IsInf": ("is_inf", torch.isinf),
}


for _op_type, (_name, _fn) in _UNARY.items():
    ge_kernel(_op_type, prepared=True)(unary_kernel(_name, _fn))


@ge_kernel("Invert", accepts={"x": _INTEGERS})
def invert(x):
    """Bitwise NOT of an integer tensor (bool is LogicalNot's, TorchAir lowers it there)."""
    return torch.bitwise_not(x)

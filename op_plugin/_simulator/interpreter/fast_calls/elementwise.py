"""Fast calls of the element-wise kernels (kernels/math.py, math_compare.py, math_unary.py, activation.py,
conversion_elementwise.py): where the kernel is `fn(x1, x2)` or, for float32/float64 data, `fn(x)`, the
fast call is the torch function itself (no Python frame between the program and aten)."""
from __future__ import annotations

import torch

from ..kernels.common import attr_dtype
from . import specialises

_WIDE = (torch.float32, torch.float64)

# GE type -> the torch function its kernel applies to (x1, x2), for any dtype the kernel takes as it is
_BINARY = {"Add": torch.add, "AddV2": torch.add, "Sub": torch.sub, "Mul": torch.mul, "Maximum": torch.maximum,
           "Minimum": torch.minimum, "Pow": torch.pow, "LogicalAnd": torch.logical_and,
           "LogicalOr": torch.logical_or, "Equal": torch.eq, "NotEqual": torch.ne, "Greater": torch.gt,
           "GreaterEqual": torch.ge, "Less": torch.lt, "LessEqual": torch.le}
# ... and to (x1, x2) when x1 is a float (their integer forms round or truncate)
_FLOAT_BINARY = {"RealDiv": torch.div, "Div": torch.div}
# GE type -> the torch function its kernel applies to x (16-bit floats are widened by the kernel: not here)
_UNARY = {"Sigmoid": torch.sigmoid, "Tanh": torch.tanh, "Sqrt": torch.sqrt, "Rsqrt": torch.rsqrt,
          "Erf": torch.erf, "Reciprocal": torch.reciprocal, "Neg": torch.neg, "Abs": torch.abs}


def _binary(fn):
    def specialiser(x1, x2):
        return fn

    return specialiser


def _float_binary(fn):
    def specialiser(x1, x2):
        return fn if x1.dtype in _WIDE else None

    return specialiser


def _unary(fn):
    def specialiser(x):
        return fn if x.dtype in _WIDE else None

    return specialiser


for _op_type, _fn in _BINARY.items():
    specialises(_op_type)(_binary(_fn))
for _op_type, _fn in _FLOAT_BINARY.items():
    specialises(_op_type)(_float_binary(_fn))
for _op_type, _fn in _UNARY.items():
    specialises(_op_type)(_unary(_fn))


@specialises("LogicalNot")
def logical_not(x):
    return torch.logical_not


@specialises("Cast")
def cast(x, *, dst_type):
    dtype = attr_dtype("dst_type", dst_type)
    return lambda x: x.to(dtype)


@specialises("MaskedFill")
def masked_fill(x, mask, value):
    if mask.dtype != torch.bool or value.dtype != x.dtype:
        return None
    return lambda x, mask, value: torch.where(mask, value, x)


@specialises("ZerosLike")
def zeros_like(x):
    return torch.zeros_like

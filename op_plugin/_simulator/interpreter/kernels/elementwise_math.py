"""Element-wise GE math ops without attrs: inverse trigonometric and hyperbolic functions (Acos,
Acosh, Asin, Asinh, Atan, Atanh, Tan, Cosh, Sinh), Erfinv, the bitwise ops Invert and RightShift,
and the complex-number ops Real, Imag and Complex (whose `Tout` attr names the output dtype).

Each follows its CANN prototype (TorchAir's `_ge_concrete_graph/auto_generated_ge_raw_ops.py`).
16-bit floats are computed in float32 and rounded once. Acos, Asin and Tan also declare int32 and
int64 inputs: TorchAir feeds an integer tensor straight to them with a float32 output desc (the
FX meta of `aten.acos(int)`), so an integer input gives a float32 result, never an integer one.
"""
from __future__ import annotations

import torch

from ...._ge.values import ge_dtype_to_torch
from .common import check_dtype, fail, opmath
from ..registry import builtin_kernel

_FLOATS = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
_COMPLEX = (torch.complex64, torch.complex128)
# GE's UnaryDataType: the floating and complex types.
_UNARY = _FLOATS + _COMPLEX
_UNARY_AND_INT = _UNARY + (torch.int32, torch.int64)
_INTEGERS = (torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8, torch.uint16, torch.uint32,
             torch.uint64)


def _float_unary(op_type, fn, allowed):
    def kernel(inputs, attrs, node):
        x = inputs[0]
        check_dtype(node, "x", x, allowed)
        if not (x.dtype.is_floating_point or x.dtype.is_complex):
            return [fn(x.to(torch.float32))]
        return [fn(opmath(x)).to(x.dtype)]

    kernel.__name__ = f"ge_{op_type}"
    builtin_kernel(op_type)(kernel)


for _op_type, _fn, _allowed in (
    ("Acos", torch.acos, _UNARY_AND_INT), ("Asin", torch.asin, _UNARY_AND_INT),
    ("Tan", torch.tan, _UNARY_AND_INT), ("Atan", torch.atan, _UNARY),
    ("Acosh", torch.acosh, _UNARY), ("Asinh", torch.asinh, _UNARY), ("Atanh", torch.atanh, _UNARY),
    ("Cosh", torch.cosh, _UNARY), ("Sinh", torch.sinh, _UNARY),
    ("Erfinv", torch.erfinv, (torch.float16, torch.float32)),
):
    _float_unary(_op_type, _fn, _allowed)


@builtin_kernel("Invert")
def _invert(inputs, attrs, node):
    """Bitwise NOT of an integer tensor (bool is LogicalNot's, TorchAir lowers it there)."""
    x = inputs[0]
    check_dtype(node, "x", x, _INTEGERS)
    return [torch.bitwise_not(x)]


@builtin_kernel("RightShift")
def _right_shift(inputs, attrs, node):
    """z = x >> y, broadcasting; arithmetic (sign-filling) for signed types, as C++ on int types.

    A shift by the bit width or more, or by a negative amount, is undefined in CANN's definition
    (C++ shift); torch saturates it (0 or -1), and the simulator keeps torch's value.
    """
    x, y = inputs[0], inputs[1]
    check_dtype(node, "x", x, _INTEGERS)
    check_dtype(node, "y", y, _INTEGERS)
    if x.dtype != y.dtype:
        fail(node, f"x and y must have one dtype (GE does not promote), got {x.dtype} and {y.dtype}")
    return [torch.bitwise_right_shift(x, y)]


def _tout(node, attrs, default, allowed):
    dtype = ge_dtype_to_torch(attrs["Tout"], where=f"{node.type} Tout: ") if "Tout" in attrs else default
    if dtype not in allowed:
        fail(node, f"Tout {dtype} is not one of {', '.join(map(str, allowed))}")
    return dtype


def _complex_part(part):
    def kernel(inputs, attrs, node):
        """The real or imaginary part of a complex tensor, in the dtype Tout names (DT_FLOAT by default)."""
        x = inputs[0]
        check_dtype(node, "input", x, _COMPLEX)
        tout = _tout(node, attrs, torch.float32, (torch.float32, torch.float64))
        return [part(x).to(tout)]  # .to copies: the output never aliases the input's storage

    return kernel


builtin_kernel("Real")(_complex_part(torch.real))
builtin_kernel("Imag")(_complex_part(torch.imag))


@builtin_kernel("Complex")
def _complex(inputs, attrs, node):
    """out = real + i * imag (broadcasting), in the dtype Tout names (DT_COMPLEX64 by default)."""
    real, imag = inputs[0], inputs[1]
    check_dtype(node, "real", real, (torch.float32, torch.float64))
    check_dtype(node, "imag", imag, (torch.float32, torch.float64))
    if real.dtype != imag.dtype:
        fail(node, f"real and imag must have one dtype, got {real.dtype} and {imag.dtype}")
    tout = _tout(node, attrs, torch.complex64, _COMPLEX)
    real, imag = torch.broadcast_tensors(real, imag)
    return [torch.complex(real, imag).to(tout)]

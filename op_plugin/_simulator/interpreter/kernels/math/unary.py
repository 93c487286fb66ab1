"""CANN's math ops (hicann ops-math `math/`), unary: Log and Exp with their base/scale/shift attrs,
Log1p, Expm1, Sqrt, Rsqrt, Erf, Erfinv, Reciprocal, Sin, Cos, Tan, Tanh, the inverse trigonometric
and hyperbolic functions (Acos, Acosh, Asin, Asinh, Atan, Atanh, Cosh, Sinh), Neg, Abs, Square,
Sign, Floor, Ceil, Round, Trunc, OnesLike, NanToNum (whose replacement values are attrs) and Cast.

Kept apart from the binary arithmetic in `math` so neither module grows past ~400 lines. Each
kernel follows its CANN prototype (TorchAir's `_ge_concrete_graph/auto_generated_ge_raw_ops.py`).
Transcendental functions of 16-bit floats are computed in float32 and rounded once, as the NPU's
vector units do. Acos, Asin and Tan also declare int32 and int64 inputs: TorchAir feeds an integer
tensor straight to them with a float32 output desc (the FX meta of `aten.acos(int)`), so an integer
input gives a float32 result, never an integer one. (Tanh is filed here, not with the activations:
ops-math keeps `tanh` and `tanh_grad` in `math/`; CANN's Erfinv lives in ops-nn `activation/` and
in ops-math's experimental `math/erf_inv`, and is math.)
"""
from __future__ import annotations

import math
import torch
from ...registry import ge_kernel, refuse
from ..common import attr_dtype, opmath, require_dtype, unary_in_float32, unary_kernel

_FLOATS = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
_COMPLEX = (torch.complex64, torch.complex128)
# GE's UnaryDataType: the floating and complex types.
_UNARY = _FLOATS + _COMPLEX
_UNARY_AND_INT = _UNARY + (torch.int32, torch.int64)

# ---- element-wise unary ops without attrs ----------------------------------------------------


for _op_type, _name, _fn in (
    ("Log1p", "log1p", torch.log1p), ("Expm1", "expm1", torch.expm1), ("Sqrt", "sqrt", torch.sqrt),
    ("Rsqrt", "rsqrt", torch.rsqrt), ("Erf", "erf", torch.erf), ("Sin", "sin", torch.sin), ("Cos", "cos", torch.cos),
    ("Reciprocal", "reciprocal", torch.reciprocal), ("Tanh", "tanh", torch.tanh),
):
    ge_kernel(_op_type, prepared=True)(unary_in_float32(_name, _fn))

for _op_type, _name, _fn in (
    ("Neg", "neg", torch.neg), ("Abs", "abs", torch.abs), ("Square", "square", torch.square),
    ("Sign", "sign", torch.sign), ("Floor", "floor", torch.floor), ("Ceil", "ceil", torch.ceil),
    ("Round", "round", torch.round), ("OnesLike", "ones_like", torch.ones_like),
):
    ge_kernel(_op_type, prepared=True)(unary_kernel(_name, _fn))


@ge_kernel("Trunc", prepared=True, accepts={"input_x": (torch.float16, torch.bfloat16, torch.float32, torch.int8,
                                                          torch.int32, torch.uint8)})
def trunc(input_x):
    """CANN Trunc (REG_OP Trunc: input_x, output_y, float16/bfloat16/float32/int8/int32/uint8; ops-math
    math/trunc): each element rounded toward zero, exact in its own dtype (an integer is unchanged)."""
    return torch.trunc


# ---- inverse trigonometric and hyperbolic functions, Tan, Erfinv -------------------------------


def _float_unary(name, fn):
    """The kernel of a float function: an integer x (Acos, Asin, Tan) gives float32. With
    `widen=True` a float x arrives widened and the result is rounded back to its dtype."""
    def kernel(x):
        if not (x.dtype.is_floating_point or x.dtype.is_complex):
            return fn(x.to(torch.float32))
        return fn(x)

    kernel.__name__ = kernel.__qualname__ = name
    return kernel


for _op_type, _name, _fn, _allowed in (
    ("Acos", "acos", torch.acos, _UNARY_AND_INT), ("Asin", "asin", torch.asin, _UNARY_AND_INT),
    ("Tan", "tan", torch.tan, _UNARY_AND_INT), ("Atan", "atan", torch.atan, _UNARY),
    ("Acosh", "acosh", torch.acosh, _UNARY), ("Asinh", "asinh", torch.asinh, _UNARY),
    ("Atanh", "atanh", torch.atanh, _UNARY), ("Cosh", "cosh", torch.cosh, _UNARY), ("Sinh", "sinh", torch.sinh, _UNARY),
):
    ge_kernel(_op_type, accepts={"x": _allowed}, widen=True)(_float_unary(_name, _fn))


@ge_kernel("Erfinv", accepts={"input_x": (torch.float16, torch.float32)}, widen=True)
def erfinv(input_x):
    return torch.erfinv(input_x)


# ---- Log and Exp: base, scale and shift attrs ------------------------------------------------


def _log_exp_float(x):
    """Log/Exp take integer and bool inputs too; their result is float32 there (the output desc
    TorchAir writes from the FX meta), never cast back to the integer dtype."""
    if x.dtype.is_floating_point or x.dtype.is_complex:
        return opmath(x), x.dtype
    require_dtype("x", x, (torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.bool))
    return x.to(torch.float32), torch.float32


def _base_log(base):
    """ln(base) for the base attr of Log/Exp: -1 (the default) means e; other values must be > 0."""
    if base == -1.0:
        return None
    if not base > 0:
        refuse(f"base must be -1 (natural) or > 0, got {base}")
    return math.log(base)


@ge_kernel("Log")
def log(x, *, base, scale, shift):
    """y = log_base(shift + scale * x); base -1 (the default) is the natural log.

    TorchAir lowers log2/log10 to Log(base=2/10), so base is part of the result, not a hint.
    """
    wide, out_dtype = _log_exp_float(x)
    ln_base = _base_log(base)
    result = torch.log(shift + scale * wide)
    if ln_base is not None:
        result = result / ln_base
    return result.to(out_dtype)


@ge_kernel("Exp")
def exp(x, *, base, scale, shift):
    """y = base ** (shift + scale * x); base -1 (the default) is e."""
    wide, out_dtype = _log_exp_float(x)
    ln_base = _base_log(base)
    exponent = shift + scale * wide
    result = torch.exp(exponent if ln_base is None else exponent * ln_base)
    return result.to(out_dtype)


# ---- attrs naming values and dtypes ----------------------------------------------------------


@ge_kernel("NanToNum", accepts={"x": (torch.bfloat16, torch.float16, torch.float32)})
def nan_to_num(x, *, nan, posinf, neginf):
    """NaN -> attr nan, +inf -> attr posinf, -inf -> attr neginf (all required; rounded to x's dtype)."""
    return torch.nan_to_num(x, nan=nan, posinf=posinf, neginf=neginf)


_FP8_LARGEST = {torch.float8_e5m2: 57344.0, torch.float8_e4m3fn: 448.0}


@ge_kernel("Cast", prepared=True)
def cast(x, *, dst_type):
    """x as dst_type. To fp8 only values within the format's range: CANN's Cast rounds them half to even, but what
    it writes for a value beyond the range, inf or NaN depends on the core's saturation mode (CTRL register),
    which the Cast kernel leaves as it finds it (ops-math cast_impl.h): the range is checked on every call.
    int4 (one value per byte) casts out only."""
    dtype = attr_dtype("dst_type", dst_type)
    if dtype == torch.int4:
        refuse("Cast to DT_INT4 is not simulated (its rounding and saturation are not documented)")
    largest = _FP8_LARGEST.get(dtype)
    if largest is not None:
        return lambda x: _checked_fp8_cast(x, dtype, largest)
    if x.dtype == torch.int4:
        return lambda x: x.view(torch.int8).to(dtype)
    return lambda x: x.to(dtype)


def _checked_fp8_cast(x, dtype, largest):
    if x.dtype == torch.int4:
        x = x.view(torch.int8)
    if x.numel():
        wide = x.double()
        if not bool(torch.isfinite(wide).all()) or float(wide.abs().max()) > largest:
            refuse(f"Cast to {dtype} of inf, NaN or a value beyond {largest}: CANN's result depends on "
                   "the core's saturation mode, which Cast does not set")
    return x.to(dtype)

"""CANN's math ops (hicann ops-math `math/`), arithmetic: the broadcasting binary ops Add, AddV2,
Sub, Mul, RealDiv, Div, DivNoNan, FloorDiv, TruncateDiv, FloorMod, Mod, TruncateMod, Maximum,
Minimum, Pow, SquaredDifference and Atan2; AddN; the scalar forms Muls, Adds, Axpy and Sxpy; and the
ternary ops Addcdiv, Addcmul, AxpyV2 and Lerp (a tensor combined with tensor or scalar operands).

The other math ops are split by sub-concept so no module grows past ~400 lines: comparison, logic
and bitwise ops in `compare`, unary math (Log/Exp with their attrs, trigonometric, rounding,
Cast, NanToNum) in `unary`, complex numbers and Fourier transforms in `complex`.

Each kernel follows the op's CANN prototype (`REG_OP`; TorchAir's
`_ge_concrete_graph/auto_generated_ge_raw_ops.py` lists them). GE does not promote: the tensor
operands of a binary op share one dtype. 16-bit floats are computed in float32 and rounded once,
as the NPU's vector units do. The scalar operands of the ternary ops (value, alpha, weight) may
come in another dtype than the data (TorchAir makes a scalar a Const of its own dtype), so they are
converted, not checked equal.
"""
from __future__ import annotations

import torch
from ..common import binary_kernel, identity_call
from ...registry import ge_kernel, refuse

_FLOATS = (torch.float16, torch.bfloat16, torch.float32, torch.float64)

# ---- element-wise binary ops (broadcasting, no type promotion) -------------------------------


def _div(x1, x2):
    if x1.dtype.is_floating_point or x1.dtype.is_complex:
        return torch.div(x1, x2)
    return torch.div(x1, x2, rounding_mode="trunc")  # TF/GE Div on integers truncates


def _real_div(x1, x2):
    result = torch.div(x1, x2)
    return result if x1.dtype.is_floating_point else result.to(x1.dtype)


def _prepare_div(x1, x2):
    """Div: a float or complex x1 divides as torch.div, an integer one truncates."""
    return torch.div if x1.dtype.is_floating_point or x1.dtype.is_complex else _div


def _prepare_real_div(x1, x2):
    """RealDiv: a float x1 divides as torch.div; an integer quotient is cast back to x1's dtype."""
    return torch.div if x1.dtype.is_floating_point else _real_div


_BINARY = {
    "Add": ("add", torch.add), "AddV2": ("add_v2", torch.add), "Sub": ("sub", torch.sub),
    "Mul": ("mul", torch.mul), "RealDiv": ("real_div", _real_div), "Div": ("div", _div),
    "DivNoNan": ("div_no_nan", lambda a, b: torch.where(b == 0, torch.zeros_like(a), _div(a, b))),
    "FloorDiv": ("floor_div", lambda a, b: torch.div(a, b, rounding_mode="floor")),
    "TruncateDiv": ("truncate_div", lambda a, b: torch.div(a, b, rounding_mode="trunc")),
    "FloorMod": ("floor_mod", torch.remainder), "Mod": ("mod", torch.fmod), "TruncateMod": ("truncate_mod", torch.fmod),
    "Maximum": ("maximum", torch.maximum), "Minimum": ("minimum", torch.minimum), "Pow": ("pow", torch.pow),
    "SquaredDifference": ("squared_difference", lambda a, b: (a - b) * (a - b)), "Atan2": ("atan2", torch.atan2),
}


def _is_fixed_one(spec) -> bool:
    value = spec.value
    return value is not None and value.numel() == 1 and bool(value.reshape(()) == 1)


_DENORMAL = torch.tensor(1e-40)


def _flushes_denormals() -> bool:
    """torch.set_flush_denormal(True) is in force: x * 1 then gives 0 for a denormal x."""
    return bool(torch.mul(_DENORMAL, 1.0) == 0)


def _prepare_mul(x1, x2):
    """Mul: a product with a fixed one is the other operand itself, bit for bit (x * 1 is exact for every real
    float, including -0, inf, NaN and denormals, and every integer; the one difference, a signalling NaN left
    signalling where the multiply would quiet it, is a value torch never makes), when it keeps that operand's
    shape, and unless denormals are being flushed (checked when the call is prepared). TorchAir's addmm lowering
    multiplies every float32 linear's product by alpha=1 (ge_converter/aten/addmm.py: "fp32 dtype need to
    reserve this Mul"); an NPU runs that Mul, the CPU skips the arithmetic, not the node."""
    for position, (x, other) in enumerate(((x1, x2), (x2, x1))):
        if _is_fixed_one(other) and x.dim() >= other.dim() and x.dtype != torch.bool and not x.dtype.is_complex:
            # complex: (a+bi)(1+0i) has b*0, NaN for an infinite b
            if not (x.dtype.is_floating_point and _flushes_denormals()):
                return identity_call(position)
    return torch.mul


_PREPARED = {"RealDiv": _prepare_real_div, "Div": _prepare_div, "Mul": _prepare_mul}

for _op_type, (_name, _fn) in _BINARY.items():
    _prepare = _PREPARED.get(_op_type) or binary_kernel(_name, _fn)
    ge_kernel(_op_type, one_dtype=("x1", "x2"), prepared=True)(_prepare)


@ge_kernel("AddN")
def add_n(x, *, N):
    """y = sum of the N inputs; N is the dynamic input's length, checked rather than trusted."""
    if N != len(x):
        refuse(f"attr N is {N} but the node has {len(x)} inputs")
    dtypes = {t.dtype for t in x if t is not None}
    if len(dtypes) > 1:
        refuse(f"needs inputs of one dtype (GE does not promote), got {', '.join(sorted(str(d) for d in dtypes))}")
    result = x[0].clone()
    for tensor in x[1:]:
        result = result + tensor
    return result


# ---- scalar forms ----------------------------------------------------------------------------


@ge_kernel("Axpy")
def axpy(x1, x2, *, alpha):
    """y = x1 + alpha * x2, alpha an attr (AxpyV2 has it as a tensor input)."""
    return x1 + alpha * x2


@ge_kernel("Muls")
def muls(x, *, value):
    return x * value


@ge_kernel("Adds")
def adds(x, *, value):
    return x + value


@ge_kernel("Sxpy", one_dtype=("x1", "x2", "alpha"), widen=True)
def sxpy(x1, x2, alpha):
    """y = x1 - alpha * x2 (alpha, an optional input, defaults to 1).

    The semantics come from TorchAir's only user, ``aten.rsub.Scalar(self, other, alpha)`` =
    other - alpha * self, lowered as ``Sxpy(other, self, alpha)`` (ge_converter/aten/rsub.py).
    The inputs share one dtype (TorchAir promotes them first); 16-bit floats are computed in
    float32 and rounded once.
    """
    return x1 - (x2 if alpha is None else alpha * x2)


# ---- ternary ops: a tensor combined with tensor or scalar operands (all broadcast) ------------
# With widen=True the data arrives in the dtype it is computed in (float32 for 16-bit floats), so
# a scalar operand converted to the data's dtype is in that computing dtype.


@ge_kernel("Addcdiv", one_dtype=("input_data", "x1", "x2"), accepts={"input_data": _FLOATS + (torch.int64,)},
           widen=True)
def addcdiv(input_data, x1, x2, value):
    """y = input_data + value * x1 / x2."""
    if not input_data.dtype.is_floating_point:
        # The prototype lists int64 but CANN's docs do not say how the quotient rounds.
        refuse("integer Addcdiv is not implemented (the rounding of x1 / x2 is not defined by the op)")
    return input_data + value.to(input_data.dtype) * x1 / x2


@ge_kernel("Addcmul", one_dtype=("input_data", "x1", "x2"),
           accepts={"input_data": _FLOATS + (torch.int8, torch.int32, torch.uint8, torch.int64)}, widen=True)
def addcmul(input_data, x1, x2, value):
    """y = input_data + value * x1 * x2."""
    return input_data + value.to(input_data.dtype) * x1 * x2


@ge_kernel("AxpyV2", one_dtype=("x1", "x2"),
           accepts={"x1": (torch.float16, torch.float32, torch.int32, torch.bfloat16)},
           widen=True)
def axpy_v2(x1, x2, alpha):
    """y = x1 + alpha * x2, alpha a tensor input (Axpy has it as an attr)."""
    return x1 + alpha.to(x1.dtype) * x2


@ge_kernel("Lerp", one_dtype=("start", "end"), accepts={"start": (torch.float16, torch.float32, torch.bfloat16)},
           widen=True)
def lerp(start, end, weight):
    """y = start + weight * (end - start).

    CANN's formula; eager torch.lerp switches to end - (1 - weight) * (end - start) for
    weight >= 0.5, which can differ in the last bit.
    """
    return start + weight.to(start.dtype) * (end - start)

"""Element-wise GE ops: arithmetic and comparison (broadcasting, no type promotion), unary math,
scalar forms (Muls, Adds, Axpy, Sxpy), AddN, Select, Cast, MaskedFill, ClipByValue, and Log/Exp
with their base/scale/shift attrs. Inverse trig, hyperbolic, bitwise and complex ops live in
elementwise_math; the ternary arithmetic ops (Addcdiv, Lerp, ...) in elementwise_ternary.

Each kernel follows the op's CANN prototype (`REG_OP`; TorchAir's
`_ge_concrete_graph/auto_generated_ge_raw_ops.py` lists them): inputs in prototype order,
attributes by their GE names with the prototype defaults. Transcendental functions of 16-bit
floats are computed in float32 and rounded once, as the NPU's vector units do.
"""
from __future__ import annotations

import math

import torch

from ...._ge.values import ge_dtype_to_torch
from .common import check_dtype, fail, opmath, same_dtype
from ..registry import builtin_kernel

# ---- element-wise binary ops (broadcasting, no type promotion) -------------------------------

def _binary(op_type, fn):
    def kernel(inputs, attrs, node):
        x1, x2 = inputs[0], inputs[1]
        same_dtype(op_type, (x1, x2))
        return [fn(x1, x2)]

    kernel.__name__ = f"ge_{op_type}"
    builtin_kernel(op_type)(kernel)


def _div(x1, x2):
    if x1.dtype.is_floating_point or x1.dtype.is_complex:
        return torch.div(x1, x2)
    return torch.div(x1, x2, rounding_mode="trunc")  # TF/GE Div on integers truncates


def _real_div(x1, x2):
    result = torch.div(x1, x2)
    return result if x1.dtype.is_floating_point else result.to(x1.dtype)


for _op_type, _fn in {
    "Add": torch.add, "AddV2": torch.add, "Sub": torch.sub, "Mul": torch.mul,
    "RealDiv": _real_div, "Div": _div, "DivNoNan": lambda a, b: torch.where(b == 0, torch.zeros_like(a), _div(a, b)),
    "FloorDiv": lambda a, b: torch.div(a, b, rounding_mode="floor"),
    "TruncateDiv": lambda a, b: torch.div(a, b, rounding_mode="trunc"),
    "FloorMod": torch.remainder, "Mod": torch.fmod, "TruncateMod": torch.fmod,
    "Maximum": torch.maximum, "Minimum": torch.minimum, "Pow": torch.pow,
    "SquaredDifference": lambda a, b: (a - b) * (a - b), "Atan2": torch.atan2,
    "Equal": torch.eq, "NotEqual": torch.ne, "Less": torch.lt, "LessEqual": torch.le,
    "Greater": torch.gt, "GreaterEqual": torch.ge,
    "LogicalAnd": torch.logical_and, "LogicalOr": torch.logical_or,
    "BitwiseAnd": torch.bitwise_and, "BitwiseOr": torch.bitwise_or, "BitwiseXor": torch.bitwise_xor,
}.items():
    _binary(_op_type, _fn)


@builtin_kernel("AddN")
def _add_n(inputs, attrs, node):
    """y = sum of the N inputs; N is the dynamic input's length, checked rather than trusted."""
    if attrs.get("N", len(inputs)) != len(inputs):
        fail(node, f"attr N is {attrs['N']} but the node has {len(inputs)} inputs")
    same_dtype("AddN", inputs)
    result = inputs[0].clone()
    for tensor in inputs[1:]:
        result = result + tensor
    return [result]


@builtin_kernel("Axpy")
def _axpy(inputs, attrs, node):
    return [inputs[0] + attrs.get("alpha", 1.0) * inputs[1]]


# ---- element-wise unary ops ------------------------------------------------------------------

def _unary(op_type, fn, *, widen=False):
    def kernel(inputs, attrs, node):
        x = inputs[0]
        if widen:
            return [fn(opmath(x)).to(x.dtype)]
        return [fn(x)]

    kernel.__name__ = f"ge_{op_type}"
    builtin_kernel(op_type)(kernel)


for _op_type, _fn, _widen in (
    ("Relu", torch.relu, False), ("Relu6", lambda x: torch.clamp(x, 0, 6), False),
    ("FastGelu", lambda x: x * torch.sigmoid(1.702 * x), True),
    ("Sigmoid", torch.sigmoid, True), ("Tanh", torch.tanh, True),
    ("Log1p", torch.log1p, True), ("Expm1", torch.expm1, True),
    ("Sqrt", torch.sqrt, True), ("Rsqrt", torch.rsqrt, True), ("Erf", torch.erf, True),
    ("Sin", torch.sin, True), ("Cos", torch.cos, True), ("Reciprocal", torch.reciprocal, True),
    ("Softplus", torch.nn.functional.softplus, True), ("Mish", torch.nn.functional.mish, True),
    ("Neg", torch.neg, False), ("Abs", torch.abs, False), ("Square", torch.square, False),
    ("Sign", torch.sign, False), ("Floor", torch.floor, False), ("Ceil", torch.ceil, False),
    ("Round", torch.round, False), ("LogicalNot", torch.logical_not, False),
    ("IsFinite", torch.isfinite, False), ("IsNan", torch.isnan, False), ("IsInf", torch.isinf, False),
    ("ZerosLike", torch.zeros_like, False), ("OnesLike", torch.ones_like, False),
    ("Identity", lambda x: x, False), ("TensorMove", torch.clone, False), ("Snapshot", torch.clone, False),
    ("StopGradient", lambda x: x, False),
):
    _unary(_op_type, _fn, widen=_widen)


@builtin_kernel("PreventGradient", unread_attrs={"message": "the error text for a gradient taken through it; "
                                                            "the forward is the identity"})
def _prevent_gradient(inputs, attrs, node):
    return [inputs[0]]


def _log_exp_float(node, x):
    """Log/Exp take integer and bool inputs too; their result is float32 there (the output desc
    TorchAir writes from the FX meta), never cast back to the integer dtype."""
    if x.dtype.is_floating_point or x.dtype.is_complex:
        return opmath(x), x.dtype
    check_dtype(node, "x", x, (torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.bool))
    return x.to(torch.float32), torch.float32


def _base_log(node, base):
    """ln(base) for the base attr of Log/Exp: -1 (the default) means e; other values must be > 0."""
    if base == -1.0:
        return None
    if not base > 0:
        fail(node, f"base must be -1 (natural) or > 0, got {base}")
    return math.log(base)


@builtin_kernel("Log")
def _log(inputs, attrs, node):
    """y = log_base(shift + scale * x); base -1 (the default) is the natural log.

    TorchAir lowers log2/log10 to Log(base=2/10), so base is part of the result, not a hint.
    """
    wide, out_dtype = _log_exp_float(node, inputs[0])
    ln_base = _base_log(node, attrs.get("base", -1.0))
    result = torch.log(attrs.get("shift", 0.0) + attrs.get("scale", 1.0) * wide)
    if ln_base is not None:
        result = result / ln_base
    return [result.to(out_dtype)]


@builtin_kernel("Exp")
def _exp(inputs, attrs, node):
    """y = base ** (shift + scale * x); base -1 (the default) is e."""
    wide, out_dtype = _log_exp_float(node, inputs[0])
    ln_base = _base_log(node, attrs.get("base", -1.0))
    exponent = attrs.get("shift", 0.0) + attrs.get("scale", 1.0) * wide
    result = torch.exp(exponent if ln_base is None else exponent * ln_base)
    return [result.to(out_dtype)]


@builtin_kernel("IdentityN")
def _identity_n(inputs, attrs, node):
    return list(inputs)


@builtin_kernel("Muls")
def _muls(inputs, attrs, node):
    return [inputs[0] * attrs["value"]]


@builtin_kernel("Adds")
def _adds(inputs, attrs, node):
    return [inputs[0] + attrs["value"]]


@builtin_kernel("ClipByValue")
def _clip_by_value(inputs, attrs, node):
    x, low, high = inputs
    return [torch.minimum(torch.maximum(x, low), high)]


@builtin_kernel("SelectV2", "Select")
def _select(inputs, attrs, node):
    condition, then, otherwise = inputs
    same_dtype(node.type, (then, otherwise))
    condition = condition.bool()
    if node.type == "Select" and condition.dim() == 1 and then.dim() > 1:
        # TF/GE Select: a 1-D condition picks whole rows along the first dimension.
        condition = condition.reshape([-1] + [1] * (then.dim() - 1))
    return [torch.where(condition, then, otherwise)]


@builtin_kernel("Cast")
def _cast(inputs, attrs, node):
    return [inputs[0].to(ge_dtype_to_torch(attrs["dst_type"], where="Cast dst_type: "))]


@builtin_kernel("MaskedFill")
def _masked_fill(inputs, attrs, node):
    x, mask, value = inputs
    return [torch.where(mask.bool(), value.to(x.dtype), x)]


@builtin_kernel("Sxpy")
def _sxpy(inputs, attrs, node):
    """y = x1 - alpha * x2 (alpha defaults to 1).

    The semantics come from TorchAir's only user, ``aten.rsub.Scalar(self, other, alpha)`` =
    other - alpha * self, lowered as ``Sxpy(other, self, alpha)`` (ge_converter/aten/rsub.py).
    16-bit floats are computed in float32 and rounded once.
    """
    x1, x2 = inputs[0], inputs[1]
    alpha = inputs[2] if len(inputs) > 2 else None
    dtypes = {t.dtype for t in (x1, x2, alpha) if t is not None}
    if len(dtypes) > 1:
        raise TypeError(f"Sxpy needs inputs of one dtype (TorchAir promotes them first), got {sorted(map(str, dtypes))}")
    result = opmath(x1) - (opmath(x2) if alpha is None else opmath(alpha) * opmath(x2))
    return [result.to(x1.dtype)]

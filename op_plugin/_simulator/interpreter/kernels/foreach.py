"""The GE `Foreach*` ops: one element-wise op applied to each tensor of a list (TorchAir lowers
`aten._foreach_*` to them).

Layout: GE flattens each DYNAMIC_INPUT into consecutive inputs, so a node with tensor lists
x1, x2 of length N and a scalar input gets 2N + 1 inputs, in prototype order; its DYNAMIC_OUTPUT
y is N outputs. N is the node's number of outputs; every list has that length (checked).
Operand kinds, from the CANN prototypes (TorchAir's `auto_generated_ge_raw_ops.py`):

* `...Scalar`: one scalar tensor (0-d or one element) for every list entry;
* `...ScalarList`: a 1-D tensor `scalars` of N values, value i for tensor i;
* `...List`: a second (third) tensor list, element-wise, with an `alpha` scalar for Add/Sub.

16-bit floats are computed in float32 and rounded once per output; a scalar operand is widened to
that computation dtype (TorchAir gives bf16 lists a float32 scalar, ScalarList of ints int64).
The `Acos`/`Asin`/`Atan` types are registered under both spellings: the REG_OP names say
ForeachACos/ASin/ATan, TorchAir's generated builders emit ForeachAcos/Asin/Atan.
"""
from __future__ import annotations

import torch

from .common import check_dtype, fail, opmath
from ..registry import builtin_kernel

# The REG_OP dtype lists, each with bfloat16 added: TorchAir's own declared cases for these
# converters feed bf16 tensors (and lists mixing float32, float16 and bf16, each entry computed and
# returned in its own dtype), while the REG_OP text in this TorchAir lists float32/float16 only.
_F = (torch.float32, torch.float16, torch.bfloat16)
_FI = _F + (torch.int32,)


def _split(node, inputs, lists, *, lead=0, trail=0):
    """(scalar inputs before, [list, ...], scalar inputs after) of a node with `lists` tensor lists."""
    n = len(node.output_desc)
    if len(inputs) != lead + lists * n + trail:
        fail(node, f"expected {lists} tensor lists of {n} (one per output) and {lead + trail} scalar input(s), "
                   f"got {len(inputs)} inputs")
    body = inputs[lead:lead + lists * n]
    return inputs[:lead], [body[i * n:(i + 1) * n] for i in range(lists)], inputs[lead + lists * n:]


def _check_list(node, name, tensors, allowed):
    for i, t in enumerate(tensors):
        check_dtype(node, f"{name}[{i}]", t, allowed)


def _scalar_values(node, scalar, n, per_tensor):
    """The operand for each of the n tensors: the one scalar, or the i-th of a ScalarList."""
    if per_tensor:
        if scalar.numel() != n:
            fail(node, f"scalars has {scalar.numel()} values for {n} tensors")
        return list(scalar.reshape(-1))
    if scalar.numel() != 1:
        fail(node, f"scalar must have one element, got shape {tuple(scalar.shape)}")
    return [scalar.reshape(())] * n


def _finish(x, result, out_dtype=None):
    return result.to(out_dtype or x.dtype)


# ---- unary ----------------------------------------------------------------------------------

def _unary(op_types, fn, allowed):
    def kernel(inputs, attrs, node):
        _, (xs,), _ = _split(node, inputs, 1)
        _check_list(node, "x", xs, allowed)
        return [_finish(x, fn(opmath(x))) for x in xs]

    kernel.__name__ = f"ge_{op_types[0]}"
    builtin_kernel(*op_types)(kernel)


for _types, _fn, _allowed in (
    (("ForeachAbs",), torch.abs, _FI), (("ForeachNeg",), torch.neg, _FI),
    (("ForeachACos", "ForeachAcos"), torch.acos, _F), (("ForeachASin", "ForeachAsin"), torch.asin, _F),
    (("ForeachATan", "ForeachAtan"), torch.atan, _F), (("ForeachCos",), torch.cos, _F),
    (("ForeachSin",), torch.sin, _F), (("ForeachTan",), torch.tan, _F), (("ForeachCosh",), torch.cosh, _F),
    (("ForeachSinh",), torch.sinh, _F), (("ForeachTanh",), torch.tanh, _F), (("ForeachSqrt",), torch.sqrt, _F),
    (("ForeachExp",), torch.exp, _F), (("ForeachExpm1",), torch.expm1, _F), (("ForeachErf",), torch.erf, _F),
    (("ForeachErfc",), torch.erfc, _F), (("ForeachLog",), torch.log, _F), (("ForeachLog2",), torch.log2, _F),
    (("ForeachLog10",), torch.log10, _F), (("ForeachLog1p",), torch.log1p, _F),
    (("ForeachReciprocal",), torch.reciprocal, _F), (("ForeachSigmoid",), torch.sigmoid, _F),
):
    _unary(_types, _fn, _allowed)


# ---- a tensor list and a scalar / a ScalarList ------------------------------------------------

_BINARY = {
    "Add": torch.add, "Sub": torch.sub, "Mul": torch.mul, "Div": torch.div,
    "Maximum": torch.maximum, "Minimum": torch.minimum, "Pow": torch.pow,
}


def _with_scalar(op_type, fn, *, per_tensor):
    divides = op_type.startswith("ForeachDiv")

    def kernel(inputs, attrs, node):
        _, (xs,), (scalar,) = _split(node, inputs, 1, trail=1)
        _check_list(node, "x", xs, _FI)
        results = []
        for x, s in zip(xs, _scalar_values(node, scalar, len(xs), per_tensor)):
            wide = _div_operand(x) if divides else opmath(x)
            result = fn(wide, s.to(wide.dtype) if wide.dtype.is_floating_point else s)
            results.append(_finish(x, result, _div_dtype(x) if divides else None))
        return results

    kernel.__name__ = f"ge_{op_type}"
    builtin_kernel(op_type)(kernel)


def _div_operand(x):
    return opmath(x) if x.dtype.is_floating_point else x.to(torch.float32)


def _div_dtype(x):
    """ForeachDiv* output only float types: an int32 list divides into float32."""
    return x.dtype if x.dtype.is_floating_point else torch.float32


for _name, _fn in _BINARY.items():
    _with_scalar(f"Foreach{_name}Scalar", _fn, per_tensor=False)
    _with_scalar(f"Foreach{_name}ScalarList", _fn, per_tensor=True)


@builtin_kernel("ForeachPowScalarAndTensor")
def _pow_scalar_and_tensor(inputs, attrs, node):
    """y_i = scalar ** x_i."""
    (scalar,), (xs,), _ = _split(node, inputs, 1, lead=1)
    _check_list(node, "x", xs, _FI)
    base = _scalar_values(node, scalar, len(xs), False)[0]
    return [_finish(x, torch.pow(base.to(opmath(x).dtype), opmath(x))) for x in xs]


# ---- two tensor lists -----------------------------------------------------------------------

def _two_lists(op_type, fn, allowed, *, alpha=False):
    def kernel(inputs, attrs, node):
        _, (x1s, x2s), rest = _split(node, inputs, 2, trail=1 if alpha else 0)
        _check_list(node, "x1", x1s, allowed)
        _check_list(node, "x2", x2s, allowed)
        scale = _scalar_values(node, rest[0], 1, False)[0] if alpha else None
        results = []
        for x1, x2 in zip(x1s, x2s):
            a, b = opmath(x1), opmath(x2)
            if scale is not None:
                b = scale.to(b.dtype) * b
            results.append(_finish(x1, fn(a, b)))
        return results

    kernel.__name__ = f"ge_{op_type}"
    builtin_kernel(op_type)(kernel)


_two_lists("ForeachAddList", torch.add, _FI, alpha=True)   # y = x1 + alpha * x2
_two_lists("ForeachSubList", torch.sub, _FI, alpha=True)   # y = x1 - alpha * x2
for _name, _fn, _allowed in (("Mul", torch.mul, _FI), ("Div", torch.div, _F), ("Maximum", torch.maximum, _FI),
                             ("Minimum", torch.minimum, _FI), ("Pow", torch.pow, _FI)):
    _two_lists(f"Foreach{_name}List", _fn, _allowed)


# ---- x + scalar * (x1 op x2), Lerp, Norm, RoundOffNumber --------------------------------------

def _addc(op_type, combine, first, allowed, *, per_tensor):
    """y_i = x_i + s_i * combine(x1_i, x2_i): s the one scalar, or the i-th of scalars."""
    def kernel(inputs, attrs, node):
        _, (xs, x1s, x2s), (scalar,) = _split(node, inputs, 3, trail=1)
        for name, tensors in zip((first, "x1", "x2") if first == "x" else ("x1", "x2", "x3"), (xs, x1s, x2s)):
            _check_list(node, name, tensors, allowed)
        results = []
        for x, x1, x2, s in zip(xs, x1s, x2s, _scalar_values(node, scalar, len(xs), per_tensor)):
            wide = opmath(x)
            if combine is torch.div and not wide.dtype.is_floating_point:
                fail(node, "integer Addcdiv is not implemented (the rounding of x1 / x2 is not defined by the op)")
            results.append(_finish(x, wide + s.to(wide.dtype) * combine(opmath(x1), opmath(x2))))
        return results

    kernel.__name__ = f"ge_{op_type}"
    builtin_kernel(op_type)(kernel)


_addc("ForeachAddcdivScalar", torch.div, "x", _FI, per_tensor=False)
_addc("ForeachAddcdivScalarList", torch.div, "x", _FI, per_tensor=True)
_addc("ForeachAddcdivList", torch.div, "x", _FI, per_tensor=True)  # scalar: a tensor of N values
_addc("ForeachAddcmulScalar", torch.mul, "x1", _FI, per_tensor=False)
_addc("ForeachAddcmulScalarList", torch.mul, "x1", _FI, per_tensor=True)
_addc("ForeachAddcmulList", torch.mul, "x", _FI, per_tensor=True)


def _lerp(op_type, *, per_tensor):
    """y_i = x1_i + w_i * (x2_i - x1_i) (CANN's formula, see Lerp in elementwise_ternary).

    ForeachLerpList's weight: TorchAir passes `_foreach_lerp.List`'s weight tensors as a third
    list (3N inputs, weight_i element-wise for x1_i); a single tensor of N values is one per tensor.
    """
    def kernel(inputs, attrs, node):
        if per_tensor and len(inputs) == 3 * len(node.output_desc):
            _, (x1s, x2s, weights), _ = _split(node, inputs, 3)
            _check_list(node, "weight", weights, _F)
        else:
            _, (x1s, x2s), (weight,) = _split(node, inputs, 2, trail=1)
            check_dtype(node, "weight", weight, _F)
            weights = _scalar_values(node, weight, len(x1s), per_tensor)
        _check_list(node, "x1", x1s, _F)
        _check_list(node, "x2", x2s, _F)
        results = []
        for x1, x2, w in zip(x1s, x2s, weights):
            start = opmath(x1)
            results.append(_finish(x1, start + w.to(start.dtype) * (opmath(x2) - start)))
        return results

    kernel.__name__ = f"ge_{op_type}"
    builtin_kernel(op_type)(kernel)


_lerp("ForeachLerpScalar", per_tensor=False)
_lerp("ForeachLerpList", per_tensor=True)


@builtin_kernel("ForeachNorm")
def _norm(inputs, attrs, node):
    """y_i = the p-norm of all elements of x_i (a 0-d tensor), p the scalar input: 0 counts the
    non-zeros, inf/-inf take the max/min magnitude."""
    _, (xs,), (scalar,) = _split(node, inputs, 1, trail=1)
    _check_list(node, "x1", xs, _F)
    # The prototype says float; TorchAir passes an integer ord (`_foreach_norm(xs, 1)`) as int64.
    check_dtype(node, "scalar", scalar, _F + (torch.int64,))
    p = float(_scalar_values(node, scalar, 1, False)[0])
    return [_finish(x, torch.linalg.vector_norm(opmath(x), ord=p)) for x in xs]


# roundMode values, from CANN's aclnnForeachRoundOffNumber docs; 7 (frac) is what torch_npu and
# TorchAir pass for _foreach_frac. Any other value: no rounding (the docs: "not rounded when no
# precision is lost", which is always the case for a same-dtype result).
_ROUND_MODES = {
    1: torch.round,                                               # half to even
    2: torch.floor,
    3: torch.ceil,
    4: lambda x: torch.sign(x) * torch.floor(torch.abs(x) + 0.5),  # half away from zero
    5: torch.trunc,
    6: lambda x: _round_half_to_odd(x),
    7: torch.frac,
}


def _round_half_to_odd(x):
    """Nearest integer, ties to the odd neighbour."""
    low = torch.floor(x)
    diff = x - low
    odd_low = torch.remainder(low, 2) == 1
    return torch.where(diff > 0.5, low + 1, torch.where(diff < 0.5, low, torch.where(odd_low, low, low + 1)))


@builtin_kernel("ForeachRoundOffNumber")
def _round_off_number(inputs, attrs, node):
    """y_i = round(x_i) in roundMode (a one-element int tensor; TorchAir passes int8, the REG_OP says int64).

    Mode 4 rounds half away from zero as CANN defines it, where eager torch.round (which
    TorchAir lowers to it) rounds half to even: the two differ on exact .5 ties.
    """
    _, (xs,), (mode,) = _split(node, inputs, 1, trail=1)
    _check_list(node, "x", xs, _F)
    check_dtype(node, "roundMode", mode, (torch.int8, torch.int64))
    if mode.numel() != 1:
        fail(node, f"roundMode must have one element, got shape {tuple(mode.shape)}")
    fn = _ROUND_MODES.get(int(mode.reshape(-1)[0]), lambda x: x)
    return [_finish(x, fn(opmath(x))) for x in xs]

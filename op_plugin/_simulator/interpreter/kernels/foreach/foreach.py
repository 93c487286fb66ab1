"""The GE `Foreach*` ops: one element-wise op applied to each tensor of a list (TorchAir lowers
`aten._foreach_*` to them). Types: ForeachAbs/ACos/ASin/ATan/Cos/Sin/Tan/Cosh/Sinh/Tanh/Sqrt/Neg/
Exp/Expm1/Erf/Erfc/Log/Log2/Log10/Log1p/Reciprocal/Sigmoid (unary), Foreach{Add,Sub,Mul,Div,
Maximum,Minimum,Pow}{Scalar,ScalarList,List}, ForeachPowScalarAndTensor,
ForeachAddcdiv/Addcmul{Scalar,ScalarList,List}, ForeachLerpScalar/List, ForeachNorm,
ForeachRoundOffNumber; semantics from the CANN prototypes (TorchAir's
`auto_generated_ge_raw_ops.py`) and the aclnnForeach* docs.

A tensor list is a DYNAMIC_INPUT: the kernel gets it as a Python list (the binder groups the
node's inputs by name), and the lists of one node must have one length. Operand kinds:

* `...Scalar`: one scalar tensor (0-d or one element) for every list entry;
* `...ScalarList`: a 1-D tensor `scalars` of N values, value i for tensor i;
* `...List`: a second (third) tensor list, element-wise, with an `alpha` scalar for Add/Sub.

16-bit floats are computed in float32 and rounded once per output; a scalar operand is widened to
that computation dtype (TorchAir gives bf16 lists a float32 scalar, ScalarList of ints int64).

Types bound to a prototype other than the table's own, as TorchAir's generated builders write
their nodes (the binder reads the input descs' names, so it must name what TorchAir names):

* ForeachAcos/Asin/Atan: REG_OP(ForeachACos) etc., whose generated builders `_ForeachACos`,
  `_ForeachASin`, `_ForeachATan` set `op.type = "ForeachAcos"` ("Asin", "Atan"); both spellings
  run here, the REG_OP one under its own prototype.
* ForeachAddcdivScalar/ScalarList/List, ForeachAddcmulScalarList/List: the REG_OP names the lists
  x, x1, x2 (Addcdiv*, AddcmulList) and the scalar input `scalar`; the builders name the descs
  x1<i>, x2<i>, x3<i> and (ScalarList, List) `scalars`.
* ForeachLerpList: the REG_OP has one `weight` INPUT; the builder `_ForeachLerpList` takes a list
  `weights` and writes one desc weight<i> per tensor (TorchAir's `_foreach_lerp.List` converter),
  so weight is a dynamic input here.
"""
from __future__ import annotations

import dataclasses
import torch
from ....._ge.builtin_prototypes import builtin_prototype
from ....._ge.ir import InputKind
from ...registry import ge_kernel, refuse
from ..common import opmath, require_dtype

# The REG_OP dtype lists, each with bfloat16 added: TorchAir's own declared cases for these
# converters feed bf16 tensors (and lists mixing float32, float16 and bf16, each entry computed and
# returned in its own dtype), while the REG_OP text in this TorchAir lists float32/float16 only.
_F = (torch.float32, torch.float16, torch.bfloat16)
_FI = _F + (torch.int32,)
_DYNAMIC, _REQUIRED = InputKind.DYNAMIC, InputKind.REQUIRED


def _as_torchair_writes(reg_op_type, op_type=None, inputs=None):
    """CANN's prototype of `reg_op_type` under the type and input names TorchAir's builder writes
    (None while the wheel is not unpacked: the binder then falls back to the table)."""
    try:
        prototype = builtin_prototype(reg_op_type)
    except OSError:
        return None
    changes = {"op_type": op_type or reg_op_type}
    if inputs is not None:
        changes["inputs"] = tuple(inputs)
    return dataclasses.replace(prototype, **changes)


def _same_length(**lists):
    lengths = {name: len(tensors) for name, tensors in lists.items()}
    if len(set(lengths.values())) > 1:
        refuse("tensor lists of different lengths: " + ", ".join(f"{n} has {k}" for n, k in lengths.items()))


def _check_list(name, tensors, allowed):
    for i, t in enumerate(tensors):
        require_dtype(f"{name}[{i}]", t, allowed)


def _scalar_values(scalar, n, per_tensor):
    """The operand for each of the n tensors: the one scalar, or the i-th of a ScalarList."""
    if per_tensor:
        if scalar.numel() != n:
            refuse(f"scalars has {scalar.numel()} values for {n} tensors")
        return list(scalar.reshape(-1))
    if scalar.numel() != 1:
        refuse(f"scalar must have one element, got shape {tuple(scalar.shape)}")
    return [scalar.reshape(())] * n


def _finish(x, result, out_dtype=None):
    return result.to(out_dtype or x.dtype)


# ---- unary ----------------------------------------------------------------------------------

def _unary(op_type, fn, allowed, prototype=None):
    def kernel(x):
        _check_list("x", x, allowed)
        return tuple(_finish(t, fn(opmath(t))) for t in x)

    kernel.__name__ = f"foreach_{op_type[7:].lower()}"
    ge_kernel(op_type, prototype=prototype)(kernel)
    return kernel


for _type, _fn, _allowed in (
    ("ForeachAbs", torch.abs, _FI), ("ForeachNeg", torch.neg, _FI), ("ForeachCos", torch.cos, _F),
    ("ForeachSin", torch.sin, _F), ("ForeachTan", torch.tan, _F), ("ForeachCosh", torch.cosh, _F),
    ("ForeachSinh", torch.sinh, _F), ("ForeachTanh", torch.tanh, _F), ("ForeachSqrt", torch.sqrt, _F),
    ("ForeachExp", torch.exp, _F), ("ForeachExpm1", torch.expm1, _F), ("ForeachErf", torch.erf, _F),
    ("ForeachErfc", torch.erfc, _F), ("ForeachLog", torch.log, _F), ("ForeachLog2", torch.log2, _F),
    ("ForeachLog10", torch.log10, _F), ("ForeachLog1p", torch.log1p, _F),
    ("ForeachReciprocal", torch.reciprocal, _F), ("ForeachSigmoid", torch.sigmoid, _F),
):
    _unary(_type, _fn, _allowed)

# REG_OP(ForeachACos) / ASin / ATan, and the op.type TorchAir's generated builders give them.
for _reg_op, _torchair_type, _fn in (("ForeachACos", "ForeachAcos", torch.acos),
                                     ("ForeachASin", "ForeachAsin", torch.asin),
                                     ("ForeachATan", "ForeachAtan", torch.atan)):
    _kernel = _unary(_reg_op, _fn, _F)
    ge_kernel(_torchair_type, prototype=_as_torchair_writes(_reg_op, _torchair_type))(_kernel)


# ---- a tensor list and a scalar / a ScalarList ------------------------------------------------

_BINARY = {
    "Add": torch.add, "Sub": torch.sub, "Mul": torch.mul, "Div": torch.div,
    "Maximum": torch.maximum, "Minimum": torch.minimum, "Pow": torch.pow,
}


def _div_operand(x):
    return opmath(x) if x.dtype.is_floating_point else x.to(torch.float32)


def _div_dtype(x):
    """ForeachDiv* output only float types: an int32 list divides into float32."""
    return x.dtype if x.dtype.is_floating_point else torch.float32


def _apply_scalars(op_type, fn, xs, scalar, per_tensor):
    _check_list("x", xs, _FI)
    divides = op_type.startswith("ForeachDiv")
    results = []
    for x, s in zip(xs, _scalar_values(scalar, len(xs), per_tensor), strict=True):
        wide = _div_operand(x) if divides else opmath(x)
        result = fn(wide, s.to(wide.dtype) if wide.dtype.is_floating_point else s)
        results.append(_finish(x, result, _div_dtype(x) if divides else None))
    return tuple(results)


def _with_scalar(op_type, fn):
    def kernel(x, scalar):
        return _apply_scalars(op_type, fn, x, scalar, False)

    kernel.__name__ = f"foreach_{op_type[7:].lower()}"
    ge_kernel(op_type)(kernel)


def _with_scalar_list(op_type, fn):
    def kernel(x, scalars):
        return _apply_scalars(op_type, fn, x, scalars, True)

    kernel.__name__ = f"foreach_{op_type[7:].lower()}"
    ge_kernel(op_type)(kernel)


for _name, _fn in _BINARY.items():
    _with_scalar(f"Foreach{_name}Scalar", _fn)
    _with_scalar_list(f"Foreach{_name}ScalarList", _fn)


@ge_kernel("ForeachPowScalarAndTensor")
def foreach_pow_scalar_and_tensor(scalar, x):
    """y_i = scalar ** x_i."""
    _check_list("x", x, _FI)
    base = _scalar_values(scalar, 1, False)[0]
    return tuple(_finish(t, torch.pow(base.to(opmath(t).dtype), opmath(t))) for t in x)


# ---- two tensor lists -----------------------------------------------------------------------

def _apply_lists(fn, x1s, x2s, allowed, alpha=None):
    _same_length(x1=x1s, x2=x2s)
    _check_list("x1", x1s, allowed)
    _check_list("x2", x2s, allowed)
    scale = _scalar_values(alpha, 1, False)[0] if alpha is not None else None
    results = []
    for x1, x2 in zip(x1s, x2s, strict=True):
        a, b = opmath(x1), opmath(x2)
        if scale is not None:
            b = scale.to(b.dtype) * b
        results.append(_finish(x1, fn(a, b)))
    return tuple(results)


def _two_lists_alpha(op_type, fn, allowed):
    """y = fn(x1, alpha * x2)."""
    def kernel(x1, x2, alpha):
        return _apply_lists(fn, x1, x2, allowed, alpha)

    kernel.__name__ = f"foreach_{op_type[7:].lower()}"
    ge_kernel(op_type)(kernel)


def _two_lists(op_type, fn, allowed):
    def kernel(x1, x2):
        return _apply_lists(fn, x1, x2, allowed)

    kernel.__name__ = f"foreach_{op_type[7:].lower()}"
    ge_kernel(op_type)(kernel)


_two_lists_alpha("ForeachAddList", torch.add, _FI)   # y = x1 + alpha * x2
_two_lists_alpha("ForeachSubList", torch.sub, _FI)   # y = x1 - alpha * x2
for _name, _fn, _allowed in (("Mul", torch.mul, _FI), ("Div", torch.div, _F), ("Maximum", torch.maximum, _FI),
                             ("Minimum", torch.minimum, _FI), ("Pow", torch.pow, _FI)):
    _two_lists(f"Foreach{_name}List", _fn, _allowed)


# ---- x + scalar * (x1 op x2), Lerp, Norm, RoundOffNumber --------------------------------------

def _apply_addc(combine, xs, x1s, x2s, scalar, per_tensor):
    """y_i = x_i + s_i * combine(x1_i, x2_i): s the one scalar, or the i-th of scalars (the lists
    x, x1, x2 of the formula are the inputs x1, x2, x3 as TorchAir names them)."""
    _same_length(x1=xs, x2=x1s, x3=x2s)
    for name, tensors in (("x1", xs), ("x2", x1s), ("x3", x2s)):
        _check_list(name, tensors, _FI)
    results = []
    for x, x1, x2, s in zip(xs, x1s, x2s, _scalar_values(scalar, len(xs), per_tensor), strict=True):
        wide = opmath(x)
        if combine is torch.div and not wide.dtype.is_floating_point:
            refuse("integer Addcdiv is not implemented (the rounding of x1 / x2 is not defined by the op)")
        results.append(_finish(x, wide + s.to(wide.dtype) * combine(opmath(x1), opmath(x2))))
    return tuple(results)


_ADDC_LISTS = (("x1", _DYNAMIC), ("x2", _DYNAMIC), ("x3", _DYNAMIC))


def _addc_scalar(op_type, combine, prototype=None):
    def kernel(x1, x2, x3, scalar):
        return _apply_addc(combine, x1, x2, x3, scalar, False)

    kernel.__name__ = f"foreach_{op_type[7:].lower()}"
    ge_kernel(op_type, prototype=prototype)(kernel)


def _addc_scalars(op_type, combine):
    """ScalarList and List: `scalars` holds one value per tensor (List: a tensor of N values)."""
    def kernel(x1, x2, x3, scalars):
        return _apply_addc(combine, x1, x2, x3, scalars, True)

    kernel.__name__ = f"foreach_{op_type[7:].lower()}"
    ge_kernel(op_type, prototype=_as_torchair_writes(op_type, inputs=_ADDC_LISTS + (("scalars", _REQUIRED),)))(kernel)


_addc_scalar("ForeachAddcdivScalar", torch.div, _as_torchair_writes("ForeachAddcdivScalar", inputs=_ADDC_LISTS + (
    ("scalar", _REQUIRED),)))
_addc_scalars("ForeachAddcdivScalarList", torch.div)
_addc_scalars("ForeachAddcdivList", torch.div)
_addc_scalar("ForeachAddcmulScalar", torch.mul)  # the REG_OP's own names are TorchAir's
_addc_scalars("ForeachAddcmulScalarList", torch.mul)
_addc_scalars("ForeachAddcmulList", torch.mul)


def _apply_lerp(x1s, x2s, weights):
    _check_list("x1", x1s, _F)
    _check_list("x2", x2s, _F)
    results = []
    for x1, x2, w in zip(x1s, x2s, weights, strict=True):
        start = opmath(x1)
        results.append(_finish(x1, start + w.to(start.dtype) * (opmath(x2) - start)))
    return tuple(results)


@ge_kernel("ForeachLerpScalar")
def foreach_lerp_scalar(x1, x2, weight):
    """y_i = x1_i + w * (x2_i - x1_i) (CANN's formula, see Lerp in the element-wise kernels)."""
    _same_length(x1=x1, x2=x2)
    require_dtype("weight", weight, _F)
    return _apply_lerp(x1, x2, _scalar_values(weight, len(x1), False))


@ge_kernel("ForeachLerpList", prototype=_as_torchair_writes("ForeachLerpList", inputs=(
    ("x1", _DYNAMIC), ("x2", _DYNAMIC), ("weight", _DYNAMIC))))
def foreach_lerp_list(x1, x2, weight):
    """y_i = x1_i + w_i * (x2_i - x1_i).

    weight: TorchAir passes `_foreach_lerp.List`'s weight tensors as a third list (weight_i
    element-wise for x1_i); a single tensor of N values is one weight per tensor.
    """
    _same_length(x1=x1, x2=x2)
    if len(weight) == len(x1):
        _check_list("weight", weight, _F)
        weights = weight
    elif len(weight) == 1:
        require_dtype("weight", weight[0], _F)
        weights = _scalar_values(weight[0], len(x1), True)
    else:
        refuse(f"{len(weight)} weight tensors for {len(x1)} tensors (one per tensor, or one of N values)")
    return _apply_lerp(x1, x2, weights)


@ge_kernel("ForeachNorm")
def foreach_norm(x1, scalar):
    """y_i = the p-norm of all elements of x_i (a 0-d tensor), p the scalar input: 0 counts the
    non-zeros, inf/-inf take the max/min magnitude."""
    _check_list("x1", x1, _F)
    # The prototype says float; TorchAir passes an integer ord (`_foreach_norm(xs, 1)`) as int64.
    require_dtype("scalar", scalar, _F + (torch.int64,))
    p = float(_scalar_values(scalar, 1, False)[0])
    return tuple(_finish(x, torch.linalg.vector_norm(opmath(x), ord=p)) for x in x1)


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


@ge_kernel("ForeachRoundOffNumber")
def foreach_round_off_number(x, roundMode):  # the prototype's input name
    """y_i = round(x_i) in roundMode (a one-element int tensor; TorchAir passes int8, the REG_OP says int64).

    Mode 4 rounds half away from zero as CANN defines it, where eager torch.round (which
    TorchAir lowers to it) rounds half to even: the two differ on exact .5 ties.
    """
    _check_list("x", x, _F)
    require_dtype("roundMode", roundMode, (torch.int8, torch.int64))
    if roundMode.numel() != 1:
        refuse(f"roundMode must have one element, got shape {tuple(roundMode.shape)}")
    fn = _ROUND_MODES.get(int(roundMode.reshape(-1)[0]), lambda t: t)
    return tuple(_finish(t, fn(opmath(t))) for t in x)

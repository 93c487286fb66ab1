"""Element-wise GE ops combining a tensor with tensor or scalar operands: Addcdiv, Addcmul, AxpyV2,
ClipByValueV2, Lerp, ThresholdV2, and NanToNum (whose replacement values are attrs).

All operands broadcast. Each kernel follows its CANN prototype (TorchAir's
`_ge_concrete_graph/auto_generated_ge_raw_ops.py`); 16-bit floats are computed in float32 and
rounded once. The scalar operands (value, alpha, weight, threshold) may come in another dtype than
the data (TorchAir makes a scalar a Const of its own dtype), so they are widened, not checked equal.
"""
from __future__ import annotations

import torch

from .common import check_dtype, fail, opmath
from ..registry import builtin_kernel

_FLOATS = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
_NUMBERS = _FLOATS + (torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8, torch.uint16,
                      torch.uint32, torch.uint64, torch.complex64, torch.complex128)


def _same(node, named):
    dtypes = {name: t.dtype for name, t in named.items()}
    if len(set(dtypes.values())) > 1:
        fail(node, "inputs must have one dtype (GE does not promote), got "
                   + ", ".join(f"{name} {str(d).replace('torch.', '')}" for name, d in dtypes.items()))


def _scalar_like(scalar, x):
    """A scalar operand in the dtype x is computed in (float32 for 16-bit floats)."""
    return scalar.to(opmath(x).dtype)


@builtin_kernel("Addcdiv")
def _addcdiv(inputs, attrs, node):
    """y = input_data + value * x1 / x2."""
    data, x1, x2, value = inputs
    check_dtype(node, "input_data", data, _FLOATS + (torch.int64,))
    _same(node, {"input_data": data, "x1": x1, "x2": x2})
    if not data.dtype.is_floating_point:
        # The prototype lists int64 but CANN's docs do not say how the quotient rounds.
        fail(node, "integer Addcdiv is not implemented (the rounding of x1 / x2 is not defined by the op)")
    wide = opmath(data)
    return [(wide + _scalar_like(value, data) * opmath(x1) / opmath(x2)).to(data.dtype)]


@builtin_kernel("Addcmul")
def _addcmul(inputs, attrs, node):
    """y = input_data + value * x1 * x2."""
    data, x1, x2, value = inputs
    check_dtype(node, "input_data", data, _FLOATS + (torch.int8, torch.int32, torch.uint8, torch.int64))
    _same(node, {"input_data": data, "x1": x1, "x2": x2})
    wide = opmath(data)
    return [(wide + _scalar_like(value, data) * opmath(x1) * opmath(x2)).to(data.dtype)]


@builtin_kernel("AxpyV2")
def _axpy_v2(inputs, attrs, node):
    """y = x1 + alpha * x2, alpha a tensor input (Axpy has it as an attr)."""
    x1, x2, alpha = inputs
    check_dtype(node, "x1", x1, (torch.float16, torch.float32, torch.int32, torch.bfloat16))
    _same(node, {"x1": x1, "x2": x2})
    return [(opmath(x1) + _scalar_like(alpha, x1) * opmath(x2)).to(x1.dtype)]


@builtin_kernel("ClipByValueV2")
def _clip_by_value_v2(inputs, attrs, node):
    """y = min(max(x, clip_value_min), clip_value_max); NaN in x stays NaN; min > max gives max."""
    x, low, high = inputs
    check_dtype(node, "x", x, _NUMBERS)
    _same(node, {"x": x, "clip_value_min": low, "clip_value_max": high})
    return [torch.minimum(torch.maximum(x, low), high)]


@builtin_kernel("Lerp")
def _lerp(inputs, attrs, node):
    """y = start + weight * (end - start).

    CANN's formula; eager torch.lerp switches to end - (1 - weight) * (end - start) for
    weight >= 0.5, which can differ in the last bit.
    """
    start, end, weight = inputs
    check_dtype(node, "start", start, (torch.float16, torch.float32, torch.bfloat16))
    _same(node, {"start": start, "end": end})
    wide = opmath(start)
    return [(wide + _scalar_like(weight, start) * (opmath(end) - wide)).to(start.dtype)]


@builtin_kernel("NanToNum")
def _nan_to_num(inputs, attrs, node):
    """NaN -> attr nan, +inf -> attr posinf, -inf -> attr neginf (all required; rounded to x's dtype)."""
    x = inputs[0]
    check_dtype(node, "x", x, (torch.bfloat16, torch.float16, torch.float32))
    missing = [name for name in ("nan", "posinf", "neginf") if attrs.get(name) is None]
    if missing:
        fail(node, f"required attr(s) {', '.join(missing)} not set")
    return [torch.nan_to_num(x, nan=attrs["nan"], posinf=attrs["posinf"], neginf=attrs["neginf"])]


@builtin_kernel("ThresholdV2")
def _threshold_v2(inputs, attrs, node):
    """y = x where x > threshold, else value (0 when the optional value input is unfed)."""
    x, threshold = inputs[0], inputs[1]
    value = inputs[2] if len(inputs) > 2 else None
    check_dtype(node, "x", x, (torch.float16, torch.float32, torch.int8, torch.int32, torch.uint8, torch.int64))
    replacement = torch.zeros((), dtype=x.dtype) if value is None else value.to(x.dtype)
    return [torch.where(opmath(x) > _scalar_like(threshold, x), x, replacement)]

"""Selection GE ops: Select and SelectV2 (hicann ops-math ``math/``), and the element-wise conversion ops
that pick between a value and a bound or fill: ClipByValue, ClipByValueV2, MaskedFill (ops-math ``conversion/``).

Each follows its CANN prototype (TorchAir's `_ge_concrete_graph/auto_generated_ge_raw_ops.py`); they broadcast
and do not promote.
"""
from __future__ import annotations

import torch
from ...registry import ge_kernel


# ---- selection -------------------------------------------------------------------------------


@ge_kernel("Select", one_dtype=("x1", "x2"))
def select(condition, x1, x2):
    """y = x1 where condition, else x2 (broadcasting).

    TF/GE Select: a 1-D condition picks whole rows along the first dimension."""
    condition = condition.bool()
    if condition.dim() == 1 and x1.dim() > 1:
        condition = condition.reshape([-1] + [1] * (x1.dim() - 1))
    return torch.where(condition, x1, x2)


@ge_kernel("SelectV2", one_dtype=("then", "else_"), prepared=True)
def select_v2(condition, then, else_):
    """result = then where condition, else `else` (broadcasting; a 1-D condition is not special).
    `else_` is GE's input `else`, a Python keyword (the binder reads a trailing `_` so)."""
    where = torch.where
    if condition.dtype == torch.bool:
        return where
    return lambda condition, then, else_: where(condition.bool(), then, else_)

_NUMBERS = (torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.int8, torch.int16, torch.int32,
            torch.int64, torch.uint8, torch.uint16, torch.uint32, torch.uint64, torch.complex64, torch.complex128)


@ge_kernel("ClipByValue")
def clip_by_value(x, clip_value_min, clip_value_max):
    """y = min(max(x, clip_value_min), clip_value_max), broadcasting."""
    return torch.minimum(torch.maximum(x, clip_value_min), clip_value_max)


@ge_kernel("ClipByValueV2", one_dtype=("x", "clip_value_min", "clip_value_max"), accepts={"x": _NUMBERS})
def clip_by_value_v2(x, clip_value_min, clip_value_max):
    """y = min(max(x, clip_value_min), clip_value_max); NaN in x stays NaN; min > max gives max."""
    return torch.minimum(torch.maximum(x, clip_value_min), clip_value_max)


@ge_kernel("MaskedFill", prepared=True)
def masked_fill(x, mask, value):
    """y = value (converted to x's dtype) where mask, else x."""
    where = torch.where
    if mask.dtype == torch.bool and value.dtype == x.dtype:  # nothing to convert
        return lambda x, mask, value: where(mask, value, x)
    dtype = x.dtype
    return lambda x, mask, value: where(mask.bool(), value.to(dtype), x)

"""GE ops that make new tensors from a shape, a value or a range: Fill, FillD, Empty, Range, LinSpace.

Semantics from the CANN prototypes (``REG_OP`` in TorchAir's ``auto_generated_ge_raw_ops.py``; hicann
ops-math files Fill in ``conversion/`` and Range, LinSpace in ``math/``; split from `shape` by sub-concept
so that neither passes 400 lines) and TorchAir's converters (``ge_converter/aten/full.py``,
``new_empty.py``, ``new_empty_strided.py``, ``select_backward.py``, ``arange.py``, ``linspace.py``).
"""
from __future__ import annotations

import math
import torch
from ....._ge.values import ge_dtype_to_torch
from ...registry import ge_kernel, refuse
from ..common import int_list


@ge_kernel("Fill")
def fill(dims, value):
    return torch.full(int_list(dims), value.item(), dtype=value.dtype)


@ge_kernel("FillD")
def fill_d(value, *, dims):
    return value.reshape(()).expand(dims).clone()


_EMPTY_DTYPES = (torch.float32, torch.float16, torch.int8, torch.int16, torch.uint16, torch.uint8, torch.int32,
                 torch.int64, torch.uint32, torch.uint64, torch.bool, torch.float64)


@ge_kernel("Empty", accepts={"shape": (torch.int32,)},
           layout_only={"init": "init=True asks for zeros; the simulator writes zeros either way"})
def empty(shape, *, dtype):
    """A tensor of `shape` and `dtype`. With init=True its elements are zero; with init=False (the
    default) CANN leaves them unspecified, and the simulator writes zeros as well so that runs are
    reproducible (no graph may read them before writing: eager's torch.empty is as undefined)."""
    dims = int_list(shape)
    if any(d < 0 for d in dims):
        refuse(f"shape {dims} has a negative dim")
    out_dtype = ge_dtype_to_torch(dtype, where="Empty dtype: ")
    if out_dtype not in _EMPTY_DTYPES:
        refuse(f"dtype {out_dtype} is not in the prototype's output types")
    return torch.zeros(dims, dtype=out_dtype)


@ge_kernel("Range")
def range_(start, limit, delta):
    dtype = start.dtype
    values = [t.item() for t in (start, limit, delta)]
    count = max(0, math.ceil((values[1] - values[0]) / values[2]))
    return (values[0] + torch.arange(count, dtype=torch.float64) * values[2]).to(dtype) \
        if dtype.is_floating_point else torch.arange(*values, dtype=dtype)


@ge_kernel("LinSpace", one_dtype=("start", "stop"),
           accepts={"start": (torch.float32, torch.float64), "num": (torch.int32, torch.int64)})
def lin_space(start, stop, num):
    """`num` evenly spaced values from start to stop, both included (num=1: just start)."""
    if start.numel() != 1 or stop.numel() != 1 or num.numel() != 1:
        refuse("start, stop and num must be scalars")
    count = int_list(num)[0]
    if count < 0:
        refuse(f"num {count} is negative")
    return torch.linspace(start.item(), stop.item(), count, dtype=start.dtype)

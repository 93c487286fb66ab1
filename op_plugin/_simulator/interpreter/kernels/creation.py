"""GE ops that make new tensors from a shape or a range: Empty, LinSpace.

From the CANN prototypes and TorchAir's converters (``ge_converter/aten/new_empty.py``,
``new_empty_strided.py``, ``select_backward.py``, ``linspace.py``).
"""
from __future__ import annotations

import torch

from ...._ge.values import ge_dtype_to_torch
from .common import check_dtype, fail, int_list
from ..registry import builtin_kernel

_EMPTY_DTYPES = (torch.float32, torch.float16, torch.int8, torch.int16, torch.uint16, torch.uint8, torch.int32,
                 torch.int64, torch.uint32, torch.uint64, torch.bool, torch.float64)


@builtin_kernel("Empty", unread_attrs={"init": "init=True asks for zeros; the simulator writes zeros either way"})
def _empty(inputs, attrs, node):
    """A tensor of `shape` and `dtype`. With init=True its elements are zero; with init=False (the
    default) CANN leaves them unspecified, and the simulator writes zeros as well so that runs are
    reproducible (no graph may read them before writing: eager's torch.empty is as undefined)."""
    shape = inputs[0]
    check_dtype(node, "shape", shape, (torch.int32,))
    dims = int_list(shape)
    if any(d < 0 for d in dims):
        fail(node, f"shape {dims} has a negative dim")
    dtype = ge_dtype_to_torch(attrs.get("dtype", 3), where=f"{node.type} dtype: ")
    if dtype not in _EMPTY_DTYPES:
        fail(node, f"dtype {dtype} is not in the prototype's output types")
    return [torch.zeros(dims, dtype=dtype)]


@builtin_kernel("LinSpace")
def _lin_space(inputs, attrs, node):
    """`num` evenly spaced values from start to stop, both included (num=1: just start)."""
    start, stop, num = inputs
    check_dtype(node, "start", start, (torch.float32, torch.float64))
    if stop.dtype != start.dtype:
        fail(node, f"stop dtype {stop.dtype} differs from start dtype {start.dtype}")
    check_dtype(node, "num", num, (torch.int32, torch.int64))
    if start.numel() != 1 or stop.numel() != 1 or num.numel() != 1:
        fail(node, "start, stop and num must be scalars")
    count = int_list(num)[0]
    if count < 0:
        fail(node, f"num {count} is negative")
    return [torch.linspace(start.item(), stop.item(), count, dtype=start.dtype)]

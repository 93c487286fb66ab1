"""Sorting and searching GE ops: Sort, TopKV2, SearchSorted.

Semantics from the CANN prototypes (``REG_OP`` in TorchAir's ``auto_generated_ge_raw_ops.py``; hicann
ops-math files them in ``math/``) and TorchAir's converters (``ge_converter/aten/sort.py``,
``topk.py``, ``searchsorted.py``). Index outputs are int32 where the prototype says so (TorchAir casts
them to int64 after). Ties keep their input order (torch's CPU sort is stable), which a non-stable NPU
sort may not.
"""
from __future__ import annotations

import torch

from ...._ge.values import ge_dtype_to_torch
from ..registry import ge_kernel, refuse
from .common import int_list

_SORT_DTYPES = (torch.float16, torch.float32, torch.int16, torch.int8, torch.uint8, torch.int32, torch.int64)
_REAL_NUMBERS = (torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.int8, torch.int16, torch.int32,
                 torch.int64, torch.uint8, torch.uint16, torch.uint32, torch.uint64)


def _axis(x, axis, what):
    rank = max(x.dim(), 1)
    if not -rank <= axis < rank:
        refuse(f"{what} {axis} is out of range for rank {x.dim()}")
    return axis % rank


@ge_kernel("Sort", accepts={"x": _SORT_DTYPES})
def sort(x, *, axis, descending, stable):
    """Values sorted along `axis` (ascending unless descending) and their int32 source indices."""
    dim = _axis(x, axis, "axis")
    # stable=true keeps ties in input order; stable=false allows any order among ties, the stable
    # one included, so both are served by a stable sort
    values, indices = torch.sort(x, dim=dim, descending=descending, stable=stable or True)
    return values, indices.to(torch.int32)


# The prototype lists int32 for k; TorchAir's topk converter feeds k as an int64 Const (GE casts it
# on an NPU), so both are taken.
@ge_kernel("TopKV2", accepts={"x": _REAL_NUMBERS, "k": (torch.int32, torch.int64)})
def top_k_v2(x, k, *, sorted, dim, largest):
    """The k largest (or smallest) entries along `dim`, sorted when `sorted`, with int32 indices."""
    counts = int_list(k)
    if len(counts) != 1:
        refuse(f"k must hold one value, got {len(counts)}")
    axis = _axis(x, dim, "dim")
    length = x.shape[axis] if x.dim() else 1
    if not 0 <= counts[0] <= length:
        refuse(f"k={counts[0]} is outside [0, {length}] for dim {axis}")
    values, indices = torch.topk(x, counts[0], dim=axis, largest=largest, sorted=sorted)
    return values, indices.to(torch.int32)


@ge_kernel("SearchSorted", accepts={"sorted_sequence": _SORT_DTYPES, "values": _SORT_DTYPES,
                                    "sorter": (torch.int64,)})
def search_sorted(sorted_sequence, values, sorter, *, dtype, right):
    """For each value, the index where it would be inserted into the sorted innermost rows of
    sorted_sequence (first such index, or the last with right=true); sorter gives the sorting
    order of an unsorted sequence."""
    sequence = sorted_sequence
    if sorter is not None:
        if sorter.shape != sequence.shape:
            refuse(f"sorter {list(sorter.shape)} must have sorted_sequence's shape {list(sequence.shape)}")
        if sorter.numel() and (bool((sorter < 0).any()) or bool((sorter >= sequence.shape[-1]).any())):
            refuse("sorter holds an index out of range")
    out_dtype = ge_dtype_to_torch(dtype, where="SearchSorted dtype: ")
    if out_dtype not in (torch.int32, torch.int64):
        refuse(f"dtype {out_dtype} is not int32 or int64")
    if sequence.dim() > 1 and sequence.shape[:-1] != values.shape[:-1]:
        refuse(f"sorted_sequence {list(sequence.shape)} and values {list(values.shape)} differ "
               "in their leading dims")
    common = torch.promote_types(sequence.dtype, values.dtype)
    result = torch.searchsorted(sequence.to(common), values.to(common), right=right, sorter=sorter)
    return result.to(out_dtype)

"""Sorting and searching GE ops: Sort, TopKV2, SearchSorted.

Index outputs are int32 where the prototype says so (TorchAir casts them to int64 after). Ties keep
their input order (torch's CPU sort is stable), which a non-stable NPU sort may not.
"""
from __future__ import annotations

import torch

from ...._ge.values import ge_dtype_to_torch
from .common import check_dtype, fail, int_list
from ..registry import builtin_kernel

_SORT_DTYPES = (torch.float16, torch.float32, torch.int16, torch.int8, torch.uint8, torch.int32, torch.int64)
_REAL_NUMBERS = (torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.int8, torch.int16, torch.int32,
                 torch.int64, torch.uint8, torch.uint16, torch.uint32, torch.uint64)


def _axis(node, x, axis, what):
    rank = max(x.dim(), 1)
    if not -rank <= axis < rank:
        fail(node, f"{what} {axis} is out of range for rank {x.dim()}")
    return axis % rank


@builtin_kernel("Sort")
def _sort(inputs, attrs, node):
    """Values sorted along `axis` (ascending unless descending) and their int32 source indices."""
    x = inputs[0]
    check_dtype(node, "x", x, _SORT_DTYPES)
    axis = _axis(node, x, attrs.get("axis", -1), "axis")
    # stable=true keeps ties in input order; stable=false allows any order among ties, the stable
    # one included, so both are served by a stable sort
    stable = attrs.get("stable", False)
    values, indices = torch.sort(x, dim=axis, descending=attrs.get("descending", False), stable=stable or True)
    return [values, indices.to(torch.int32)]


@builtin_kernel("TopKV2")
def _top_k_v2(inputs, attrs, node):
    """The k largest (or smallest) entries along `dim`, sorted when `sorted`, with int32 indices."""
    x, k_input = inputs
    check_dtype(node, "x", x, _REAL_NUMBERS)
    # The prototype lists int32; TorchAir's topk converter feeds k as an int64 Const (GE casts it on
    # an NPU), so both are taken.
    check_dtype(node, "k", k_input, (torch.int32, torch.int64))
    k = int_list(k_input)
    if len(k) != 1:
        fail(node, f"k must hold one value, got {len(k)}")
    dim = _axis(node, x, attrs.get("dim", -1), "dim")
    size = x.shape[dim] if x.dim() else 1
    if not 0 <= k[0] <= size:
        fail(node, f"k={k[0]} is outside [0, {size}] for dim {dim}")
    values, indices = torch.topk(x, k[0], dim=dim, largest=attrs.get("largest", True),
                                 sorted=attrs.get("sorted", True))
    return [values, indices.to(torch.int32)]


@builtin_kernel("SearchSorted")
def _search_sorted(inputs, attrs, node):
    """For each value, the index where it would be inserted into the sorted innermost rows of
    sorted_sequence (first such index, or the last with right=true); sorter gives the sorting
    order of an unsorted sequence."""
    sequence, values = inputs[0], inputs[1]
    sorter = inputs[2] if len(inputs) > 2 else None
    check_dtype(node, "sorted_sequence", sequence, _SORT_DTYPES)
    check_dtype(node, "values", values, _SORT_DTYPES)
    if sorter is not None:
        check_dtype(node, "sorter", sorter, (torch.int64,))
        if sorter.shape != sequence.shape:
            fail(node, f"sorter {list(sorter.shape)} must have sorted_sequence's shape {list(sequence.shape)}")
        if sorter.numel() and (bool((sorter < 0).any()) or bool((sorter >= sequence.shape[-1]).any())):
            fail(node, "sorter holds an index out of range")
    out_dtype = ge_dtype_to_torch(attrs.get("dtype", 9), where=f"{node.type} dtype: ")
    if out_dtype not in (torch.int32, torch.int64):
        fail(node, f"dtype {out_dtype} is not int32 or int64")
    if sequence.dim() > 1 and sequence.shape[:-1] != values.shape[:-1]:
        fail(node, f"sorted_sequence {list(sequence.shape)} and values {list(values.shape)} differ "
                   "in their leading dims")
    common = torch.promote_types(sequence.dtype, values.dtype)
    result = torch.searchsorted(sequence.to(common), values.to(common), right=attrs.get("right", False),
                                sorter=sorter)
    return [result.to(out_dtype)]

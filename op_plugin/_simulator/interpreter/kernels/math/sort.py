"""Sorting and searching GE ops: Sort, TopKV2, SearchSorted.

Semantics from the CANN prototypes (``REG_OP`` in TorchAir's ``auto_generated_ge_raw_ops.py``; hicann
ops-math files them in ``math/``) and TorchAir's converters (``ge_converter/aten/sort.py``,
``topk.py``, ``searchsorted.py``). Index outputs are int32 where the prototype says so (TorchAir casts
them to int64 after). Ties keep their input order (torch's CPU sort is stable), which a non-stable NPU
sort may not.

TopKV2 binds ops-math's REG_OP (``math/top_k_v2/op_graph/top_k_v2_proto.h``), newer than the wheel's
header: TorchAir's generated TopKV2 writes ``sort_policy`` (always 1) on every node, an attr only that
REG_OP names, which also adds ``indices_dtype`` (int32 or int64 indices).
"""
from __future__ import annotations

import torch
from ....._ge.reg_op import parse_reg_ops
from ....._ge.values import TORCH_TO_GE, ge_dtype_to_torch
from ...registry import ge_kernel, refuse
from ..common import int_list

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


# ops-math math/top_k_v2/op_graph/top_k_v2_proto.h as CANN writes it (k and indices: IndexNumberType,
# int32 or int64).
_TOP_K_V2 = parse_reg_ops('''
"""REG_OP(TopKV2)
    .INPUT(x, TensorType::RealNumberType())
    .INPUT(k, TensorType::IndexNumberType())
    .OUTPUT(values, TensorType::RealNumberType())
    .OUTPUT(indices, TensorType::IndexNumberType())
    .ATTR(sorted, Bool, true)
    .ATTR(dim, Int, -1)
    .ATTR(largest, Bool, true)
    .ATTR(indices_dtype, Int, DT_INT32)
    .ATTR(sort_policy, Int, 0)
    .OP_END_FACTORY_REG(TopKV2)
"""
''', {"DT_INT32": TORCH_TO_GE[torch.int32]})["TopKV2"]
_INDEX_DTYPES = (torch.int32, torch.int64)
_INDEX_DTYPE_OF = {TORCH_TO_GE[dtype]: dtype for dtype in _INDEX_DTYPES}
# The proto's doc: 0 keeps the original sort, 1 takes the Bitonic Small TopK path when sorted and k in [2, 32].
# Both return the k extreme values in order; which of equal values' indices comes first is documented for
# neither (ties: see the module doc), so the CPU result is the same for both.
_SORT_POLICY = "picks the NPU's sorting path (1: bitonic for sorted k in [2, 32]); the k values and order are the same"


@ge_kernel("TopKV2", accepts={"x": _REAL_NUMBERS, "k": _INDEX_DTYPES}, prototype=_TOP_K_V2,
           layout_only={"sort_policy": _SORT_POLICY})
def top_k_v2(x, k, *, sorted, dim, largest, indices_dtype):
    """The k largest (or smallest) entries along `dim`, sorted when `sorted`, with indices of
    `indices_dtype` (int32 or int64)."""
    index_dtype = _INDEX_DTYPE_OF.get(indices_dtype)
    if index_dtype is None:
        refuse(f"indices_dtype {indices_dtype} is neither DT_INT32 ({TORCH_TO_GE[torch.int32]}) nor DT_INT64 "
               f"({TORCH_TO_GE[torch.int64]})")
    counts = int_list(k)
    if len(counts) != 1:
        refuse(f"k must hold one value, got {len(counts)}")
    axis = _axis(x, dim, "dim")
    length = x.shape[axis] if x.dim() else 1
    if not 0 <= counts[0] <= length:
        refuse(f"k={counts[0]} is outside [0, {length}] for dim {axis}")
    values, indices = torch.topk(x, counts[0], dim=axis, largest=largest, sorted=sorted)
    return values, indices.to(index_dtype)


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

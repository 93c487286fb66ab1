"""`torch_npu.distributed`'s uneven collectives on the virtual NPU: `all_gather_into_tensor_uneven` and
`reduce_scatter_tensor_uneven` (HCCL's AllGatherV and ReduceScatterV; torch_npu/distributed/distributed_c10d.py),
over the group's gloo backend (hccl.py).

torch_npu's contract, kept: both take npu tensors only (others: its warning, and nothing done); the split sizes
are rows of dim 0 per rank, one per rank, an empty or missing list meaning an even split; they return None, or a
completed work with `async_op=True`. all_gather: rank r's `input` (split_sizes[r] rows) lands at rows
sum(split_sizes[:r]) of `output`. reduce_scatter: `output` on rank r is the reduction over the ranks of their
`input` rows sum(split_sizes[:r]) ... + split_sizes[r].

How, on gloo (whose all-gather takes equal sizes): the inputs padded to the largest split, gathered, the rows of
each rank copied out; the reduction is an all-reduce of the whole input, of which each rank keeps its rows (the
sum of the same rows in the same order on every rank). Refused, naming the call: split sizes that do not match the
group, the tensors' first dims or each other's trailing dims and dtypes.
"""
from __future__ import annotations

import warnings

import torch
import torch.distributed as dist

from .hccl import PREFIX


def _group_and_splits(call: str, group, splits, rows: int):
    """(group, its size, this rank's index in it, the split sizes) or None for a rank outside `group`."""
    if group is not None and dist.distributed_c10d._rank_not_in_group(group):
        return None
    group = group or dist.group.WORLD
    world, rank = dist.get_world_size(group), dist.get_rank(group)
    splits = [int(size) for size in splits] if splits else [rows // world] * world
    if len(splits) != world or any(size < 0 for size in splits) or sum(splits) != rows:
        raise RuntimeError(f"{PREFIX}: torch_npu.distributed.{call}: split sizes {splits} must be {world} "
                           f"non-negative row counts (one per rank) summing to {rows}")
    return group, world, rank, splits


def _checked(call: str, output, input) -> bool:
    if output.device.type != "npu" or input.device.type != "npu":
        warnings.warn("Support for Tensors is limited to those of type npu", stacklevel=3)  # torch_npu's words
        return False
    if output.dtype != input.dtype or output.shape[1:] != input.shape[1:] or output.dim() == 0:
        raise RuntimeError(f"{PREFIX}: torch_npu.distributed.{call}: output {output.dtype} {list(output.shape)} "
                           f"and input {input.dtype} {list(input.shape)} must share a dtype and all dims after the "
                           "first")
    return True


def _placed(call: str, output, input, split_sizes, group, split, own):
    """(group, its size, this rank's index, split sizes) of a call to run, or None (torch_npu does nothing): `split`
    is the tensor the sizes divide, `own` (name, tensor) the one that holds this rank's share alone."""
    if not _checked(call, output, input):
        return None
    placed = _group_and_splits(call, group, split_sizes, split.size(0))
    if placed is None:
        return None
    rank, splits = placed[2], placed[3]
    name, tensor = own
    if tensor.size(0) != splits[rank]:
        raise RuntimeError(f"{PREFIX}: torch_npu.distributed.{call}: rank {rank}'s {name} has {tensor.size(0)} rows, "
                           f"its split size is {splits[rank]}")
    return placed


def _done(async_op: bool):
    if not async_op:
        return None
    future = torch.futures.Future()
    future.set_result(None)
    return dist.distributed_c10d._create_work_from_future(future)


def all_gather_into_tensor_uneven(output, input, output_split_sizes=None, group=None, async_op=False):
    placed = _placed("all_gather_into_tensor_uneven", output, input, output_split_sizes, group, split=output,
                     own=("input", input))
    if placed is None:
        return None
    group, world, _, splits = placed
    widest = max(splits)
    padded = input.new_zeros((widest, *input.shape[1:]))
    padded[:input.size(0)] = input
    gathered = input.new_empty((world * widest, *input.shape[1:]))
    dist.all_gather_into_tensor(gathered, padded, group=group)
    start = 0
    for peer, size in enumerate(splits):
        output[start:start + size] = gathered[peer * widest:peer * widest + size]
        start += size
    return _done(async_op)


def reduce_scatter_tensor_uneven(output, input, input_split_sizes=None, op=dist.ReduceOp.SUM, group=None,
                                 async_op=False):
    placed = _placed("reduce_scatter_tensor_uneven", output, input, input_split_sizes, group, split=input,
                     own=("output", output))
    if placed is None:
        return None
    group, _, rank, splits = placed
    reduced = input.clone()
    dist.all_reduce(reduced, op=op, group=group)
    start = sum(splits[:rank])
    output.copy_(reduced[start:start + splits[rank]])
    return _done(async_op)

"""CPU kernel of torch_npu's batch_norm_gather_stats_update, SyncBatchNorm's step that turns every device's
per-channel sums (gathered by the caller) into the global mean and reciprocal std.

torch_npu's eager (op-plugin ``BatchNormGatherStatsUpdateKernelNpu.cpp``) runs CANN's
SyncBatchNormGatherStats, the GE type TorchAir lowers the op to, on ``(mean, invstd)`` = the gathered sums and
sums of squares (W, C) and ``counts`` cast to int32 (truncating; TorchAir: a Cast node first). So this is an
adapter composing the same GE kernels in the same order: Cast, then SyncBatchNormGatherStats
(``interpreter/kernels/norm/batch_norm.py``; formula and refusals documented there), with the running stats
cast to the sums' dtype (zeros / ones when None, as torch_npu passes).

torch_npu copies the updated running stats into ``running_mean`` / ``running_var`` although the
schema does not declare them mutable; this kernel does the same (so eager SyncBatchNorm training
keeps its running statistics). TorchAir's GE converter returns only (batch_mean, batch_invstd): in GE
mode the running stats are not updated, on an NPU as here. self is read for its channel count only
(dim 1; TorchAir's converter takes 4-D self only).
"""
from __future__ import annotations

import torch

from ..interpreter.calls import ge_op
from .checks import named_refusals, writable
from .dense import cast


@named_refusals("batch_norm_gather_stats_update")
def batch_norm_gather_stats_update(input, mean, invstd, running_mean, running_var, momentum, eps, counts):
    op = "batch_norm_gather_stats_update"
    if mean.dim() != 2 or input.dim() < 2 or input.shape[1] != mean.shape[1]:
        raise ValueError(f"npu::{op}: input {tuple(input.shape)} must have the channels of mean (devices, channels) "
                         f"{tuple(mean.shape)} in dim 1")
    if counts.dtype.is_complex or counts.dtype == torch.bool:
        raise ValueError(f"npu::{op}: counts must be real numbers, got {counts.dtype}")
    writable(op, running_mean=running_mean, running_var=running_var)
    channels = mean.shape[1]
    old_mean = torch.zeros(channels, dtype=mean.dtype) if running_mean is None else running_mean
    old_var = torch.ones(channels, dtype=mean.dtype) if running_var is None else running_var
    for name, stat in (("running_mean", old_mean), ("running_var", old_var)):
        if not stat.dtype.is_floating_point:
            raise ValueError(f"npu::{op}: {name} must be a float tensor, got {stat.dtype}")
    batch_mean, batch_invstd, new_mean, new_var = ge_op("SyncBatchNormGatherStats")(
        mean, invstd, cast(counts, torch.int32), cast(old_mean, mean.dtype), cast(old_var, mean.dtype),
        momentum=momentum, eps=eps)
    if running_mean is not None:
        running_mean.copy_(new_mean)
    if running_var is not None:
        running_var.copy_(new_var)
    return batch_mean, batch_invstd


KERNELS = {"batch_norm_gather_stats_update": batch_norm_gather_stats_update}

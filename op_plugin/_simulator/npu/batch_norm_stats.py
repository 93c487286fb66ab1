"""CPU reference kernel of torch_npu's batch_norm_gather_stats_update, SyncBatchNorm's step that turns
every device's per-channel sums (gathered by the caller) into the global mean and reciprocal std.

torch_npu's eager (op-plugin ``BatchNormGatherStatsUpdateKernelNpu.cpp``) runs CANN's
SyncBatchNormGatherStats, the GE type TorchAir lowers the op to, on ``(mean, invstd)`` = the gathered
sums and sums of squares (W, C), ``counts`` cast to int32 (truncating, as npu_dtype_cast), running
stats cast to the sums' dtype (zeros / ones when None). Formula (aclnnSyncBatchNormGatherStats.md):
``n = sum(counts)``, ``batch_mean = sum(sums) / n``, ``batch_var = sum(squares) / n - batch_mean^2``,
``batch_invstd = 1 / sqrt(batch_var + eps)``, computed in float32 for float16 and rounded once; the
running stats move by ``momentum`` towards batch_mean and ``batch_var * n / (n - 1)``.

torch_npu copies the updated running stats into ``running_mean`` / ``running_var`` although the
schema does not declare them mutable; this kernel does the same (so eager SyncBatchNorm training
keeps its running statistics). TorchAir's GE converter returns only (batch_mean, batch_invstd): in GE
mode the running stats are not updated, on an NPU as here. self is read for its channel count only
(dim 1; TorchAir's converter takes 4-D self only).
"""
from __future__ import annotations

import torch

from ..._base.numerics import opmath
from .checks import writable

_FLOATS = (torch.float16, torch.float32)


def _statistics(sums, squares, counts, running_mean, running_var, momentum, eps):
    """(batch_mean, batch_invstd, running_mean, running_var) in float32, written out term by term."""
    n = counts.to(torch.int64).sum().to(torch.float32)
    batch_mean = sums.sum(dim=0) * (1.0 / n)
    batch_var = squares.sum(dim=0) * (1.0 / n) - batch_mean * batch_mean
    batch_invstd = 1.0 / torch.sqrt(batch_var + eps)
    new_mean = running_mean * (1.0 - momentum) + momentum * batch_mean
    new_var = running_var * (1.0 - momentum) + batch_var * (n / (n - 1.0) * momentum)
    return batch_mean, batch_invstd, new_mean, new_var


def batch_norm_gather_stats_update(input, mean, invstd, running_mean, running_var, momentum, eps, counts):  # noqa: A002
    op = "batch_norm_gather_stats_update"
    if mean.dtype not in _FLOATS or invstd.dtype != mean.dtype:
        raise ValueError(f"npu::{op}: mean (the sums) and invstd (the sums of squares) must be one dtype of "
                         f"float16/float32 (SyncBatchNormGatherStats), got {mean.dtype} and {invstd.dtype}")
    if mean.dim() != 2 or invstd.shape != mean.shape or mean.shape[0] == 0:
        raise ValueError(f"npu::{op}: mean and invstd must be one (devices, channels) shape with devices > 0, got "
                         f"{tuple(mean.shape)} and {tuple(invstd.shape)}")
    devices, channels = mean.shape
    if input.dim() < 2 or input.shape[1] != channels:
        raise ValueError(f"npu::{op}: input {tuple(input.shape)} must have the {channels} channels of mean in dim 1")
    if tuple(counts.shape) != (devices,) or counts.dtype.is_complex or counts.dtype == torch.bool:
        raise ValueError(f"npu::{op}: counts must be ({devices},) real numbers, got {counts.dtype} "
                         f"{tuple(counts.shape)}")
    for name, stat in (("running_mean", running_mean), ("running_var", running_var)):
        if stat is not None and (tuple(stat.shape) != (channels,) or not stat.dtype.is_floating_point):
            raise ValueError(f"npu::{op}: {name} must be a float tensor of shape ({channels},), got {stat.dtype} "
                             f"{tuple(stat.shape)}")
    writable(op, running_mean=running_mean, running_var=running_var)
    old_mean = torch.zeros(channels) if running_mean is None else opmath(running_mean.to(mean.dtype)).float()
    old_var = torch.ones(channels) if running_var is None else opmath(running_var.to(mean.dtype)).float()
    stats = _statistics(opmath(mean).float(), opmath(invstd).float(), counts.to(torch.int32), old_mean, old_var,
                        momentum, eps)
    batch_mean, batch_invstd, new_mean, new_var = (s.to(mean.dtype) for s in stats)
    if running_mean is not None:
        running_mean.copy_(new_mean)
    if running_var is not None:
        running_var.copy_(new_var)
    return batch_mean, batch_invstd


KERNELS = {"batch_norm_gather_stats_update": batch_norm_gather_stats_update}

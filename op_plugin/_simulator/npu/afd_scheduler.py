"""CPU kernels of torch_npu's attention/FFN-disaggregation schedulers: attention_worker_scheduler(_) and
ffn_worker_scheduler(_). They check the argument the ops document (a 1-D int8 ScheduleContext of 1024
bytes) and then refuse by name: the schedulers read and write device memory that the context only
points to, waiting on peer devices (``interpreter/kernels/ffn/afd_scheduler.py`` says why in
full); TorchAir's GE types refuse alike."""
from __future__ import annotations

import torch

from ..interpreter.kernels.ffn.afd_scheduler import WHY


def _refuse(op, schedule_context):
    if schedule_context.dtype != torch.int8 or tuple(schedule_context.shape) != (1024,):
        raise ValueError(f"npu::{op}: schedule_context must be a 1-D int8 tensor of 1024 bytes (a ScheduleContext), "
                         f"got {schedule_context.dtype} {tuple(schedule_context.shape)}")
    raise NotImplementedError(f"npu::{op} is not simulated: {WHY}")


def attention_worker_scheduler(schedule_context):
    _refuse("attention_worker_scheduler", schedule_context)


def attention_worker_scheduler_(schedule_context):
    _refuse("attention_worker_scheduler_", schedule_context)


def ffn_worker_scheduler(schedule_context, *, sync_group_size=1, execute_mode=0):
    _refuse("ffn_worker_scheduler", schedule_context)


def ffn_worker_scheduler_(schedule_context, *, sync_group_size=1, execute_mode=0):
    _refuse("ffn_worker_scheduler_", schedule_context)


KERNELS = {
    "attention_worker_scheduler": attention_worker_scheduler,
    "attention_worker_scheduler_": attention_worker_scheduler_,
    "ffn_worker_scheduler": ffn_worker_scheduler,
    "ffn_worker_scheduler_": ffn_worker_scheduler_,
}

"""AttentionWorkerScheduler and FfnWorkerScheduler (CANN ops-transformer ``attention/attention_worker_scheduler``,
``ffn/ffn_worker_scheduler``): the polling loops of attention/FFN disaggregation, what TorchAir lowers
torch_npu's attention_worker_scheduler(_) / ffn_worker_scheduler(_) to. Refused, always, with the reason:

The input is a 1024-byte ScheduleContext (the struct in aclnnInplaceAttentionWorkerScheduler.md and
torch_npu's ``csrc/afd/ScheduleContext.h``). Its AttentionArea / FfnArea hold uint64 *device addresses*
(token_info_buf, token_data_buf, layer_ids_buf, session_ids_buf, micro_batch_ids_buf, expert_ids_buf) of
windows that AttentionToFFN / FFNToAttention on *other devices* write into. The kernels dereference those
addresses and, while ControlArea.run_flag is 1, spin until every flag there reads 1 (attention: then reset
the flags and advance micro_batch_id; FFN: then copy the layer/session/micro-batch/expert ids into the
out buffers). Their effect is on memory outside the tensor and waits on peer devices: no function of the
tensor's bytes that one process could compute. TorchAir's declared case feeds 1024 random bytes, that is
random addresses, which an NPU would fault on or wait on forever. CANN documents no single-process case.
"""
from __future__ import annotations

import torch

from ...registry import ge_kernel, refuse

WHY = ("its schedule context holds device addresses of attention/FFN windows that the CANN kernel "
       "dereferences, and it waits until peer devices (AttentionToFFN / FFNToAttention) set the flags there: "
       "the result is not a function of the tensor, so a CPU host cannot simulate it")


def _check_context(schedule_context):
    """The argument the ops document: a 1-D int8 ScheduleContext of 1024 bytes."""
    if schedule_context.dtype != torch.int8 or tuple(schedule_context.shape) != (1024,):
        refuse(f"schedule_context must be a 1-D int8 tensor of 1024 bytes (a ScheduleContext), got "
               f"{schedule_context.dtype} {tuple(schedule_context.shape)}")


@ge_kernel("AttentionWorkerScheduler")
def attention_worker_scheduler(schedule_context):
    _check_context(schedule_context)
    refuse(f"AttentionWorkerScheduler is not simulated: {WHY}")


@ge_kernel("FfnWorkerScheduler")
def ffn_worker_scheduler(schedule_context, *, sync_group_size, execute_mode):
    _check_context(schedule_context)
    refuse(f"FfnWorkerScheduler is not simulated: {WHY}")

"""torch_npu's attention/FFN-disaggregation schedulers: attention_worker_scheduler(_) and
ffn_worker_scheduler(_), adapters over the GE kernels TorchAir lowers them to (AttentionWorkerScheduler,
FfnWorkerScheduler in ``interpreter/kernels/ffn/afd_scheduler.py``), which check the ScheduleContext argument
and refuse: the schedulers read and write device memory that the context only points to, waiting on peer
devices (that module says why in full). The adapters name the op in the refusal."""
from __future__ import annotations

from ..interpreter.calls import ge_op
from .checks import named_refusals


@named_refusals("attention_worker_scheduler")
def attention_worker_scheduler(schedule_context):
    return ge_op("AttentionWorkerScheduler")(schedule_context)


@named_refusals("attention_worker_scheduler_")
def attention_worker_scheduler_(schedule_context):
    return ge_op("AttentionWorkerScheduler")(schedule_context)


@named_refusals("ffn_worker_scheduler")
def ffn_worker_scheduler(schedule_context, *, sync_group_size=1, execute_mode=0):
    return ge_op("FfnWorkerScheduler")(schedule_context, sync_group_size=sync_group_size, execute_mode=execute_mode)


@named_refusals("ffn_worker_scheduler_")
def ffn_worker_scheduler_(schedule_context, *, sync_group_size=1, execute_mode=0):
    return ge_op("FfnWorkerScheduler")(schedule_context, sync_group_size=sync_group_size, execute_mode=execute_mode)


KERNELS = {
    "attention_worker_scheduler": attention_worker_scheduler,
    "attention_worker_scheduler_": attention_worker_scheduler_,
    "ffn_worker_scheduler": ffn_worker_scheduler,
    "ffn_worker_scheduler_": ffn_worker_scheduler_,
}

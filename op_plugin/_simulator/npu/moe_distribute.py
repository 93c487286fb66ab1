"""CPU reference kernels of torch_npu's expert-parallel MoE ops over torch.distributed:
npu_moe_distribute_dispatch and npu_moe_distribute_combine.

On an NPU these eager ops run the CANN kernels their GE types run in graph mode
(aclnnMoeDistributeDispatch / aclnnMoeDistributeCombine), so each maps its torch_npu arguments onto
the GE kernel (`interpreter/kernels/moe_distribute.py`: the semantics, the simulator's choice of
the implementation-defined layouts, the refusals) and names the op in every refusal. `group_ep` is
an HCCL communicator name on an NPU; on a CPU host pass ``hccl_comm_name(ep_group)``
(`collective_matmul.py`). combine's `shared_expert_x` is refused: TorchAir's GE converter drops it,
so graph mode would silently differ from an NPU's eager result.
The _v2 variants (assist_info_for_combine, comm_alg, elastic and special experts) are not simulated.
"""
from __future__ import annotations

from ..interpreter.kernels import moe_distribute
from .collective_matmul import _named


@_named("npu_moe_distribute_dispatch")
def npu_moe_distribute_dispatch(x, expert_ids, group_ep, ep_world_size, ep_rank_id, moe_expert_num, *, scales=None,
                                x_active_mask=None, expert_scales=None, group_tp="", tp_world_size=0, tp_rank_id=0,
                                expert_shard_type=0, shared_expert_num=1, shared_expert_rank_num=0, quant_mode=0,
                                global_bs=0, expert_token_nums_type=1):
    return moe_distribute.moe_distribute_dispatch(
        x, expert_ids, scales, x_active_mask, expert_scales, group_ep=group_ep, ep_world_size=ep_world_size,
        ep_rank_id=ep_rank_id, moe_expert_num=moe_expert_num, group_tp=group_tp, tp_world_size=tp_world_size,
        tp_rank_id=tp_rank_id, expert_shard_type=expert_shard_type, shared_expert_num=shared_expert_num,
        shared_expert_rank_num=shared_expert_rank_num, quant_mode=quant_mode, global_bs=global_bs,
        expert_token_nums_type=expert_token_nums_type)


@_named("npu_moe_distribute_combine")
def npu_moe_distribute_combine(expand_x, expert_ids, expand_idx, ep_send_counts, expert_scales, group_ep,
                               ep_world_size, ep_rank_id, moe_expert_num, *, tp_send_counts=None, x_active_mask=None,
                               activation_scale=None, weight_scale=None, group_list=None, expand_scales=None,
                               shared_expert_x=None, group_tp="", tp_world_size=0, tp_rank_id=0, expert_shard_type=0,
                               shared_expert_num=1, shared_expert_rank_num=0, global_bs=0, out_dtype=0,
                               comm_quant_mode=0, group_list_type=0):
    if shared_expert_x is not None:
        raise ValueError("npu::npu_moe_distribute_combine: shared_expert_x is not simulated (TorchAir's GE converter "
                         "drops it, so graph mode could not match)")
    return moe_distribute.moe_distribute_combine(
        expand_x, expert_ids, expand_idx, ep_send_counts, expert_scales, tp_send_counts, x_active_mask,
        activation_scale, weight_scale, group_list, expand_scales, group_ep=group_ep, ep_world_size=ep_world_size,
        ep_rank_id=ep_rank_id, moe_expert_num=moe_expert_num, group_tp=group_tp, tp_world_size=tp_world_size,
        tp_rank_id=tp_rank_id, expert_shard_type=expert_shard_type, shared_expert_num=shared_expert_num,
        shared_expert_rank_num=shared_expert_rank_num, global_bs=global_bs, out_dtype=out_dtype,
        comm_quant_mode=comm_quant_mode, group_list_type=group_list_type)


KERNELS = {
    "npu_moe_distribute_dispatch": npu_moe_distribute_dispatch,
    "npu_moe_distribute_combine": npu_moe_distribute_combine,
}

"""CPU reference kernels of torch_npu's expert-parallel MoE ops over torch.distributed:
npu_moe_distribute_dispatch and npu_moe_distribute_combine.

On an NPU these eager ops run the CANN kernels their GE types run in graph mode
(aclnnMoeDistributeDispatch / aclnnMoeDistributeCombine), so each maps its torch_npu arguments onto
the GE op and calls ``ge_op(Type)``, as a graph node runs it
(`interpreter/kernels/mc2/moe_distribute.py`: the semantics, the simulator's choice of
the implementation-defined layouts, the refusals) and names the op in every refusal. `group_ep` is
an HCCL communicator name on an NPU; on a CPU host pass ``hccl_comm_name(ep_group)``
(`collective_matmul.py`). combine's `shared_expert_x` is refused: torch_npu documents it as reserved
("currently not used"), its eager kernel does not pass it to aclnnMoeDistributeCombine (which, like the GE
op MoeDistributeCombine, has no such input) and TorchAir's converter drops it, so a given tensor would be
ignored silently on an NPU; in graph mode the wheel's Meta refuses it (no such parameter).
The _v2 variants run the same data flow (assist_info_for_combine in expand_idx's role; comm_alg a
schedule) and add combine_v2's `shared_expert_x` (the shared expert's output per token, unweighted) as
CANN's CombineV2 kernel adds it; their elastic scaling, special experts and dtype arguments are refused.
"""
from __future__ import annotations

from ..interpreter.calls import ge_op
from .checks import named_refusals


@named_refusals("npu_moe_distribute_dispatch")
def npu_moe_distribute_dispatch(x, expert_ids, group_ep, ep_world_size, ep_rank_id, moe_expert_num, *, scales=None,
                                x_active_mask=None, expert_scales=None, group_tp="", tp_world_size=0, tp_rank_id=0,
                                expert_shard_type=0, shared_expert_num=1, shared_expert_rank_num=0, quant_mode=0,
                                global_bs=0, expert_token_nums_type=1):
    return ge_op("MoeDistributeDispatch")(
        x, expert_ids, scales, x_active_mask, expert_scales, group_ep=group_ep, ep_world_size=ep_world_size,
        ep_rank_id=ep_rank_id, moe_expert_num=moe_expert_num, group_tp=group_tp, tp_world_size=tp_world_size,
        tp_rank_id=tp_rank_id, expert_shard_type=expert_shard_type, shared_expert_num=shared_expert_num,
        shared_expert_rank_num=shared_expert_rank_num, quant_mode=quant_mode, global_bs=global_bs,
        expert_token_nums_type=expert_token_nums_type)


@named_refusals("npu_moe_distribute_combine")
def npu_moe_distribute_combine(expand_x, expert_ids, expand_idx, ep_send_counts, expert_scales, group_ep,
                               ep_world_size, ep_rank_id, moe_expert_num, *, tp_send_counts=None, x_active_mask=None,
                               activation_scale=None, weight_scale=None, group_list=None, expand_scales=None,
                               shared_expert_x=None, group_tp="", tp_world_size=0, tp_rank_id=0, expert_shard_type=0,
                               shared_expert_num=1, shared_expert_rank_num=0, global_bs=0, out_dtype=0,
                               comm_quant_mode=0, group_list_type=0):
    if shared_expert_x is not None:
        raise ValueError("npu::npu_moe_distribute_combine: shared_expert_x is a reserved argument of this op "
                         "(torch_npu ignores it: aclnnMoeDistributeCombine and GE MoeDistributeCombine have no such "
                         "input); pass it to npu_moe_distribute_combine_v2, which adds it to the combined tokens")
    return ge_op("MoeDistributeCombine")(
        expand_x, expert_ids, expand_idx, ep_send_counts, expert_scales, tp_send_counts, x_active_mask,
        activation_scale, weight_scale, group_list, expand_scales, group_ep=group_ep, ep_world_size=ep_world_size,
        ep_rank_id=ep_rank_id, moe_expert_num=moe_expert_num, group_tp=group_tp, tp_world_size=tp_world_size,
        tp_rank_id=tp_rank_id, expert_shard_type=expert_shard_type, shared_expert_num=shared_expert_num,
        shared_expert_rank_num=shared_expert_rank_num, global_bs=global_bs, out_dtype=out_dtype,
        comm_quant_mode=comm_quant_mode, group_list_type=group_list_type)


@named_refusals("npu_moe_distribute_dispatch_v2")
def npu_moe_distribute_dispatch_v2(x, expert_ids, group_ep, ep_world_size, ep_rank_id, moe_expert_num, *,
                                   scales=None, x_active_mask=None, expert_scales=None, elastic_info=None,
                                   performance_info=None, group_tp="", tp_world_size=0, tp_rank_id=0,
                                   expert_shard_type=0, shared_expert_num=1, shared_expert_rank_num=0, quant_mode=0,
                                   global_bs=0, expert_token_nums_type=1, comm_alg="", zero_expert_num=0,
                                   copy_expert_num=0, const_expert_num=0, y_dtype=None, x_dtype=None,
                                   scales_dtype=None):
    if y_dtype is not None or x_dtype is not None or scales_dtype is not None:
        raise ValueError("npu::npu_moe_distribute_dispatch_v2: y_dtype / x_dtype / scales_dtype (the quantised and "
                         "bit-cast forms) are not simulated")
    return ge_op("MoeDistributeDispatchV2")(
        x, expert_ids, scales, x_active_mask, expert_scales, elastic_info, performance_info, group_ep=group_ep,
        ep_world_size=ep_world_size, ep_rank_id=ep_rank_id, moe_expert_num=moe_expert_num, group_tp=group_tp,
        tp_world_size=tp_world_size, tp_rank_id=tp_rank_id, expert_shard_type=expert_shard_type,
        shared_expert_num=shared_expert_num, shared_expert_rank_num=shared_expert_rank_num, quant_mode=quant_mode,
        global_bs=global_bs, expert_token_nums_type=expert_token_nums_type, zero_expert_num=zero_expert_num,
        copy_expert_num=copy_expert_num, const_expert_num=const_expert_num, y_dtype=None)


@named_refusals("npu_moe_distribute_combine_v2")
def npu_moe_distribute_combine_v2(expand_x, expert_ids, assist_info_for_combine, ep_send_counts, expert_scales,
                                  group_ep, ep_world_size, ep_rank_id, moe_expert_num, *, tp_send_counts=None,
                                  x_active_mask=None, expand_scales=None, shared_expert_x=None, elastic_info=None,
                                  ori_x=None, const_expert_alpha_1=None, const_expert_alpha_2=None,
                                  const_expert_v=None, performance_info=None, group_tp="", tp_world_size=0,
                                  tp_rank_id=0, expert_shard_type=0, shared_expert_num=1, shared_expert_rank_num=0,
                                  global_bs=0, comm_quant_mode=0, comm_alg="", zero_expert_num=0, copy_expert_num=0,
                                  const_expert_num=0):
    return ge_op("MoeDistributeCombineV2")(
        expand_x, expert_ids, assist_info_for_combine, ep_send_counts, expert_scales, tp_send_counts, x_active_mask,
        None, None, None, expand_scales, shared_expert_x, elastic_info, ori_x, const_expert_alpha_1,
        const_expert_alpha_2, const_expert_v, performance_info, group_ep=group_ep, ep_world_size=ep_world_size,
        ep_rank_id=ep_rank_id, moe_expert_num=moe_expert_num, group_tp=group_tp, tp_world_size=tp_world_size,
        tp_rank_id=tp_rank_id, expert_shard_type=expert_shard_type, shared_expert_num=shared_expert_num,
        shared_expert_rank_num=shared_expert_rank_num, global_bs=global_bs, out_dtype=0,
        comm_quant_mode=comm_quant_mode, group_list_type=0, zero_expert_num=zero_expert_num,
        copy_expert_num=copy_expert_num, const_expert_num=const_expert_num)


KERNELS = {
    "npu_moe_distribute_dispatch": npu_moe_distribute_dispatch,
    "npu_moe_distribute_combine": npu_moe_distribute_combine,
    "npu_moe_distribute_dispatch_v2": npu_moe_distribute_dispatch_v2,
    "npu_moe_distribute_combine_v2": npu_moe_distribute_combine_v2,
}

"""MoE expert-parallel GE ops (hicann ops-transformer ``mc2/moe_distribute_dispatch``, ``.../combine``)
over torch.distributed: MoeDistributeDispatch sends each token to the ranks holding its top-k
experts (an all-to-all over the EP group), MoeDistributeCombine sends the expert outputs back and
sums them per token weighted by expert_scales.

What CANN defines, and what these kernels keep: the experts are split evenly over the EP ranks
(rank r holds experts [r*L, (r+1)*L), L = moe_expert_num / ep_world_size); expand_x holds, per
local expert, exactly the tokens routed to it from every rank, with their counts in
expert_token_nums (counts, or their prefix sums for expert_token_nums_type=0); combine returns
``x[t] = sum_j expert_scales[t, j] * expert_output(t, j)`` (computed here in float32 and rounded to
expand_x's dtype; CANN does not state its accumulation). expand_x has the Meta's upper bound A of rows; the rows after
sum(expert_token_nums) are zeros here (CANN does not say what they hold).

What CANN leaves implementation-defined ("may vary depending on the product model, communication
algorithm, or version"): the row order within an expert and the values of expand_idx and
ep_recv_counts, which only combine reads. The simulator's choice, which code must not rely on:
expand_x rows by local expert, then source rank, then token index, then k; ep_recv_counts[l * W + s]
= the rows of local expert l from EP rank s; expand_idx[t * k + j] = the position of pair (t, j)
among this rank's pairs routed to the same expert. Combine reads them in that layout.

Not simulated, refused naming the node: quantisation (scales, quant_mode, comm_quant_mode), the TP
domain (tp_world_size 2), shared-expert ranks (shared_expert_rank_num > 0), x_active_mask, dispatch's
expert_scales (the A2 layout of expand_scales) and combine's reserved inputs, global_bs other than
0 or BS * ep_world_size (ranks with different batch sizes). CombineV2's shared_expert_x (a shared
expert's output computed outside, with shared_expert_rank_num 0) is added unweighted, as CANN's kernel adds it.
"""
from __future__ import annotations

import torch
from ....._ge.values import ge_dtype_to_torch
from ...collectives import process_group
from ...registry import ge_kernel, refuse
from ..hccl.collectives import hcom_all_to_all, hcom_all_to_all_v

_HALF = (torch.float16, torch.bfloat16)


def _layout(group_ep, ep_world_size, ep_rank_id, moe_expert_num, tp_world_size, shared_expert_rank_num, global_bs,
            batch):
    """The experts per rank; refuses the configurations not simulated."""
    pg = process_group(group_ep)
    if ep_world_size != pg.size() or ep_rank_id != pg.rank():
        refuse(f"ep_world_size={ep_world_size}, ep_rank_id={ep_rank_id} but group_ep {group_ep!r} has {pg.size()} "
               f"ranks and this process is its rank {pg.rank()}")
    if tp_world_size not in (0, 1):
        refuse(f"tp_world_size={tp_world_size}: the TP domain (AllGatherV / ReduceScatterV) is not simulated")
    if shared_expert_rank_num != 0:
        refuse(f"shared_expert_rank_num={shared_expert_rank_num}: shared-expert ranks are not simulated")
    if moe_expert_num <= 0 or moe_expert_num % ep_world_size:
        refuse(f"moe_expert_num={moe_expert_num} must be a positive multiple of ep_world_size={ep_world_size}")
    if global_bs not in (0, batch * ep_world_size):
        refuse(f"global_bs={global_bs}: only 0 or BS * ep_world_size ({batch * ep_world_size}, every rank the same "
               "batch size) is simulated")
    return moe_expert_num // ep_world_size


def _expert_ids(expert_ids, moe_expert_num, batch):
    if expert_ids.dtype != torch.int32 or expert_ids.dim() != 2 or expert_ids.shape[0] != batch:
        refuse(f"expert_ids {expert_ids.dtype} {list(expert_ids.shape)} must be int32 (BS={batch}, K)")
    ids = expert_ids.long().reshape(-1)
    if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= moe_expert_num):
        refuse(f"expert_ids must lie in [0, moe_expert_num={moe_expert_num})")
    return ids


def _rank_within_expert(ids: torch.Tensor, experts: int) -> torch.Tensor:
    """For each flat pair, its position among the pairs routed to the same expert, in pair order."""
    order = torch.sort(ids, stable=True).indices
    starts = torch.cumsum(torch.bincount(ids, minlength=experts), 0) - torch.bincount(ids, minlength=experts)
    position = torch.empty_like(ids)
    position[order] = torch.arange(ids.numel()) - starts[ids[order]]
    return position


def _exchange(rows: torch.Tensor, send_rows: list[int], recv_rows: list[int], group: str) -> torch.Tensor:
    width = rows.shape[1]
    send = torch.tensor([c * width for c in send_rows], dtype=torch.int64)
    recv = torch.tensor([c * width for c in recv_rows], dtype=torch.int64)
    out = hcom_all_to_all_v(rows.contiguous(), send, torch.cumsum(send, 0) - send, recv, torch.cumsum(recv, 0) - recv,
                            group=group)
    return out.reshape(-1, width)


@ge_kernel("MoeDistributeDispatch", accepts={"x": _HALF})
def moe_distribute_dispatch(x, expert_ids, scales, x_active_mask, expert_scales, *, group_ep, ep_world_size,
                            ep_rank_id, moe_expert_num, group_tp, tp_world_size, tp_rank_id, expert_shard_type,
                            shared_expert_num, shared_expert_rank_num, quant_mode, global_bs,
                            expert_token_nums_type):
    """(expand_x, dynamic_scales, expand_idx, expert_token_nums, ep_recv_counts, tp_recv_counts,
    expand_scales): the module docstring says which are defined and which are the simulator's layout."""
    if scales is not None or quant_mode != 0:
        refuse(f"the quantised dispatch (scales={'given' if scales is not None else None}, quant_mode={quant_mode}) "
               "is not simulated")
    if x_active_mask is not None or expert_scales is not None:
        refuse("x_active_mask / expert_scales (masked tokens, the A2 expand_scales layout) are not simulated")
    if expert_token_nums_type not in (0, 1):
        refuse(f"expert_token_nums_type={expert_token_nums_type} must be 0 (prefix sums) or 1 (counts)")
    if x.dim() != 2 or x.dtype not in _HALF:
        refuse(f"x {x.dtype} {list(x.shape)} must be 2-D (BS, H) float16 or bfloat16 (the non-quantised dispatch)")
    batch, width = x.shape
    local = _layout(group_ep, ep_world_size, ep_rank_id, moe_expert_num, tp_world_size, shared_expert_rank_num,
                    global_bs, batch)
    ids = _expert_ids(expert_ids, moe_expert_num, batch)
    top_k = expert_ids.shape[1]
    per_expert = torch.bincount(ids, minlength=moe_expert_num)
    # from_rank[s, l]: rows source rank s sends to this rank's local expert l; each rank's BS rides along
    sizes = torch.full((ep_world_size, 1), batch, dtype=per_expert.dtype)
    exchanged = hcom_all_to_all(torch.cat([per_expert.reshape(ep_world_size, local), sizes], 1), group=group_ep)
    from_rank, batches = exchanged[:, :local], exchanged[:, local].tolist()
    if any(b != batch for b in batches):
        refuse(f"the EP ranks have batch sizes {batches}: ranks with different BS need global_bs = max BS * "
               "ep_world_size, which is not simulated")
    order = torch.sort(ids, stable=True).indices  # pairs by expert, then token, then k
    received = _exchange(x[order // top_k], per_expert.reshape(ep_world_size, local).sum(1).tolist(),
                         from_rank.sum(1).tolist(), group_ep)
    # received is by source rank, then local expert; regroup by local expert, then source rank
    block_start = (torch.cumsum(from_rank.reshape(-1), 0) - from_rank.reshape(-1)).reshape(ep_world_size, local)
    pieces = [received[int(block_start[s, e]):int(block_start[s, e]) + int(from_rank[s, e])]
              for e in range(local) for s in range(ep_world_size)]
    rows = batch * ep_world_size * min(local, top_k)  # the Meta's A
    expand_x = x.new_zeros(rows, width)
    total = int(from_rank.sum())
    if total > rows:
        refuse(f"{total} rows routed to this rank exceed A={rows}")
    if pieces:
        expand_x[:total] = torch.cat(pieces)
    tokens = from_rank.sum(0)
    expert_token_nums = (torch.cumsum(tokens, 0) if expert_token_nums_type == 0 else tokens).to(torch.int64)
    return (expand_x, torch.zeros(rows, dtype=torch.float32),
            _rank_within_expert(ids, moe_expert_num).to(torch.int32), expert_token_nums,
            from_rank.T.reshape(-1).to(torch.int32), torch.zeros(tp_world_size, dtype=torch.int32),
            torch.zeros(0, dtype=torch.float32))


@ge_kernel("MoeDistributeCombine", accepts={"expand_x": _HALF})
def moe_distribute_combine(expand_x, expert_ids, expand_idx, ep_send_counts, expert_scales, tp_send_counts,
                           x_active_mask, activation_scale, weight_scale, group_list, expand_scales, *, group_ep,
                           ep_world_size, ep_rank_id, moe_expert_num, group_tp, tp_world_size, tp_rank_id,
                           expert_shard_type, shared_expert_num, shared_expert_rank_num, global_bs, out_dtype,
                           comm_quant_mode, group_list_type):
    """x[t] = sum_j expert_scales[t, j] * expand_x row of pair (t, j) on its expert's rank."""
    return _combined(
        expand_x, expert_ids, expand_idx, ep_send_counts, expert_scales, tp_send_counts, x_active_mask,
        activation_scale, weight_scale, group_list, expand_scales, group_ep=group_ep, ep_world_size=ep_world_size,
        ep_rank_id=ep_rank_id, moe_expert_num=moe_expert_num, tp_world_size=tp_world_size,
        shared_expert_rank_num=shared_expert_rank_num, global_bs=global_bs, out_dtype=out_dtype,
        comm_quant_mode=comm_quant_mode, group_list_type=group_list_type).to(expand_x.dtype)


def _combined(expand_x, expert_ids, expand_idx, ep_send_counts, expert_scales, tp_send_counts, x_active_mask,
              activation_scale, weight_scale, group_list, expand_scales, *, group_ep, ep_world_size, ep_rank_id,
              moe_expert_num, tp_world_size, shared_expert_rank_num, global_bs, out_dtype, comm_quant_mode,
              group_list_type):
    """The combine's float32 sums (BS, H), before the one rounding to expand_x's dtype."""
    reserved = {"tp_send_counts": tp_send_counts, "x_active_mask": x_active_mask,
                "activation_scale": activation_scale, "weight_scale": weight_scale, "group_list": group_list,
                "expand_scales": expand_scales}
    given = sorted(name for name, value in reserved.items() if value is not None)
    if given or comm_quant_mode or out_dtype or group_list_type:
        refuse(f"{given or 'comm_quant_mode / out_dtype / group_list_type'}: the quantised, masked or TP combine "
               "is not simulated")
    if expand_x.dim() != 2 or expand_x.dtype not in _HALF:
        refuse(f"expand_x {expand_x.dtype} {list(expand_x.shape)} must be 2-D (A, H) float16 or bfloat16")
    batch = expert_ids.shape[0] if expert_ids.dim() == 2 else -1
    local = _layout(group_ep, ep_world_size, ep_rank_id, moe_expert_num, tp_world_size, shared_expert_rank_num,
                    global_bs, batch)
    ids = _expert_ids(expert_ids, moe_expert_num, batch)
    top_k = expert_ids.shape[1]
    if expert_scales.shape != expert_ids.shape:
        refuse(f"expert_scales {list(expert_scales.shape)} must have expert_ids' shape {list(expert_ids.shape)}")
    if expand_idx.numel() != ids.numel() or ep_send_counts.numel() != ep_world_size * local:
        refuse(f"expand_idx ({expand_idx.numel()}) and ep_send_counts ({ep_send_counts.numel()}) are not the "
               f"layout of this rank's dispatch ({ids.numel()} and {ep_world_size * local}): pass its outputs")
    counts = ep_send_counts.long().reshape(local, ep_world_size)  # [l, s]
    if int(counts.sum()) > expand_x.shape[0] or bool((counts < 0).any()):
        refuse(f"ep_send_counts sum to {int(counts.sum())} rows; expand_x has {expand_x.shape[0]}")
    start = (torch.cumsum(counts.reshape(-1), 0) - counts.reshape(-1)).reshape(local, ep_world_size)
    back = torch.cat([expand_x[int(start[e, s]):int(start[e, s]) + int(counts[e, s])]
                      for s in range(ep_world_size) for e in range(local)])
    per_expert = torch.bincount(ids, minlength=moe_expert_num)
    returned = _exchange(back, counts.sum(0).tolist(), per_expert.reshape(ep_world_size, local).sum(1).tolist(),
                         group_ep)
    position = expand_idx.long().reshape(-1)
    if bool((position < 0).any()) or bool((position >= per_expert[ids]).any()):
        refuse("expand_idx is not the one this rank's dispatch returned for these expert_ids")
    row = (torch.cumsum(per_expert, 0) - per_expert)[ids] + position
    if torch.unique(row).numel() != row.numel():
        refuse("expand_idx names one row twice: it is not the one this rank's dispatch returned")
    weighted = returned[row].float().reshape(batch, top_k, -1) * expert_scales.float().unsqueeze(-1)
    return weighted.sum(1)


# ---- V2 (aclnnMoeDistributeDispatchV2 / CombineV2): the same data flow; assist_info_for_combine is
# expand_idx's role with the Meta's larger size (its first BS*K entries used here, the rest zeros) ----

_COMM_ALG = {"comm_alg": "which communication algorithm moves the rows (fullmesh, hierarchy): a schedule; the "
                         "layouts it changes on an NPU are implementation-defined and the simulator's own here"}


def _no_special_experts(zero_expert_num, copy_expert_num, const_expert_num, **unsupported) -> None:
    given = sorted(name for name, value in unsupported.items() if value is not None)
    if given or zero_expert_num or copy_expert_num or const_expert_num:
        refuse(f"{given or 'zero/copy/const_expert_num'}: elastic scaling, performance info and the special (zero, "
               "copy, constant) experts are not simulated")


@ge_kernel("MoeDistributeDispatchV2", accepts={"x": _HALF}, layout_only=_COMM_ALG)
def moe_distribute_dispatch_v2(x, expert_ids, scales, x_active_mask, expert_scales, elastic_info, performance_info, *,
                               group_ep, ep_world_size, ep_rank_id, moe_expert_num, group_tp, tp_world_size,
                               tp_rank_id, expert_shard_type, shared_expert_num, shared_expert_rank_num, quant_mode,
                               global_bs, expert_token_nums_type, zero_expert_num, copy_expert_num, const_expert_num,
                               y_dtype):
    """MoeDistributeDispatch's outputs; assist_info_for_combine (max(BS*K, A*128) entries) in place of expand_idx."""
    _no_special_experts(zero_expert_num, copy_expert_num, const_expert_num, elastic_info=elastic_info,
                        performance_info=performance_info)
    if y_dtype is not None and ge_dtype_to_torch(y_dtype) != x.dtype:
        refuse(f"y_dtype={y_dtype} ({ge_dtype_to_torch(y_dtype)}): the non-quantised dispatch outputs x's dtype "
               f"({x.dtype})")
    outputs = list(moe_distribute_dispatch(
        x, expert_ids, scales, x_active_mask, expert_scales, group_ep=group_ep, ep_world_size=ep_world_size,
        ep_rank_id=ep_rank_id, moe_expert_num=moe_expert_num, group_tp=group_tp, tp_world_size=tp_world_size,
        tp_rank_id=tp_rank_id, expert_shard_type=expert_shard_type, shared_expert_num=shared_expert_num,
        shared_expert_rank_num=shared_expert_rank_num, quant_mode=quant_mode, global_bs=global_bs,
        expert_token_nums_type=expert_token_nums_type))
    positions = outputs[2]
    assist = positions.new_zeros(max(positions.numel(), outputs[0].shape[0] * 128))
    assist[:positions.numel()] = positions
    outputs[2] = assist
    return tuple(outputs)


@ge_kernel("MoeDistributeCombineV2", accepts={"expand_x": _HALF}, layout_only=_COMM_ALG)
def moe_distribute_combine_v2(expand_x, expert_ids, assist_info_for_combine, ep_send_counts, expert_scales,
                              tp_send_counts, x_active_mask, activation_scale, weight_scale, group_list, expand_scales,
                              shared_expert_x, elastic_info, ori_x, const_expert_alpha_1, const_expert_alpha_2,
                              const_expert_v, performance_info, *, group_ep, ep_world_size, ep_rank_id,
                              moe_expert_num, group_tp, tp_world_size, tp_rank_id, expert_shard_type,
                              shared_expert_num, shared_expert_rank_num, global_bs, out_dtype, comm_quant_mode,
                              group_list_type, zero_expert_num, copy_expert_num, const_expert_num):
    """MoeDistributeCombine, reading the first BS*K entries of assist_info_for_combine; plus shared_expert_x
    (the shared expert's output per token) when given, unweighted: CANN's kernel
    (mc2/moe_distribute_combine_v2/op_kernel/moe_distribute_combine_v2.h) adds it, cast to float32, to the
    float32 sum of the weighted expert rows and rounds the total once to expand_x's dtype."""
    _no_special_experts(zero_expert_num, copy_expert_num, const_expert_num, elastic_info=elastic_info, ori_x=ori_x,
                        const_expert_alpha_1=const_expert_alpha_1,
                        const_expert_alpha_2=const_expert_alpha_2, const_expert_v=const_expert_v,
                        performance_info=performance_info)
    pairs = expert_ids.numel()
    if assist_info_for_combine.dim() != 1 or assist_info_for_combine.numel() < pairs:
        refuse(f"assist_info_for_combine {list(assist_info_for_combine.shape)} must be 1-D with at least BS*K={pairs} "
               "entries: pass dispatch_v2's output")
    shared = _shared_expert_rows(shared_expert_x, expand_x, expert_ids.shape[0] if expert_ids.dim() == 2 else -1)
    total = _combined(
        expand_x, expert_ids, assist_info_for_combine[:pairs], ep_send_counts, expert_scales, tp_send_counts,
        x_active_mask, activation_scale, weight_scale, group_list, expand_scales, group_ep=group_ep,
        ep_world_size=ep_world_size, ep_rank_id=ep_rank_id, moe_expert_num=moe_expert_num,
        tp_world_size=tp_world_size, shared_expert_rank_num=shared_expert_rank_num, global_bs=global_bs,
        out_dtype=out_dtype, comm_quant_mode=comm_quant_mode, group_list_type=group_list_type)
    if shared is not None:
        total = total + shared.float()
    return total.to(expand_x.dtype)


def _shared_expert_rows(shared_expert_x, expand_x, batch):
    """shared_expert_x as (BS, H), or None; CANN (aclnnMoeDistributeCombineV2.md): expand_x's dtype, shape
    (BS, H) or (d0, d1, H) with d0 * d1 = BS."""
    if shared_expert_x is None:
        return None
    width = expand_x.shape[-1]
    if shared_expert_x.dtype != expand_x.dtype:
        refuse(f"shared_expert_x is {shared_expert_x.dtype}; CANN requires expand_x's dtype ({expand_x.dtype})")
    shape = list(shared_expert_x.shape)
    fits = (len(shape) == 2 and shape == [batch, width]) or (len(shape) == 3 and shape[0] * shape[1] == batch
                                                              and shape[2] == width)
    if not fits:
        refuse(f"shared_expert_x {shape} must be (BS, H) = ({batch}, {width}) or (d0, d1, H) with d0 * d1 = BS")
    return shared_expert_x.reshape(batch, width)

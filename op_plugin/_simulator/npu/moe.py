"""torch_npu's mixture-of-experts ops (gating, routing, grouped matmul) as adapters over GE kernels.

On an NPU these eager ops call the same CANN kernels their GE types run in graph mode (aclnnMoe*,
aclnnGroupedMatmul), so each maps its torch_npu arguments onto the GE op's inputs and attrs and calls
``ge_op(Type)`` (`interpreter/kernels/moe/routing.py`, `gmm/grouped_matmul.py`; semantics and refusals
documented there and in docs/torch-npu-ops.md), as a graph node of that type runs, and names the op in
every refusal:

* ``npu_moe_gating_top_k_softmax(x, finished, k)`` -> MoeGatingTopKSoftmax;
* ``npu_moe_gating_top_k(x, k, *, bias, ...)`` -> MoeGatingTopK;
* ``npu_moe_init_routing(x, row_idx, expert_idx, active_num)`` -> MoeInitRouting;
* ``npu_moe_init_routing_v2(x, expert_idx, *, ...)`` -> MoeInitRoutingV3 (TorchAir's lowering too);
  ``x_dtype`` (a reinterpretation as fp8/hifloat8/fp4) is refused;
* ``npu_moe_finalize_routing(...)`` -> MoeFinalizeRouting with skip1, bias, scales, expert rows and
  drop_pad_mode 0, else MoeFinalizeRoutingV2 (drop_pad_mode 0-3, k), as TorchAir's converter chooses;
* ``npu_moe_compute_expert_tokens(sorted, num_expert)`` -> MoeComputeExpertTokens;
* ``npu_moe_token_permute(tokens, indices, num_out_tokens, padded_mode)``: MoeInitRoutingV3 with the
  attrs aclnnMoeTokenPermute passes it on Ascend 950 (expert_num 10240, gather indices), cut to
  num_out_tokens rows; experts >= 10240 and padded_mode are refused;
* ``npu_moe_token_unpermute(permuted, sorted_indices, probs, ...)``: out[t] = sum_k probs[t, k] *
  permuted[sorted_indices[t*K + k]], MoeFinalizeRoutingV2 with row-major indices (drop_pad_mode 2);
* ``npu_grouped_matmul`` (both overloads) -> GroupedMatmul, non-quantised: the x/weight lists
  pairwise (split_item 0/1, group_type -1), x's rows grouped by group_list (split_item 2/3,
  group_type 0) or the K axis (group_type 2). The ``.List`` overload's int list is cumulative ends.
"""
from __future__ import annotations


import torch

from ..interpreter.calls import ge_op
from ..interpreter.errors import KernelError
from .checks import named_refusals

@named_refusals("npu_moe_gating_top_k_softmax")
def npu_moe_gating_top_k_softmax(x, finished=None, k=1):
    return ge_op("MoeGatingTopKSoftmax")(x, finished, k=k)


@named_refusals("npu_moe_gating_top_k")
def npu_moe_gating_top_k(x, k, *, bias=None, input_ids=None, tid2eid=None, k_group=1, group_count=1,
                         group_select_mode=0, renorm=0, norm_type=0, out_flag=False, routed_scaling_factor=1.0,
                         eps=1e-20):
    return ge_op("MoeGatingTopK")(x, bias, input_ids, tid2eid, k=k, k_group=k_group, group_count=group_count,
                                  group_select_mode=group_select_mode, renorm=renorm, norm_type=norm_type,
                                  out_flag=out_flag, routed_scaling_factor=routed_scaling_factor, eps=eps)


@named_refusals("npu_moe_init_routing")
def npu_moe_init_routing(x, row_idx, expert_idx, active_num):
    return ge_op("MoeInitRouting")(x, row_idx, expert_idx, active_num=active_num)


@named_refusals("npu_moe_init_routing_v2")
def npu_moe_init_routing_v2(x, expert_idx, *, scale=None, offset=None, active_num=-1, expert_capacity=-1,
                            expert_num=-1, drop_pad_mode=0, expert_tokens_num_type=0, expert_tokens_num_flag=False,
                            quant_mode=-1, active_expert_range=(), row_idx_type=0, x_dtype=None):
    if x_dtype is not None:
        raise KernelError(f"x_dtype {x_dtype} reinterprets x as an fp8/hifloat8/fp4/int4 format with no CPU "
                          "dtype here: not simulated")
    return ge_op("MoeInitRoutingV3")(
        x, expert_idx, scale, offset, active_num=active_num, expert_capacity=expert_capacity, expert_num=expert_num,
        drop_pad_mode=drop_pad_mode, expert_tokens_num_type=expert_tokens_num_type,
        expert_tokens_num_flag=expert_tokens_num_flag, quant_mode=quant_mode,
        active_expert_range=list(active_expert_range or ()), row_idx_type=row_idx_type)


@named_refusals("npu_moe_finalize_routing")
def npu_moe_finalize_routing(expanded_permuted_rows, skip1, skip2, bias, scales, expanded_src_to_dst_row,
                             export_for_source_row, drop_pad_mode=0, k=1):
    drop_pad_mode = 0 if drop_pad_mode is None else drop_pad_mode
    if skip1 is not None and bias is not None and scales is not None and export_for_source_row is not None \
            and drop_pad_mode == 0:  # TorchAir's converter's choice (off Ascend 950)
        return ge_op("MoeFinalizeRouting")(expanded_permuted_rows, skip1, skip2, bias, scales,
                                           expanded_src_to_dst_row, export_for_source_row)
    return ge_op("MoeFinalizeRoutingV2")(expanded_permuted_rows, expanded_src_to_dst_row, skip1, skip2, bias, scales,
                                         export_for_source_row, drop_pad_mode=drop_pad_mode, k=1 if k is None else k)


@named_refusals("npu_moe_compute_expert_tokens")
def npu_moe_compute_expert_tokens(sorted_expert_for_source_row, num_expert):
    return ge_op("MoeComputeExpertTokens")(sorted_expert_for_source_row, num_experts=num_expert)


_PERMUTE_EXPERTS = 10240  # aclnnMoeTokenPermute's MoeInitRoutingV3 call: expert_num and range [0, 10240)


def permuted_rows(num_out_tokens, total):
    """npu_moe_token_permute's output rows (its Meta): all for None/0, the first n for n > 0, total + n for n < 0."""
    n = num_out_tokens or 0
    return min(n, total) if n > 0 else n + total


@named_refusals("npu_moe_token_permute")
def npu_moe_token_permute(tokens, indices, num_out_tokens=None, padded_mode=False):
    if padded_mode:
        raise KernelError("padded_mode=True is not supported by CANN (only False)")
    if indices.dtype not in (torch.int32, torch.int64) or indices.dim() not in (1, 2):
        raise KernelError(f"indices must be 1-D or 2-D int32/int64, got {indices.dtype} {list(indices.shape)}")
    experts = indices.reshape(indices.shape[0], -1).to(torch.int32)
    if experts.numel() and (int(experts.min()) < 0 or int(experts.max()) >= _PERMUTE_EXPERTS):
        raise KernelError(f"expert indices outside [0, {_PERMUTE_EXPERTS}): Ascend 950's path drops them, A2/A3's "
                          "kernel sorts them; not simulated")
    expanded, sorted_indices, _, _ = ge_op("MoeInitRoutingV3")(
        tokens, experts, None, None, active_num=0, expert_capacity=0, expert_num=_PERMUTE_EXPERTS, drop_pad_mode=0,
        expert_tokens_num_type=1, expert_tokens_num_flag=True, quant_mode=-1,
        active_expert_range=[0, _PERMUTE_EXPERTS], row_idx_type=0)
    rows = permuted_rows(num_out_tokens, experts.numel())
    if rows < 0:
        raise KernelError(f"num_out_tokens {num_out_tokens} leaves {rows} rows of {experts.numel()} (its Meta refuses)")
    return expanded[:rows].contiguous(), sorted_indices


@named_refusals("npu_moe_token_unpermute")
def npu_moe_token_unpermute(permuted_tokens, sorted_indices, probs=None, padded_mode=False, restore_shape=None):
    if padded_mode or restore_shape is not None:
        raise KernelError("padded_mode=True / restore_shape are not supported by CANN (only False / None)")
    if permuted_tokens.dim() != 2 or sorted_indices.dim() != 1 or (probs is not None and probs.dim() != 2):
        raise KernelError(f"permuted_tokens {list(permuted_tokens.shape)} must be 2-D, sorted_indices "
                          f"{list(sorted_indices.shape)} 1-D and probs {None if probs is None else list(probs.shape)} "
                          "2-D (tokens, top-k)")
    return ge_op("MoeFinalizeRoutingV2")(permuted_tokens, sorted_indices, None, None, None, probs, None,
                                         drop_pad_mode=2, k=1)


def _grouped_matmul(x, weight, bias, scale, offset, antiquant_scale, antiquant_offset, per_token_scale, group_list,
                    split_item, group_type, group_list_type, act_type, unsupported):
    for name, value in unsupported.items():
        if value is not None and name.startswith("activation_"):
            raise KernelError(f"{name} is a reserved argument of torch_npu's op, which it ignores "
                              "(aclnnGroupedMatmulV4 documents it as reserved)")
        if value is not None:
            raise KernelError(f"{name} is given: only the non-quantised grouped matmul is simulated")
    pts = [t for t in per_token_scale or [] if t is not None]
    y = ge_op("GroupedMatmul")(
        list(x), list(weight), list(bias or []), list(scale or []), list(offset or []), list(antiquant_scale or []),
        list(antiquant_offset or []), group_list, pts[0] if pts else None, split_item=split_item, dtype=-1,
        transpose_weight=False, transpose_x=False, group_type=-1 if group_type is None else group_type,
        group_list_type=group_list_type, act_type=act_type)
    return list(y) if isinstance(y, tuple) else [y]


@named_refusals("npu_grouped_matmul")
def npu_grouped_matmul(x, weight, *, bias=None, scale=None, offset=None, antiquant_scale=None, antiquant_offset=None,
                       per_token_scale=None, group_list=None, activation_input=None, activation_quant_scale=None,
                       activation_quant_offset=None, split_item=0, group_type=None, group_list_type=0, act_type=0,
                       tuning_config=None, output_dtype=None, x_dtype=None, weight_dtype=None, scale_dtype=None,
                       per_token_scale_dtype=None):
    unsupported = dict(activation_input=activation_input, activation_quant_scale=activation_quant_scale,
                       activation_quant_offset=activation_quant_offset, output_dtype=output_dtype, x_dtype=x_dtype,
                       weight_dtype=weight_dtype, scale_dtype=scale_dtype,
                       per_token_scale_dtype=per_token_scale_dtype)
    return _grouped_matmul(x, weight, bias, scale, offset, antiquant_scale, antiquant_offset, per_token_scale,
                           group_list, split_item, group_type, group_list_type, act_type, unsupported)


@named_refusals("npu_grouped_matmul.List")
def npu_grouped_matmul_list(x, weight, *, bias=None, scale=None, offset=None, antiquant_scale=None,
                            antiquant_offset=None, per_token_scale=None, group_list=None, activation_input=None,
                            activation_quant_scale=None, activation_quant_offset=None, split_item=0, group_type=None,
                            group_list_type=0, act_type=0, output_dtype=None):
    if output_dtype is not None and output_dtype != x[0].dtype:
        raise KernelError(f"output_dtype {output_dtype} differs from x's {x[0].dtype}: a quantised case")
    unsupported = dict(activation_input=activation_input, activation_quant_scale=activation_quant_scale,
                       activation_quant_offset=activation_quant_offset)
    ends = None if group_list is None else torch.tensor(list(group_list), dtype=torch.int64)
    if ends is not None and group_type is None:
        group_type = 0  # an int list groups x's rows by cumulative ends (the doc: group_type None with a list)
    return _grouped_matmul(x, weight, bias, scale, offset, antiquant_scale, antiquant_offset, per_token_scale,
                           ends, split_item, group_type, group_list_type, act_type, unsupported)


KERNELS = {
    "npu_moe_gating_top_k_softmax": npu_moe_gating_top_k_softmax,
    "npu_moe_gating_top_k": npu_moe_gating_top_k,
    "npu_moe_init_routing": npu_moe_init_routing,
    "npu_moe_init_routing_v2": npu_moe_init_routing_v2,
    "npu_moe_finalize_routing": npu_moe_finalize_routing,
    "npu_moe_compute_expert_tokens": npu_moe_compute_expert_tokens,
    "npu_moe_token_permute": npu_moe_token_permute,
    "npu_moe_token_unpermute": npu_moe_token_unpermute,
    "npu_grouped_matmul": npu_grouped_matmul,
    "npu_grouped_matmul.List": npu_grouped_matmul_list,
}

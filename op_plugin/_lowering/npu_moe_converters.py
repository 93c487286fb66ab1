"""op_plugin's GE converters of torch_npu's MoE ops that TorchAir cannot lower on its own.

(`npu::npu_grouped_matmul` is TorchAir's own converter: its `import torch_npu` gets the CPU host's
stand-in while it runs, simulator hosting/converter_torch_npu.py.)

- `npu::npu_moe_token_permute`, `npu::npu_moe_token_unpermute` (no TorchAir converter: on an Ascend
  host GE mode cannot lower them): lowered to the CANN GE types their aclnn calls use on Ascend 950
  (ops-transformer `aclnn_moe_token_permute.cpp`; the torch doc of npu_moe_token_unpermute):
  permute = MoeInitRoutingV3(tokens, indices as (T, K) int32; active_num 0, expert_capacity 0,
  expert_num 10240, drop_pad_mode 0, count mode, flag on, quant_mode -1, active_expert_range
  [0, 10240], row_idx_type 0 (gather)) and the first num_out_tokens rows (a static count only);
  unpermute = MoeFinalizeRoutingV2(permuted, sorted_indices, scales=probs, drop_pad_mode 2
  (row-major indices), k 1). padded_mode / restore_shape raise, as CANN refuses them.
"""
from __future__ import annotations

import torch

from .cases import BF16, F32, Support, T
from .registry import library_converter
from .torchair_api import TorchAirApi

_PERMUTE_EXPERTS = 10240


@library_converter("npu::npu_moe_token_permute", cases=[
    Support(F32(5, 4), T([[0, 3], [1, 0], [3, 3], [2, 1], [0, 2]], dtype=torch.int64)),
    Support(BF16(4, 8), T([2, 0, 2, 1], dtype=torch.int32), num_out_tokens=3)])
def npu_moe_token_permute(ta: TorchAirApi, tokens, indices, num_out_tokens=None, padded_mode=False,
                          meta_outputs=None):
    """MoeInitRoutingV3 as aclnnMoeTokenPermute calls it on Ascend 950, then the first num_out_tokens rows."""
    if padded_mode:
        raise NotImplementedError("npu_moe_token_permute: padded_mode=True is not supported by CANN (only False)")
    graph = ta.graph
    types = graph.DataType
    experts = graph.Cast(indices, dst_type=types.DT_INT32) if indices.dtype == types.DT_INT64 else indices
    if indices.rank == 1:
        experts = ta.ge.Unsqueeze(experts, axes=[1])
    expanded, sorted_indices, _, _ = ta.ge.MoeInitRoutingV3(
        tokens, experts, None, None, active_num=0, expert_capacity=0, expert_num=_PERMUTE_EXPERTS, drop_pad_mode=0,
        expert_tokens_num_type=1, expert_tokens_num_flag=True, quant_mode=-1,
        active_expert_range=[0, _PERMUTE_EXPERTS], row_idx_type=0)
    if num_out_tokens:
        rows = meta_outputs[0].size[0] if meta_outputs is not None else None
        if not isinstance(rows, int):
            raise NotImplementedError("npu_moe_token_permute: num_out_tokens with a symbolic token count cannot be "
                                      "lowered by op_plugin (the row count must be static); pass None or 0")
        expanded = ta.ge.Slice(expanded, graph.Const([0, 0], dtype=types.DT_INT64),
                               graph.Const([rows, -1], dtype=types.DT_INT64))
    return expanded, sorted_indices


@library_converter("npu::npu_moe_token_unpermute", cases=[
    Support(F32(6, 4), T([3, 0, 5, 1, 4, 2], dtype=torch.int32), F32(3, 2)),
    Support(F32(4, 4), T([2, 0, 3, 1], dtype=torch.int32))])
def npu_moe_token_unpermute(ta: TorchAirApi, permuted_tokens, sorted_indices, probs=None, padded_mode=False,
                            restore_shape=None, meta_outputs=None):
    """MoeFinalizeRoutingV2 with row-major indices (drop_pad_mode 2), probs as its scales."""
    if padded_mode or restore_shape is not None:
        raise NotImplementedError("npu_moe_token_unpermute: padded_mode=True / restore_shape are not supported "
                                  "by CANN (only False / None)")
    return ta.ge.MoeFinalizeRoutingV2(permuted_tokens, sorted_indices, None, None, None, probs, None,
                                      drop_pad_mode=2, k=1)

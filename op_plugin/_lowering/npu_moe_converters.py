"""op_plugin's GE converters of torch_npu's MoE ops that TorchAir cannot lower on its own.

- `npu::npu_grouped_matmul` (completes TorchAir's): TorchAir's converter starts with
  `import torch_npu` (to compare fp4/hifloat8 dtype arguments), which fails wherever torch_npu is not
  importable (a CPU host). The non-quantised call (float x and weights, no scale/offset/antiquant/
  per-token lists, no dtype arguments) is lowered here to exactly the GroupedMatmul TorchAir builds
  for it: empty lists filled as `fill_empty_tensorlist` fills them (bias float32 for bfloat16 x,
  else x's dtype; scale uint64; offset float32; antiquant float16), dtype -1, no transposes,
  tuning_config [0]. Every other call goes to TorchAir's converter. The `.List` overload (int list
  group_list) is TorchAir's too.
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
from .registry import aten_converter, library_converter
from .torchair_api import TorchAirApi

_PERMUTE_EXPERTS = 10240


def _empty(ta: TorchAirApi, dtype):
    """TorchAir's `fill_empty_tensorlist`: one 0-element tensor of `dtype`."""
    graph = ta.graph
    return [ta.ge.Fill(graph.Const([0], dtype=graph.DataType.DT_INT32), graph.Cast(0.0, dst_type=dtype))]


@aten_converter("npu::npu_grouped_matmul", when="completes", cases=[
    Support([F32(6, 8)], [F32(3, 8, 4)], group_list=T([1, 3, 2], dtype=torch.int64), split_item=2, group_type=0,
            group_list_type=1),
    Support([BF16(5, 8)], [BF16(2, 8, 4)], group_list=T([2, 5], dtype=torch.int64), split_item=3, group_type=0),
    Support([F32(2, 8), F32(3, 6)], [F32(8, 4), F32(6, 5)], bias=[F32(4), F32(5)], split_item=0, group_type=-1)])
def npu_grouped_matmul(ta: TorchAirApi, x, weight, *, bias=None, scale=None, offset=None, antiquant_scale=None,
                       antiquant_offset=None, per_token_scale=None, group_list=None, activation_input=None,
                       activation_quant_scale=None, activation_quant_offset=None, split_item=0, group_type=-1,
                       group_list_type=0, act_type=0, tuning_config=None, output_dtype=None, x_dtype=None,
                       weight_dtype=None, scale_dtype=None, per_token_scale_dtype=None, meta_outputs=None):
    """Non-quantised float GroupedMatmul as TorchAir builds it; anything else: TorchAir's converter."""
    kwargs = dict(bias=bias, scale=scale, offset=offset, antiquant_scale=antiquant_scale,
                  antiquant_offset=antiquant_offset, per_token_scale=per_token_scale, group_list=group_list,
                  activation_input=activation_input, activation_quant_scale=activation_quant_scale,
                  activation_quant_offset=activation_quant_offset, split_item=split_item, group_type=group_type,
                  group_list_type=group_list_type, act_type=act_type, tuning_config=tuning_config,
                  output_dtype=output_dtype, x_dtype=x_dtype, weight_dtype=weight_dtype, scale_dtype=scale_dtype,
                  per_token_scale_dtype=per_token_scale_dtype)
    types = ta.graph.DataType
    floats = (types.DT_FLOAT16, types.DT_BF16, types.DT_FLOAT)
    quantised = any(kwargs[name] for name in ("scale", "offset", "antiquant_scale", "antiquant_offset",
                                              "per_token_scale", "activation_input", "activation_quant_scale",
                                              "activation_quant_offset"))
    typed = any(kwargs[name] is not None for name in ("output_dtype", "x_dtype", "weight_dtype", "scale_dtype",
                                                      "per_token_scale_dtype"))
    if quantised or typed or x[0].dtype not in floats or any(w.dtype != x[0].dtype for w in weight):
        return ta.original(x, weight, **kwargs, meta_outputs=meta_outputs)
    bias = bias or _empty(ta, types.DT_FLOAT if x[0].dtype == types.DT_BF16 else x[0].dtype)
    return ta.dynamic_ge.GroupedMatmul(
        x, weight, bias, _empty(ta, types.DT_UINT64), _empty(ta, types.DT_FLOAT), _empty(ta, types.DT_FLOAT16),
        _empty(ta, types.DT_FLOAT16), group_list, None, split_item=split_item, dtype=-1, transpose_weight=False,
        transpose_x=False, group_type=-1 if group_type is None else group_type, group_list_type=group_list_type,
        act_type=act_type, tuning_config=tuning_config or [0])


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

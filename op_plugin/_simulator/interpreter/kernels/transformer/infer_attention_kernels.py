"""GE kernels of the inference attentions: PromptFlashAttention, IncreFlashAttention and
FusedInferAttentionScore, computed by ``infer_attention.py`` (CANN's definition; see its doc).

What TorchAir's converters emit: ``npu_prompt_flash_attention`` -> PromptFlashAttention (actual
lengths as int64 tensors), ``npu_incre_flash_attention`` -> IncreFlashAttention (key/value as
one-tensor lists; ``actual_seq_lengths`` are the key/value lengths; block_table + block_size for
PagedAttention), ``npu_fused_infer_attention_score`` and its ``_v2`` -> FusedInferAttentionScore
(Q_S == 1 takes the decode branch, as documented). Refused naming the node: quantization
(dequant/quant scales, antiquant, int8/int4 key/value), pse_shift, left padding
(query/kv_padding_size), shared prefixes, learnable_sink, q/kv_start_idx, sparse_mode 5-9, key/value
lists of more than one tensor, out_dtype other than 0 and the cases ``infer_attention`` refuses.
``inner_precise`` selects the NPU's internal precision (and row-invalid correction of fully masked
rows, which are refused): the float32 CPU result is the same for every legal value.
"""
from __future__ import annotations

import torch

from ...registry import ge_kernel, refuse
from ..common import int_list, require_dtype
from .infer_attention import AttentionError, infer_attention

_HALF = (torch.float16, torch.bfloat16)
_INFER_TYPES = (torch.float16, torch.bfloat16, torch.float32)  # PromptFlashAttention / IncreFlashAttention


def refuse_given(given, why):
    for name, tensor in given:
        if tensor is not None:
            refuse(f"{name} is not implemented on the simulator ({why})")


def _ints(value):
    return None if value is None else int_list(value)


def _one_tensor(key, value):
    if len(key) != 1 or len(value) != 1:
        refuse(f"{len(key)} key / {len(value)} value tensors: only one of each (no key/value list) is implemented")
    return key[0], value[0]


def _run(*args, **kwargs):
    try:
        return infer_attention(*args, **kwargs)
    except AttentionError as error:
        refuse(str(error))


@ge_kernel("PromptFlashAttention", accepts={"query": _INFER_TYPES, "key": _INFER_TYPES, "value": _INFER_TYPES})
def prompt_flash_attention(query, key, value, pse_shift, atten_mask, actual_seq_lengths, actual_seq_lengths_kv,
                           deq_scale1, quant_scale1, deq_scale2, quant_scale2, quant_offset2, *, num_heads,
                           scale_value, pre_tokens, next_tokens, input_layout, num_key_value_heads, sparse_mode,
                           inner_precise):
    refuse_given((("deq_scale1", deq_scale1), ("quant_scale1", quant_scale1), ("deq_scale2", deq_scale2),
                  ("quant_scale2", quant_scale2), ("quant_offset2", quant_offset2)), "quantization")
    refuse_given((("pse_shift", pse_shift),), "position shift")
    if inner_precise not in (0, 1, 2, 3):
        refuse(f"inner_precise={inner_precise} is not a CANN value (0-3)")
    if input_layout == "TND":
        refuse("input_layout 'TND' is not a PromptFlashAttention layout here (BSH, BSND, BNSD, BNSD_BSND are)")
    return _run(query, key, value, atten_mask, actual_q=_ints(actual_seq_lengths),
                actual_kv=_ints(actual_seq_lengths_kv), num_heads=num_heads, num_key_value_heads=num_key_value_heads,
                scale=scale_value, pre_tokens=pre_tokens, next_tokens=next_tokens, input_layout=input_layout,
                sparse_mode=sparse_mode)[0]


@ge_kernel("IncreFlashAttention")
def incre_flash_attention(query, key, value, pse_shift, atten_mask, actual_seq_lengths, dequant_scale1, quant_scale1,
                          dequant_scale2, quant_scale2, quant_offset2, antiquant_scale, antiquant_offset, block_table,
                          kv_padding_size, *, num_heads, scale_value, input_layout, num_key_value_heads, block_size,
                          inner_precise):
    key, value = _one_tensor(key, value)
    for name, tensor in (("query", query), ("key", key), ("value", value)):
        require_dtype(name, tensor, _INFER_TYPES)
    refuse_given((("dequant_scale1", dequant_scale1), ("quant_scale1", quant_scale1),
                  ("dequant_scale2", dequant_scale2), ("quant_scale2", quant_scale2),
                  ("quant_offset2", quant_offset2), ("antiquant_scale", antiquant_scale),
                  ("antiquant_offset", antiquant_offset)), "quantization")
    refuse_given((("pse_shift", pse_shift),), "position shift")
    refuse_given((("kv_padding_size", kv_padding_size),), "left-padded key/value cache")
    if block_table is None and block_size:
        refuse(f"block_size={block_size} without block_table: PagedAttention needs both")
    if inner_precise not in (0, 1):
        refuse(f"inner_precise={inner_precise} is not a CANN value (0, 1)")
    return _run(query, key, value, atten_mask, actual_kv=_ints(actual_seq_lengths), block_table=block_table,
                block_size=block_size, num_heads=num_heads, num_key_value_heads=num_key_value_heads,
                scale=scale_value, input_layout=input_layout, decode=True)[0]


def query_seq_len(query, input_layout, num_heads):
    """Q_S, which picks FusedInferAttentionScore's branch (1: IncreFlashAttention's)."""
    if input_layout == "TND":
        return None
    if input_layout in ("BNSD", "BNSD_BSND"):
        return query.shape[2]
    return query.shape[1]


@ge_kernel("FusedInferAttentionScore", accepts={"query": _HALF})
def fused_infer_attention_score(query, key, value, pse_shift, atten_mask, actual_seq_lengths, actual_seq_lengths_kv,
                                dequant_scale1, quant_scale1, dequant_scale2, quant_scale2, quant_offset2,
                                antiquant_scale, antiquant_offset, block_table, query_padding_size, kv_padding_size,
                                key_antiquant_scale, key_antiquant_offset, value_antiquant_scale,
                                value_antiquant_offset, key_shared_prefix, value_shared_prefix,
                                actual_shared_prefix_len, query_rope, key_rope, key_rope_antiquant_scale,
                                dequant_scale_query, learnable_sink, q_start_idx, kv_start_idx, *, num_heads, scale,
                                pre_tokens, next_tokens, input_layout, num_key_value_heads, sparse_mode,
                                inner_precise, block_size, antiquant_mode, softmax_lse_flag, key_antiquant_mode,
                                value_antiquant_mode, query_quant_mode, pse_type, out_dtype):
    key, value = _one_tensor(key, value)
    for name, tensor in (("key", key), ("value", value)):
        require_dtype(name, tensor, _HALF)  # int8 / int4 key-value: antiquant, refused
    refuse_given((("dequant_scale1", dequant_scale1), ("quant_scale1", quant_scale1),
                  ("dequant_scale2", dequant_scale2), ("quant_scale2", quant_scale2),
                  ("quant_offset2", quant_offset2), ("antiquant_scale", antiquant_scale),
                  ("antiquant_offset", antiquant_offset), ("key_antiquant_scale", key_antiquant_scale),
                  ("key_antiquant_offset", key_antiquant_offset), ("value_antiquant_scale", value_antiquant_scale),
                  ("value_antiquant_offset", value_antiquant_offset),
                  ("key_rope_antiquant_scale", key_rope_antiquant_scale),
                  ("dequant_scale_query", dequant_scale_query)), "quantization")
    refuse_given((("pse_shift", pse_shift),), "position shift")
    refuse_given((("query_padding_size", query_padding_size), ("kv_padding_size", kv_padding_size)), "left padding")
    refuse_given((("key_shared_prefix", key_shared_prefix), ("value_shared_prefix", value_shared_prefix),
                  ("actual_shared_prefix_len", actual_shared_prefix_len)), "shared prefix")
    refuse_given((("learnable_sink", learnable_sink), ("q_start_idx", q_start_idx), ("kv_start_idx", kv_start_idx)),
                 "no CANN definition followed")
    for name, mode in (("antiquant_mode", antiquant_mode), ("key_antiquant_mode", key_antiquant_mode),
                       ("value_antiquant_mode", value_antiquant_mode), ("query_quant_mode", query_quant_mode),
                       ("pse_type", pse_type), ("out_dtype", out_dtype)):
        if mode:
            refuse(f"{name}={mode} is not implemented on the simulator (quantization / position shift / output cast)")
    if block_table is None and block_size:
        refuse(f"block_size={block_size} without block_table: PagedAttention needs both")
    decode = query_seq_len(query, input_layout, num_heads) == 1 and query_rope is None
    if inner_precise not in ((0, 1) if decode else (0, 1, 2, 3)):
        refuse(f"inner_precise={inner_precise} is not a CANN value for Q_S {'== 1' if decode else '> 1'}")
    return _run(query, key, value, atten_mask, actual_q=_ints(actual_seq_lengths),
                actual_kv=_ints(actual_seq_lengths_kv), block_table=block_table, block_size=block_size,
                num_heads=num_heads, num_key_value_heads=num_key_value_heads, scale=scale, pre_tokens=pre_tokens,
                next_tokens=next_tokens, input_layout=input_layout, sparse_mode=sparse_mode, decode=decode,
                query_rope=query_rope, key_rope=key_rope, lse_flag=softmax_lse_flag)

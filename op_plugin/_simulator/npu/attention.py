"""CPU reference kernels of torch_npu's attention ops (CPU dispatch key): ``npu_fusion_attention``
(forward), ``npu_prompt_flash_attention`` and ``npu_incre_flash_attention`` (inference).

The inference ops follow their torch_npu docs with the math of ``interpreter/kernels/transformer/attention.py``
(PromptFlashAttention, IncreFlashAttention): layouts BSH, BSND, BNSD (and BNSD_BSND for the prompt
op), GQA through ``num_key_value_heads`` (0 = as many as the query), masks (bool/int8/uint8;
sparse_mode 0-4 for the prompt op, whose mode 0 applies the pre_tokens/next_tokens band with a
mask), ``actual_seq_lengths`` of the decode op (key positions past each batch's length do not
take part). Refused: quantization (int8 inputs, the scale/offset tensors), pse_shift,
padding_mask, the prompt op's actual_seq_lengths/_kv, paged or left-padded key/value caches
(block_table, block_size, kv_padding_size). ``inner_precise`` of the decode op selects the NPU's
internal precision only (the CPU computes in float32 either way).

``npu_fusion_attention``:

Semantics from its torch_npu documentation (the wheel's ``_op_plugin_docs.py``): the masked,
scaled softmax attention of ``interpreter/kernels/transformer/attention.py`` (the same CANN
definition FlashAttentionScore
implements; layouts BSH, SBH, BSND, BNSD; masks and sparse_mode 0-4; GQA). Returns
``(attention_out, softmax_max, softmax_sum, softmax_out, seed, offset, numels)`` like torch_npu:
softmax_max/sum are float32 ``[B, N, Sq, 8]``, softmax_out is empty (reserved), and with
keep_prob=1 no dropout mask is drawn, so seed, offset and numels are 0.

Refused with an error naming the op and argument: keep_prob < 1 (dropout) and ``dropout_mask``,
``pse``, ``padding_mask`` (not supported by torch_npu either), ``prefix``, ``actual_seq_qlen``/
``actual_seq_kvlen`` and the TND layout (variable length), ``sink``, ``softmax_layout`` (TND
only). ``gen_mask_parallel``, ``sync``, ``seed`` and ``offset`` only steer dropout-mask
generation, which keep_prob=1 never does.
"""
from __future__ import annotations

from .reference import FLOATS


def npu_fusion_attention(query, key, value, head_num, input_layout, pse=None, padding_mask=None, atten_mask=None,
                         scale=1.0, keep_prob=1.0, pre_tockens=2147483647, next_tockens=2147483647, inner_precise=0,
                         prefix=None, actual_seq_qlen=None, actual_seq_kvlen=None, sparse_mode=0,
                         gen_mask_parallel=True, sync=False, softmax_layout="", sink=None, dropout_mask=None,
                         seed=0, offset=0):
    from ..interpreter.kernels.transformer import attention as core  # the kernels package loads on first use only

    op = "npu::npu_fusion_attention"
    refused = {"pse": pse, "padding_mask": padding_mask, "prefix": prefix, "actual_seq_qlen": actual_seq_qlen,
               "actual_seq_kvlen": actual_seq_kvlen, "sink": sink, "dropout_mask": dropout_mask}
    for name, given in refused.items():
        if given is not None:
            raise NotImplementedError(f"{op}: {name} is not implemented on the CPU simulator")
    if keep_prob != 1.0:
        raise NotImplementedError(f"{op}: keep_prob={keep_prob} (dropout) is not implemented on the CPU simulator")
    if softmax_layout:
        raise NotImplementedError(f"{op}: softmax_layout={softmax_layout!r} applies to TND only, not implemented")
    if inner_precise not in (0, 1, 2):
        raise ValueError(f"{op}: inner_precise={inner_precise} is not 0, 1 or 2")
    for name, tensor in (("query", query), ("key", key), ("value", value)):
        if tensor.dtype not in FLOATS or tensor.dtype != query.dtype:
            raise TypeError(f"{op}: {name} has dtype {tensor.dtype}; query, key and value take one of float16, "
                            "bfloat16, float32")
    try:
        q = core.to_bnsd(query, input_layout, head_num)
        kv = head_num if input_layout in ("BNSD", "BSND") else core.kv_heads(key.shape[-1], head_num, q.shape[-1])
        k, v = core.to_bnsd(key, input_layout, kv), core.to_bnsd(value, input_layout, kv)
        masked = core.sparse_mask(atten_mask, sparse_mode, pre_tockens, next_tockens, q.shape[2], k.shape[2])
        out, row_max, row_sum = core.attention(q, k, v, scale, masked)
    except core.AttentionError as error:
        raise ValueError(f"{op}: {error}") from None
    attention_out = core.from_bnsd(out, input_layout).to(query.dtype).contiguous()
    return (attention_out, core.softmax_stats(row_max), core.softmax_stats(row_sum), query.new_empty([0]), 0, 0, 0)



def _refuse(op, **given):
    for name, value in given.items():
        if value is not None:
            raise NotImplementedError(f"{op}: {name} is not implemented on the CPU simulator")


def _check_inputs(op, query, key, value):
    for name, tensor in (("query", query), ("key", key), ("value", value)):
        if tensor.dtype not in FLOATS or tensor.dtype != query.dtype:
            raise TypeError(f"{op}: {name} has dtype {tensor.dtype}; query, key and value take one of float16, "
                            "bfloat16, float32 (int8 quantization is not implemented)")


def npu_prompt_flash_attention(query, key, value, *, padding_mask=None, atten_mask=None, pse_shift=None,
                               actual_seq_lengths=None, deq_scale1=None, quant_scale1=None, deq_scale2=None,
                               quant_scale2=None, quant_offset2=None, num_heads=1, scale_value=1.0,
                               pre_tokens=2147483647, next_tokens=0, input_layout="BSH", num_key_value_heads=0,
                               actual_seq_lengths_kv=None, sparse_mode=0):
    """torch_npu's full-sequence inference attention (PromptFlashAttention); see
    interpreter/kernels/transformer/attention.py."""
    from ..interpreter.kernels.transformer import attention as core

    op = "npu::npu_prompt_flash_attention"
    _refuse(op, padding_mask=padding_mask, pse_shift=pse_shift, actual_seq_lengths=actual_seq_lengths,
            actual_seq_lengths_kv=actual_seq_lengths_kv, deq_scale1=deq_scale1, quant_scale1=quant_scale1,
            deq_scale2=deq_scale2, quant_scale2=quant_scale2, quant_offset2=quant_offset2)
    _check_inputs(op, query, key, value)
    try:
        return core.prompt_attention(query, key, value, atten_mask, num_heads=num_heads, scale_value=scale_value,
                                     pre_tokens=pre_tokens, next_tokens=next_tokens, input_layout=input_layout,
                                     num_key_value_heads=num_key_value_heads, sparse_mode=sparse_mode)
    except core.AttentionError as error:
        raise ValueError(f"{op}: {error}") from None


def npu_incre_flash_attention(query, key, value, *, padding_mask=None, atten_mask=None, pse_shift=None,
                              actual_seq_lengths=None, antiquant_scale=None, antiquant_offset=None, block_table=None,
                              dequant_scale1=None, quant_scale1=None, dequant_scale2=None, quant_scale2=None,
                              quant_offset2=None, kv_padding_size=None, num_heads=1, scale_value=1.0,
                              input_layout="BSH", num_key_value_heads=0, block_size=0, inner_precise=1):
    """torch_npu's decode attention (IncreFlashAttention); see interpreter/kernels/transformer/attention.py."""
    from ..interpreter.kernels.transformer import attention as core

    op = "npu::npu_incre_flash_attention"
    _refuse(op, padding_mask=padding_mask, pse_shift=pse_shift, antiquant_scale=antiquant_scale,
            antiquant_offset=antiquant_offset, block_table=block_table, dequant_scale1=dequant_scale1,
            quant_scale1=quant_scale1, dequant_scale2=dequant_scale2, quant_scale2=quant_scale2,
            quant_offset2=quant_offset2, kv_padding_size=kv_padding_size)
    if block_size:
        raise NotImplementedError(f"{op}: block_size={block_size} (paged attention) is not implemented")
    if inner_precise not in (0, 1):
        raise ValueError(f"{op}: inner_precise={inner_precise} is not 0 or 1")
    _check_inputs(op, query, key, value)
    try:
        return core.incre_attention(query, key, value, atten_mask, actual_seq_lengths, num_heads=num_heads,
                                    scale_value=scale_value, input_layout=input_layout,
                                    num_key_value_heads=num_key_value_heads)
    except core.AttentionError as error:
        raise ValueError(f"{op}: {error}") from None


KERNELS = {
    "npu_fusion_attention": npu_fusion_attention,
    "npu_prompt_flash_attention": npu_prompt_flash_attention,
    "npu_incre_flash_attention": npu_incre_flash_attention,
}

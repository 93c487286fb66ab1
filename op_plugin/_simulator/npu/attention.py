"""CPU reference kernels of torch_npu's attention ops (CPU dispatch key): ``npu_fusion_attention``
(forward), and the inference ops ``npu_prompt_flash_attention``, ``npu_incre_flash_attention``,
``npu_fused_infer_attention_score`` (and ``_v2``).

The inference ops compute CANN's definition in ``interpreter/kernels/attention/infer_attention.py``
(the GE kernels use the same function): layouts BSH, BSND, BNSD, BNSD_BSND, TND (fused op), GQA
through ``num_key_value_heads`` (0 = as many as the query), masks (bool/int8/uint8) with
sparse_mode 0-4, actual sequence lengths (the decode op's ``actual_seq_lengths`` are key/value
lengths), PagedAttention (``block_table`` + ``block_size``; key/value are the block pool),
softmax_lse. Refused with the argument's name: quantization (int8 inputs, scale/offset tensors,
antiquant), pse_shift, padding_mask, left padding (query/kv_padding_size), shared prefixes,
learnable_sink and the v2 op's dtype arguments. ``inner_precise`` selects the NPU's internal
precision only (the CPU computes in float32 either way).

``npu_fusion_attention``:

Semantics from its torch_npu documentation (the wheel's ``_op_plugin_docs.py``): the masked,
scaled softmax attention of ``interpreter/kernels/attention/flash_attention.py`` (the same CANN
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

import torch

from .reference import FLOATS


def npu_fusion_attention(query, key, value, head_num, input_layout, pse=None, padding_mask=None, atten_mask=None,
                         scale=1.0, keep_prob=1.0, pre_tockens=2147483647, next_tockens=2147483647, inner_precise=0,
                         prefix=None, actual_seq_qlen=None, actual_seq_kvlen=None, sparse_mode=0,
                         gen_mask_parallel=True, sync=False, softmax_layout="", sink=None, dropout_mask=None,
                         seed=0, offset=0):
    from ..interpreter.kernels.attention import flash_attention as core  # the kernels package loads on first use only

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


def _check_inputs(op, query, key, value, dtypes=FLOATS):
    names = ", ".join(str(d).replace("torch.", "") for d in dtypes)
    for name, tensor in (("query", query), ("key", key), ("value", value)):
        if tensor.dtype not in dtypes or tensor.dtype != query.dtype:
            raise TypeError(f"{op}: {name} has dtype {tensor.dtype}; query, key and value take one of {names} "
                            "(int8 quantization is not implemented)")
        if tensor.dim() and tensor.shape[-1] == 0 and query.numel():
            raise ValueError(f"{op}: {name} {tuple(tensor.shape)} has an empty last dim (no head dim) while query "
                             f"{tuple(query.shape)} is not empty")


def _infer(op, *args, **kwargs):
    from ..interpreter.kernels.attention import infer_attention as core  # the kernels package loads on first use

    try:
        return core.infer_attention(*args, **kwargs)
    except core.AttentionError as error:
        raise ValueError(f"{op}: {error}") from None


def npu_prompt_flash_attention(query, key, value, *, padding_mask=None, atten_mask=None, pse_shift=None,
                               actual_seq_lengths=None, deq_scale1=None, quant_scale1=None, deq_scale2=None,
                               quant_scale2=None, quant_offset2=None, num_heads=1, scale_value=1.0,
                               pre_tokens=2147483647, next_tokens=0, input_layout="BSH", num_key_value_heads=0,
                               actual_seq_lengths_kv=None, sparse_mode=0):
    """torch_npu's full-sequence inference attention (PromptFlashAttention)."""
    op = "npu::npu_prompt_flash_attention"
    _refuse(op, padding_mask=padding_mask, pse_shift=pse_shift, deq_scale1=deq_scale1, quant_scale1=quant_scale1,
            deq_scale2=deq_scale2, quant_scale2=quant_scale2, quant_offset2=quant_offset2)
    _check_inputs(op, query, key, value)
    if input_layout == "TND":
        raise ValueError(f"{op}: input_layout 'TND' is not implemented for this op (BSH, BSND, BNSD, BNSD_BSND are)")
    return _infer(op, query, key, value, atten_mask, actual_q=actual_seq_lengths, actual_kv=actual_seq_lengths_kv,
                  num_heads=num_heads, num_key_value_heads=num_key_value_heads, scale=scale_value,
                  pre_tokens=pre_tokens, next_tokens=next_tokens, input_layout=input_layout,
                  sparse_mode=sparse_mode)[0]


def npu_incre_flash_attention(query, key, value, *, padding_mask=None, atten_mask=None, pse_shift=None,
                              actual_seq_lengths=None, antiquant_scale=None, antiquant_offset=None, block_table=None,
                              dequant_scale1=None, quant_scale1=None, dequant_scale2=None, quant_scale2=None,
                              quant_offset2=None, kv_padding_size=None, num_heads=1, scale_value=1.0,
                              input_layout="BSH", num_key_value_heads=0, block_size=0, inner_precise=1):
    """torch_npu's decode attention (IncreFlashAttention): actual_seq_lengths are the key/value lengths."""
    op = "npu::npu_incre_flash_attention"
    _refuse(op, padding_mask=padding_mask, pse_shift=pse_shift, antiquant_scale=antiquant_scale,
            antiquant_offset=antiquant_offset, dequant_scale1=dequant_scale1, quant_scale1=quant_scale1,
            dequant_scale2=dequant_scale2, quant_scale2=quant_scale2, quant_offset2=quant_offset2,
            kv_padding_size=kv_padding_size)
    if block_table is None and block_size:
        raise ValueError(f"{op}: block_size={block_size} without block_table: PagedAttention needs both")
    if inner_precise not in (0, 1):
        raise ValueError(f"{op}: inner_precise={inner_precise} is not 0 or 1")
    _check_inputs(op, query, key, value)
    return _infer(op, query, key, value, atten_mask, actual_kv=actual_seq_lengths, block_table=block_table,
                  block_size=block_size, num_heads=num_heads, num_key_value_heads=num_key_value_heads,
                  scale=scale_value, input_layout=input_layout, decode=True)[0]


_HALF = (torch.float16, torch.bfloat16)


def _fused(op, query, key, value, atten_mask, actual_q, actual_kv, block_table, query_rope, key_rope, *, num_heads,
           num_key_value_heads, scale, pre_tokens, next_tokens, input_layout, sparse_mode, inner_precise, block_size,
           lse_flag):
    from ..interpreter.kernels.attention.infer_attention import query_seq_len

    _check_inputs(op, query, key, value, _HALF)
    if block_table is None and block_size:
        raise ValueError(f"{op}: block_size={block_size} without block_table: PagedAttention needs both")
    decode = query_seq_len(query, input_layout, num_heads) == 1 and query_rope is None
    if inner_precise not in ((0, 1) if decode else (0, 1, 2, 3)):
        branch = "Q_S == 1" if decode else "Q_S > 1"
        raise ValueError(f"{op}: inner_precise={inner_precise} is not a CANN value for {branch}")
    return _infer(op, query, key, value, atten_mask, actual_q=actual_q, actual_kv=actual_kv, block_table=block_table,
                  block_size=block_size, num_heads=num_heads, num_key_value_heads=num_key_value_heads, scale=scale,
                  pre_tokens=pre_tokens, next_tokens=next_tokens, input_layout=input_layout, sparse_mode=sparse_mode,
                  decode=decode, query_rope=query_rope, key_rope=key_rope, lse_flag=lse_flag)


def npu_fused_infer_attention_score(query, key, value, *, pse_shift=None, atten_mask=None, actual_seq_lengths=None,
                                    actual_seq_lengths_kv=None, dequant_scale1=None, quant_scale1=None,
                                    dequant_scale2=None, quant_scale2=None, quant_offset2=None, antiquant_scale=None,
                                    antiquant_offset=None, block_table=None, query_padding_size=None,
                                    kv_padding_size=None, key_antiquant_scale=None, key_antiquant_offset=None,
                                    value_antiquant_scale=None, value_antiquant_offset=None, key_shared_prefix=None,
                                    value_shared_prefix=None, actual_shared_prefix_len=None, query_rope=None,
                                    key_rope=None, key_rope_antiquant_scale=None, num_heads=1, scale=1.0,
                                    pre_tokens=2147483647, next_tokens=2147483647, input_layout="BSH",
                                    num_key_value_heads=0, sparse_mode=0, inner_precise=0, block_size=0,
                                    antiquant_mode=0, softmax_lse_flag=False, key_antiquant_mode=0,
                                    value_antiquant_mode=0):
    """torch_npu's fused inference attention (FusedInferAttentionScore): Q_S == 1 takes the decode branch."""
    op = "npu::npu_fused_infer_attention_score"
    _refuse(op, pse_shift=pse_shift, dequant_scale1=dequant_scale1, quant_scale1=quant_scale1,
            dequant_scale2=dequant_scale2, quant_scale2=quant_scale2, quant_offset2=quant_offset2,
            antiquant_scale=antiquant_scale, antiquant_offset=antiquant_offset, query_padding_size=query_padding_size,
            kv_padding_size=kv_padding_size, key_antiquant_scale=key_antiquant_scale,
            key_antiquant_offset=key_antiquant_offset, value_antiquant_scale=value_antiquant_scale,
            value_antiquant_offset=value_antiquant_offset, key_shared_prefix=key_shared_prefix,
            value_shared_prefix=value_shared_prefix, actual_shared_prefix_len=actual_shared_prefix_len,
            key_rope_antiquant_scale=key_rope_antiquant_scale)
    for name, mode in (("antiquant_mode", antiquant_mode), ("key_antiquant_mode", key_antiquant_mode),
                       ("value_antiquant_mode", value_antiquant_mode)):
        if mode:
            raise NotImplementedError(f"{op}: {name}={mode} (antiquant) is not implemented on the CPU simulator")
    return _fused(op, query, key, value, atten_mask, actual_seq_lengths, actual_seq_lengths_kv, block_table,
                  query_rope, key_rope, num_heads=num_heads, num_key_value_heads=num_key_value_heads, scale=scale,
                  pre_tokens=pre_tokens, next_tokens=next_tokens, input_layout=input_layout, sparse_mode=sparse_mode,
                  inner_precise=inner_precise, block_size=block_size, lse_flag=softmax_lse_flag)


def npu_fused_infer_attention_score_v2(query, key, value, *, query_rope=None, key_rope=None, pse_shift=None,
                                       atten_mask=None, actual_seq_qlen=None, actual_seq_kvlen=None, block_table=None,
                                       dequant_scale_query=None, dequant_scale_key=None, dequant_offset_key=None,
                                       dequant_scale_value=None, dequant_offset_value=None,
                                       dequant_scale_key_rope=None, quant_scale_out=None, quant_offset_out=None,
                                       quant_scale_p=None, learnable_sink=None, num_query_heads=1,
                                       num_key_value_heads=0, softmax_scale=1.0, pre_tokens=2147483647,
                                       next_tokens=2147483647, input_layout="BSH", sparse_mode=0, block_size=0,
                                       query_quant_mode=0, key_quant_mode=0, value_quant_mode=0, inner_precise=0,
                                       return_softmax_lse=False, **dtypes):
    """The v2 interface of the same op (TorchAir lowers it to FusedInferAttentionScore too)."""
    op = "npu::npu_fused_infer_attention_score_v2"
    _refuse(op, pse_shift=pse_shift, dequant_scale_query=dequant_scale_query, dequant_scale_key=dequant_scale_key,
            dequant_offset_key=dequant_offset_key, dequant_scale_value=dequant_scale_value,
            dequant_offset_value=dequant_offset_value, dequant_scale_key_rope=dequant_scale_key_rope,
            quant_scale_out=quant_scale_out, quant_offset_out=quant_offset_out, quant_scale_p=quant_scale_p,
            learnable_sink=learnable_sink, **dtypes)
    for name, mode in (("query_quant_mode", query_quant_mode), ("key_quant_mode", key_quant_mode),
                       ("value_quant_mode", value_quant_mode)):
        if mode:
            raise NotImplementedError(f"{op}: {name}={mode} (quantization) is not implemented on the CPU simulator")
    return _fused(op, query, key, value, atten_mask, actual_seq_qlen, actual_seq_kvlen, block_table, query_rope,
                  key_rope, num_heads=num_query_heads, num_key_value_heads=num_key_value_heads, scale=softmax_scale,
                  pre_tokens=pre_tokens, next_tokens=next_tokens, input_layout=input_layout, sparse_mode=sparse_mode,
                  inner_precise=inner_precise, block_size=block_size, lse_flag=return_softmax_lse)


def npu_fusion_attention_grad(query, key, value, dy, head_num, input_layout, *, pse=None, padding_mask=None,
                              atten_mask=None, softmax_max=None, softmax_sum=None, softmax_in=None, attention_in=None,
                              scale_value=1.0, keep_prob=1.0, pre_tockens=2147483647, next_tockens=2147483647,
                              inner_precise=0, seed=0, offset=0, numels=0, prefix=None, actual_seq_qlen=None,
                              actual_seq_kvlen=None, sparse_mode=0, gen_mask_parallel=True, sync=False,
                              softmax_layout="", sink=None):
    """The backward of npu_fusion_attention (FlashAttentionScoreGrad; see
    interpreter/kernels/attention/flash_attention.py): (dq, dk, dv, dpse, dsink): dpse None (no pse, as the
    wheel's Meta gives it), dsink empty."""
    from ..interpreter.kernels.attention import flash_attention as core

    op = "npu::npu_fusion_attention_grad"
    _refuse(op, pse=pse, padding_mask=padding_mask, prefix=prefix, actual_seq_qlen=actual_seq_qlen,
            actual_seq_kvlen=actual_seq_kvlen, sink=sink)
    if keep_prob != 1.0:
        raise NotImplementedError(f"{op}: keep_prob={keep_prob} (dropout) is not implemented on the CPU simulator")
    if softmax_layout:
        raise NotImplementedError(f"{op}: softmax_layout={softmax_layout!r} applies to TND only, not implemented")
    for name, tensor in (("query", query), ("key", key), ("value", value), ("dy", dy)):
        if tensor.dtype not in FLOATS or tensor.dtype != query.dtype:
            raise TypeError(f"{op}: {name} has dtype {tensor.dtype}; query, key, value and dy take one of "
                            "float16, bfloat16, float32")
    try:
        dq, dk, dv = core.fusion_attention_grad(
            query, key, value, dy, atten_mask, softmax_max, softmax_sum, attention_in, head_num=head_num,
            input_layout=input_layout, scale=scale_value, pre_tokens=pre_tockens, next_tokens=next_tockens,
            sparse_mode=sparse_mode)
    except core.AttentionError as error:
        raise ValueError(f"{op}: {error}") from None
    return dq, dk, dv, None, torch.empty([0])  # dpse: None without pse, as the wheel's Meta returns


def _mla_prolog(op, args, quant, eps_cq, eps_ckv, cache_mode, query_rope_dtype):
    from ..interpreter.kernels.attention import mla_prolog as core

    try:
        return core.run(quant, args, eps_cq=eps_cq, eps_ckv=eps_ckv, cache_mode=cache_mode,
                        query_rope_dtype=query_rope_dtype)
    except core.MlaError as error:
        raise ValueError(f"{op}: {error}") from None


def npu_mla_prolog(token_x, weight_dq, weight_uq_qr, weight_uk, weight_dkv_kr, rmsnorm_gamma_cq, rmsnorm_gamma_ckv,
                   rope_sin, rope_cos, cache_index, kv_cache, kr_cache, *, dequant_scale_x=None,
                   dequant_scale_w_dq=None, dequant_scale_w_uq_qr=None, dequant_scale_w_dkv_kr=None,
                   quant_scale_ckv=None, quant_scale_ckr=None, smooth_scales_cq=None, rmsnorm_epsilon_cq=1e-5,
                   rmsnorm_epsilon_ckv=1e-5, cache_mode="PA_BSND"):
    """MLA pre-processing (MlaProlog; interpreter/kernels/attention/mla_prolog.py): query, query_rope and
    the updated kv/kr caches (copies)."""
    return _mla_prolog("npu::npu_mla_prolog", (token_x, weight_dq, weight_uq_qr, weight_uk, weight_dkv_kr,
                                               rmsnorm_gamma_cq, rmsnorm_gamma_ckv, rope_sin, rope_cos, cache_index,
                                               kv_cache, kr_cache),
                       (dequant_scale_x, dequant_scale_w_dq, dequant_scale_w_uq_qr, dequant_scale_w_dkv_kr,
                        quant_scale_ckv, quant_scale_ckr, smooth_scales_cq),
                       rmsnorm_epsilon_cq, rmsnorm_epsilon_ckv, cache_mode, None)


def npu_mla_prolog_v2(token_x, weight_dq, weight_uq_qr, weight_uk, weight_dkv_kr, rmsnorm_gamma_cq, rmsnorm_gamma_ckv,
                      rope_sin, rope_cos, cache_index, kv_cache, kr_cache, *, dequant_scale_x=None,
                      dequant_scale_w_dq=None, dequant_scale_w_uq_qr=None, dequant_scale_w_dkv_kr=None,
                      quant_scale_ckv=None, quant_scale_ckr=None, smooth_scales_cq=None, rmsnorm_epsilon_cq=1e-5,
                      rmsnorm_epsilon_ckv=1e-5, cache_mode="PA_BSND"):
    """MlaPrologV2: npu_mla_prolog with query_rope in bfloat16 and dequant_scale_q_nope ([1] zeros unquantised)."""
    outs = _mla_prolog("npu::npu_mla_prolog_v2", (token_x, weight_dq, weight_uq_qr, weight_uk, weight_dkv_kr,
                                                  rmsnorm_gamma_cq, rmsnorm_gamma_ckv, rope_sin, rope_cos,
                                                  cache_index, kv_cache, kr_cache),
                       (dequant_scale_x, dequant_scale_w_dq, dequant_scale_w_uq_qr, dequant_scale_w_dkv_kr,
                        quant_scale_ckv, quant_scale_ckr, smooth_scales_cq),
                       rmsnorm_epsilon_cq, rmsnorm_epsilon_ckv, cache_mode, torch.bfloat16)
    return (*outs, torch.zeros([1], dtype=torch.float32))


def _mla_prolog_v3(op, token_x, weight_dq, weight_uq_qr, weight_uk, weight_dkv_kr, rmsnorm_gamma_cq,
                   rmsnorm_gamma_ckv, rope_sin, rope_cos, kv_cache, kr_cache, cache_index=None, dequant_scale_x=None,
                   dequant_scale_w_dq=None, dequant_scale_w_uq_qr=None, dequant_scale_w_dkv_kr=None,
                   quant_scale_ckv=None, quant_scale_ckr=None, smooth_scales_cq=None, actual_seq_len=None,
                   k_nope_clip_alpha=None, rmsnorm_epsilon_cq=1e-5, rmsnorm_epsilon_ckv=1e-5, cache_mode="PA_BSND",
                   qc_qr_scale=1.0, kc_scale=1.0, **rest):
    """V3's computation: (query, query_rope, kv_cache_out, kr_cache_out, dequant_scale_q_nope, query_norm,
    dequant_scale_q_norm), the caches as updated copies."""
    from ..interpreter.kernels.attention import mla_prolog as core

    dtypes = {name: rest.pop(name) for name in list(rest) if name.endswith("_dtype")}
    _refuse(op, **dtypes)
    try:
        return core.run_v3((dequant_scale_x, dequant_scale_w_dq, dequant_scale_w_uq_qr, dequant_scale_w_dkv_kr,
                            quant_scale_ckv, quant_scale_ckr, smooth_scales_cq),
                           (token_x, weight_dq, weight_uq_qr, weight_uk, weight_dkv_kr, rmsnorm_gamma_cq,
                            rmsnorm_gamma_ckv, rope_sin, rope_cos, kv_cache, kr_cache, cache_index),
                           actual_seq_len=actual_seq_len, k_nope_clip_alpha=k_nope_clip_alpha, settings=rest,
                           eps_cq=rmsnorm_epsilon_cq, eps_ckv=rmsnorm_epsilon_ckv, cache_mode=cache_mode,
                           qc_qr_scale=qc_qr_scale, kc_scale=kc_scale)
    except core.MlaError as error:
        raise ValueError(f"{op}: {error}") from None


def npu_mla_prolog_v3(*args, **kwargs):
    """MlaPrologV3 writing kv_cache and kr_cache in place (the schema's Tensor(a!)/(b!)); returns
    (query, query_rope, dequant_scale_q_nope, query_norm, dequant_scale_q_norm)."""
    query, query_rope, kv_out, kr_out, *rest = _mla_prolog_v3("npu::npu_mla_prolog_v3", *args, **kwargs)
    args[9].copy_(kv_out)
    args[10].copy_(kr_out)
    return (query, query_rope, *rest)


def npu_mla_prolog_v3_functional(*args, **kwargs):
    """The functional twin: (query, query_rope, dequant_scale_q_nope, query_norm, dequant_scale_q_norm,
    kv_cache_out, kr_cache_out)."""
    query, query_rope, kv_out, kr_out, *rest = _mla_prolog_v3("npu::npu_mla_prolog_v3_functional", *args, **kwargs)
    return (query, query_rope, *rest, kv_out, kr_out)


KERNELS = {
    "npu_mla_prolog": npu_mla_prolog,
    "npu_mla_prolog_v3": npu_mla_prolog_v3,
    "npu_mla_prolog_v3_functional": npu_mla_prolog_v3_functional,
    "npu_mla_prolog_v2": npu_mla_prolog_v2,
    "npu_fusion_attention": npu_fusion_attention,
    "npu_fusion_attention_grad": npu_fusion_attention_grad,
    "npu_prompt_flash_attention": npu_prompt_flash_attention,
    "npu_incre_flash_attention": npu_incre_flash_attention,
    "npu_fused_infer_attention_score": npu_fused_infer_attention_score,
    "npu_fused_infer_attention_score_v2": npu_fused_infer_attention_score_v2,
}

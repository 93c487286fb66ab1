"""op_plugin's completions of TorchAir's `npu::npu_fused_infer_attention_score_v2` and
`npu::npu_mla_prolog_v3_functional` converters.

TorchAir's converter starts with `import torch_npu` (to compare its fp4 / hifloat8 / float8_e8m0
dtype arguments), which fails wherever torch_npu is not importable (a CPU host). A call with none of
those (key/value not int4-in-int32, every `*_dtype` argument None, no `out_dtype`) is lowered here to
exactly the FusedInferAttentionScore node TorchAir builds for it: one-tensor key/value lists, the
actual lengths promoted to int64, the v1 inputs the v2 interface dropped left unfed, `antiquant_mode`
0, `pse_type` 0. Every other call goes to TorchAir's converter.

`npu_mla_prolog_v3_functional` (what functionalization makes of the in-place `npu_mla_prolog_v3`):
TorchAir's converter imports torch_npu too, for hifloat8 bitcasts that only `weight_quant_mode` 5
with dtype arguments takes; any other call is lowered here to TorchAir's TensorMove copies of the
caches and its MlaPrologV3 node, outputs reordered as the op returns them.
"""
from __future__ import annotations

import torch

from .cases import BF16, F16, Support, T
from .registry import aten_converter
from .torchair_api import TorchAirApi

_DTYPE_ARGUMENTS = ("query_dtype", "key_dtype", "value_dtype", "query_rope_dtype", "key_rope_dtype",
                    "key_shared_prefix_dtype", "value_shared_prefix_dtype", "dequant_scale_query_dtype",
                    "dequant_scale_key_dtype", "dequant_scale_value_dtype", "dequant_scale_key_rope_dtype",
                    "out_dtype")


@aten_converter("npu::npu_fused_infer_attention_score_v2", when="completes", cases=[
    Support(F16(2, 1, 32), F16(2, 8, 32), F16(2, 8, 32), num_query_heads=4, input_layout="BSH", softmax_scale=0.25),
    Support(BF16(2, 4, 1, 8), BF16(6, 4, 16), BF16(6, 4, 16), block_table=T([[0, 2], [5, 1]], dtype=torch.int32),
            block_size=4, actual_seq_kvlen=[7, 5], num_query_heads=4, num_key_value_heads=2, input_layout="BNSD",
            return_softmax_lse=True),
])
def npu_fused_infer_attention_score_v2(ta: TorchAirApi, query, key, value, *, query_rope=None, key_rope=None,
                                       pse_shift=None, atten_mask=None, actual_seq_qlen=None, actual_seq_kvlen=None,
                                       block_table=None, dequant_scale_query=None, dequant_scale_key=None,
                                       dequant_offset_key=None, dequant_scale_value=None, dequant_offset_value=None,
                                       dequant_scale_key_rope=None, quant_scale_out=None, quant_offset_out=None,
                                       quant_scale_p=None, learnable_sink=None, num_query_heads=1,
                                       num_key_value_heads=0, softmax_scale=1.0, pre_tokens=2147483647,
                                       next_tokens=2147483647, input_layout="BSH", sparse_mode=0, block_size=0,
                                       query_quant_mode=0, key_quant_mode=0, value_quant_mode=0, inner_precise=0,
                                       return_softmax_lse=False, meta_outputs=None, **dtypes):
    """The FusedInferAttentionScore TorchAir builds when no dtype argument is given; else TorchAir's."""
    int4 = ta.graph.DataType.DT_INT32
    if any(dtypes.get(name) is not None for name in _DTYPE_ARGUMENTS) or int4 in (key.dtype, value.dtype):
        return ta.original(
            query, key, value, query_rope=query_rope, key_rope=key_rope, pse_shift=pse_shift, atten_mask=atten_mask,
            actual_seq_qlen=actual_seq_qlen, actual_seq_kvlen=actual_seq_kvlen, block_table=block_table,
            dequant_scale_query=dequant_scale_query, dequant_scale_key=dequant_scale_key,
            dequant_offset_key=dequant_offset_key, dequant_scale_value=dequant_scale_value,
            dequant_offset_value=dequant_offset_value, dequant_scale_key_rope=dequant_scale_key_rope,
            quant_scale_out=quant_scale_out, quant_offset_out=quant_offset_out, quant_scale_p=quant_scale_p,
            learnable_sink=learnable_sink, num_query_heads=num_query_heads, num_key_value_heads=num_key_value_heads,
            softmax_scale=softmax_scale, pre_tokens=pre_tokens, next_tokens=next_tokens, input_layout=input_layout,
            sparse_mode=sparse_mode, block_size=block_size, query_quant_mode=query_quant_mode,
            key_quant_mode=key_quant_mode, value_quant_mode=value_quant_mode, inner_precise=inner_precise,
            return_softmax_lse=return_softmax_lse, meta_outputs=meta_outputs, **dtypes)
    int64 = ta.graph.DataType.DT_INT64
    if actual_seq_qlen is not None:
        actual_seq_qlen = ta.dtype_promote(actual_seq_qlen, target_dtype=int64)
    if actual_seq_kvlen is not None:
        actual_seq_kvlen = ta.dtype_promote(actual_seq_kvlen, target_dtype=int64)
    return ta.ge.FusedInferAttentionScore(
        query, [key], [value], pse_shift=pse_shift, atten_mask=atten_mask, actual_seq_lengths=actual_seq_qlen,
        actual_seq_lengths_kv=actual_seq_kvlen, dequant_scale1=None, quant_scale1=quant_scale_p, dequant_scale2=None,
        quant_scale2=quant_scale_out, quant_offset2=quant_offset_out, antiquant_scale=None, antiquant_offset=None,
        block_table=block_table, query_padding_size=None, kv_padding_size=None, key_antiquant_scale=dequant_scale_key,
        key_antiquant_offset=dequant_offset_key, value_antiquant_scale=dequant_scale_value,
        value_antiquant_offset=dequant_offset_value, key_shared_prefix=None, value_shared_prefix=None,
        actual_shared_prefix_len=None, query_rope=query_rope, key_rope=key_rope,
        key_rope_antiquant_scale=dequant_scale_key_rope, dequant_scale_query=dequant_scale_query,
        learnable_sink=learnable_sink, q_start_idx=None, kv_start_idx=None, num_heads=num_query_heads,
        scale=softmax_scale, pre_tokens=pre_tokens, next_tokens=next_tokens, input_layout=input_layout,
        num_key_value_heads=num_key_value_heads, sparse_mode=sparse_mode, inner_precise=inner_precise,
        block_size=block_size, antiquant_mode=0, softmax_lse_flag=return_softmax_lse,
        key_antiquant_mode=key_quant_mode, value_antiquant_mode=value_quant_mode, query_quant_mode=query_quant_mode,
        pse_type=0, out_dtype=None)


# The op's keyword arguments with the schema's defaults (TorchAir's converter passes every one to MlaPrologV3).
_MLA_V3_KEYWORDS = dict(cache_index=None, dequant_scale_x=None, dequant_scale_w_dq=None, dequant_scale_w_uq_qr=None,
                        dequant_scale_w_dkv_kr=None, quant_scale_ckv=None, quant_scale_ckr=None, smooth_scales_cq=None,
                        actual_seq_len=None, k_nope_clip_alpha=None, rmsnorm_epsilon_cq=1e-5, rmsnorm_epsilon_ckv=1e-5,
                        cache_mode="PA_BSND", query_norm_flag=False, kv_cache_quant_mode=0, query_quant_mode=0,
                        ckvkr_repo_mode=0, quant_scale_repo_mode=0, tile_size=128, qc_qr_scale=1.0, kc_scale=1.0)
_MLA_V3_DTYPES = ("token_x_dtype", "weight_dq_dtype", "weight_uq_qr_dtype", "weight_dkv_kr_dtype", "kv_cache_dtype")


@aten_converter("npu::npu_mla_prolog_v3_functional", when="completes", cases=[
    Support(BF16(4, 32), BF16(32, 24), BF16(24, 32), BF16(2, 8, 16), BF16(32, 24), BF16(24), BF16(16), BF16(4, 8),
            BF16(4, 8), BF16(4, 8, 1, 16), BF16(4, 8, 1, 8), cache_index=T([3, 9, 20, 31], dtype=torch.int64)),
])
def npu_mla_prolog_v3_functional(ta: TorchAirApi, token_x, weight_dq, weight_uq_qr, weight_uk, weight_dkv_kr,
                                 rmsnorm_gamma_cq, rmsnorm_gamma_ckv, rope_sin, rope_cos, kv_cache, kr_cache, *,
                                 meta_outputs=None, weight_quant_mode=0, **kwargs):
    """TorchAir's TensorMove + MlaPrologV3 when no hifloat8 bitcast applies; else TorchAir's converter."""
    dtypes = {name: kwargs.pop(name, None) for name in _MLA_V3_DTYPES}
    if weight_quant_mode == 5 and any(value is not None for value in dtypes.values()):
        return ta.original(token_x, weight_dq, weight_uq_qr, weight_uk, weight_dkv_kr, rmsnorm_gamma_cq,
                           rmsnorm_gamma_ckv, rope_sin, rope_cos, kv_cache, kr_cache, meta_outputs=meta_outputs,
                           weight_quant_mode=weight_quant_mode, **kwargs, **dtypes)
    query, query_rope, kv_out, kr_out, scale_q_nope, query_norm, scale_q_norm = ta.ge.MlaPrologV3(
        token_x, weight_dq, weight_uq_qr, weight_uk, weight_dkv_kr, rmsnorm_gamma_cq, rmsnorm_gamma_ckv, rope_sin,
        rope_cos, ta.ge.TensorMove(kv_cache), ta.ge.TensorMove(kr_cache), weight_quant_mode=weight_quant_mode,
        **{**_MLA_V3_KEYWORDS, **kwargs})
    return query, query_rope, scale_q_nope, query_norm, scale_q_norm, kv_out, kr_out

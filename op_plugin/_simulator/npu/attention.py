"""torch_npu's attention ops (CPU dispatch key) as adapters over the GE kernels TorchAir lowers them to:
on an NPU the eager op and the GE node run one CANN kernel, so here each eager op maps its torch_npu
arguments onto the GE op's inputs and attrs as TorchAir's converter does (``ge_converter/custom/
flash_attention.py``, ``fused_infer_attention_score(_v2).py``, ``npu_fusion_attention.py``), calls
``ge_op(Type)`` and packs the outputs; the GE kernel holds the computation and the one refusal list
(``interpreter/kernels/attention/``: ``flash_attention.py``, ``infer_attention.py``, ``mla_prolog.py``,
semantics and sources there) and every refusal names the op:

* ``npu_fusion_attention`` -> FlashAttentionScore; returns ``(attention_out, softmax_max, softmax_sum,
  softmax_out, seed, offset, numels)`` like torch_npu, seed/offset/numels 0 (keep_prob=1 draws no
  dropout mask). ``npu_fusion_attention_grad`` -> FlashAttentionScoreGrad: ``(dq, dk, dv, dpse, dsink)``
  with dpse None (no pse, as the wheel's Meta) and dsink empty;
* ``npu_prompt_flash_attention`` -> PromptFlashAttention (sparse_mode 10-14 as the converter maps them:
  sparse_mode - 10 with inner_precise 0; a float16 atten_mask read as uint8);
* ``npu_incre_flash_attention`` -> IncreFlashAttention (key/value as one-tensor lists);
* ``npu_fused_infer_attention_score`` and ``_v2`` -> FusedInferAttentionScore (v2's names mapped as
  its converter maps them: quant_scale_p -> quant_scale1, dequant_scale_key -> key_antiquant_scale, ...);
* ``npu_mla_prolog`` / ``_v2`` / ``_v3`` (and ``_v3_functional``) -> MlaProlog / MlaPrologV2 / MlaPrologV3
  (v3 writes kv_cache and kr_cache in place, the functional twin returns them).

Refused here, by the adapter, only arguments the GE op has no input or attr for (TorchAir drops or
bit-casts them): the prompt/incre attention's ``padding_mask`` (reserved in torch_npu: its eager kernel
and TorchAir's converter drop it, CANN's ops have no such input; refused in graph mode too,
`_lowering/reserved_argument_corrections.py`); npu_fusion_attention's ``sink``, ``dropout_mask`` and
``softmax_layout``; the ``*_dtype`` reinterpretations (hifloat8/fp8/fp4) of the v2/v3 ops.
``gen_mask_parallel``, ``sync``, ``seed`` and ``offset`` only steer dropout-mask generation.
"""
from __future__ import annotations

import torch

from ..interpreter.calls import ge_op
from ..interpreter.errors import KernelError
from .checks import named_refusals

_INT_MAX = 2147483647


def _no_ge_input(**given):
    """Refuse arguments the GE op has no input or attr for (TorchAir's converter drops or bit-casts them)."""
    for name, value in given.items():
        if value is not None:
            raise KernelError(f"{name} is not implemented on the simulator (no input of the GE op computes it)")


def _reserved_padding_mask(padding_mask):
    """torch_npu documents padding_mask of the prompt/incre flash attention as reserved, "not used yet"."""
    if padding_mask is not None:
        raise KernelError("padding_mask is a reserved argument (torch_npu's docs: not used yet; CANN's "
                          "PromptFlashAttention / IncreFlashAttention have no such input, so torch_npu's eager "
                          "kernel and TorchAir's converter drop it): pass the mask as atten_mask")


@named_refusals("npu_fusion_attention")
def npu_fusion_attention(query, key, value, head_num, input_layout, pse=None, padding_mask=None, atten_mask=None,
                         scale=1.0, keep_prob=1.0, pre_tockens=_INT_MAX, next_tockens=_INT_MAX, inner_precise=0,
                         prefix=None, actual_seq_qlen=None, actual_seq_kvlen=None, sparse_mode=0,
                         gen_mask_parallel=True, sync=False, softmax_layout="", sink=None, dropout_mask=None,
                         seed=0, offset=0):
    _no_ge_input(sink=sink, dropout_mask=dropout_mask, softmax_layout=softmax_layout or None)
    softmax_max, softmax_sum, softmax_out, attention_out = ge_op("FlashAttentionScore")(
        query, key, value, pse, None, padding_mask, atten_mask, prefix, actual_seq_qlen, actual_seq_kvlen, None,
        None, scale_value=scale, keep_prob=keep_prob, pre_tockens=pre_tockens, next_tockens=next_tockens,
        head_num=head_num, input_layout=input_layout, inner_precise=inner_precise, sparse_mode=sparse_mode)
    return attention_out, softmax_max, softmax_sum, softmax_out, 0, 0, 0


@named_refusals("npu_fusion_attention_grad")
def npu_fusion_attention_grad(query, key, value, dy, head_num, input_layout, *, pse=None, padding_mask=None,
                              atten_mask=None, softmax_max=None, softmax_sum=None, softmax_in=None, attention_in=None,
                              scale_value=1.0, keep_prob=1.0, pre_tockens=_INT_MAX, next_tockens=_INT_MAX,
                              inner_precise=0, seed=0, offset=0, numels=0, prefix=None, actual_seq_qlen=None,
                              actual_seq_kvlen=None, sparse_mode=0, gen_mask_parallel=True, sync=False,
                              softmax_layout="", sink=None):
    _no_ge_input(sink=sink, softmax_layout=softmax_layout or None)
    dq, dk, dv, _ = ge_op("FlashAttentionScoreGrad")(
        query, key, value, dy, pse, None, padding_mask, atten_mask, softmax_max, softmax_sum, softmax_in,
        attention_in, prefix, actual_seq_qlen, actual_seq_kvlen, None, None, scale_value=scale_value,
        keep_prob=keep_prob, pre_tockens=pre_tockens, next_tockens=next_tockens, head_num=head_num,
        input_layout=input_layout, inner_precise=inner_precise, sparse_mode=sparse_mode)
    return dq, dk, dv, None, torch.empty([0])  # dpse None without pse, as the wheel's Meta; dsink empty float32


@named_refusals("npu_prompt_flash_attention")
def npu_prompt_flash_attention(query, key, value, *, padding_mask=None, atten_mask=None, pse_shift=None,
                               actual_seq_lengths=None, deq_scale1=None, quant_scale1=None, deq_scale2=None,
                               quant_scale2=None, quant_offset2=None, num_heads=1, scale_value=1.0,
                               pre_tokens=_INT_MAX, next_tokens=0, input_layout="BSH", num_key_value_heads=0,
                               actual_seq_lengths_kv=None, sparse_mode=0, inner_precise=1):
    _reserved_padding_mask(padding_mask)
    if 10 <= sparse_mode <= 14:  # TorchAir's converter: the high-precision aliases of sparse_mode 0-4
        sparse_mode, inner_precise = sparse_mode - 10, 0
    if atten_mask is not None and atten_mask.dtype == torch.float16:  # the converter's cast
        atten_mask = atten_mask.to(torch.uint8)
    return ge_op("PromptFlashAttention")(
        query, key, value, pse_shift, atten_mask, actual_seq_lengths, actual_seq_lengths_kv, deq_scale1,
        quant_scale1, deq_scale2, quant_scale2, quant_offset2, num_heads=num_heads, scale_value=scale_value,
        pre_tokens=pre_tokens, next_tokens=next_tokens, input_layout=input_layout,
        num_key_value_heads=num_key_value_heads, sparse_mode=sparse_mode, inner_precise=inner_precise)


@named_refusals("npu_incre_flash_attention")
def npu_incre_flash_attention(query, key, value, *, padding_mask=None, atten_mask=None, pse_shift=None,
                              actual_seq_lengths=None, antiquant_scale=None, antiquant_offset=None, block_table=None,
                              dequant_scale1=None, quant_scale1=None, dequant_scale2=None, quant_scale2=None,
                              quant_offset2=None, kv_padding_size=None, num_heads=1, scale_value=1.0,
                              input_layout="BSH", num_key_value_heads=0, block_size=0, inner_precise=1):
    _reserved_padding_mask(padding_mask)
    return ge_op("IncreFlashAttention")(
        query, [key], [value], pse_shift, atten_mask, actual_seq_lengths, dequant_scale1, quant_scale1,
        dequant_scale2, quant_scale2, quant_offset2, antiquant_scale, antiquant_offset, block_table, kv_padding_size,
        num_heads=num_heads, scale_value=scale_value, input_layout=input_layout,
        num_key_value_heads=num_key_value_heads, block_size=block_size, inner_precise=inner_precise)


@named_refusals("npu_fused_infer_attention_score")
def npu_fused_infer_attention_score(query, key, value, *, pse_shift=None, atten_mask=None, actual_seq_lengths=None,
                                    actual_seq_lengths_kv=None, dequant_scale1=None, quant_scale1=None,
                                    dequant_scale2=None, quant_scale2=None, quant_offset2=None, antiquant_scale=None,
                                    antiquant_offset=None, block_table=None, query_padding_size=None,
                                    kv_padding_size=None, key_antiquant_scale=None, key_antiquant_offset=None,
                                    value_antiquant_scale=None, value_antiquant_offset=None, key_shared_prefix=None,
                                    value_shared_prefix=None, actual_shared_prefix_len=None, query_rope=None,
                                    key_rope=None, key_rope_antiquant_scale=None, num_heads=1, scale=1.0,
                                    pre_tokens=_INT_MAX, next_tokens=_INT_MAX, input_layout="BSH",
                                    num_key_value_heads=0, sparse_mode=0, inner_precise=0, block_size=0,
                                    antiquant_mode=0, softmax_lse_flag=False, key_antiquant_mode=0,
                                    value_antiquant_mode=0):
    """torch_npu's fused inference attention: FusedInferAttentionScore, as its converter maps it."""
    return ge_op("FusedInferAttentionScore")(
        query, [key], [value], pse_shift, atten_mask, actual_seq_lengths, actual_seq_lengths_kv, dequant_scale1,
        quant_scale1, dequant_scale2, quant_scale2, quant_offset2, antiquant_scale, antiquant_offset, block_table,
        query_padding_size, kv_padding_size, key_antiquant_scale, key_antiquant_offset, value_antiquant_scale,
        value_antiquant_offset, key_shared_prefix, value_shared_prefix, actual_shared_prefix_len, query_rope,
        key_rope, key_rope_antiquant_scale, None, None, None, None, num_heads=num_heads, scale=scale,
        pre_tokens=pre_tokens, next_tokens=next_tokens, input_layout=input_layout,
        num_key_value_heads=num_key_value_heads, sparse_mode=sparse_mode, inner_precise=inner_precise,
        block_size=block_size, antiquant_mode=antiquant_mode, softmax_lse_flag=softmax_lse_flag,
        key_antiquant_mode=key_antiquant_mode, value_antiquant_mode=value_antiquant_mode, query_quant_mode=0,
        pse_type=0)


@named_refusals("npu_fused_infer_attention_score_v2")
def npu_fused_infer_attention_score_v2(query, key, value, *, query_rope=None, key_rope=None, pse_shift=None,
                                       atten_mask=None, actual_seq_qlen=None, actual_seq_kvlen=None, block_table=None,
                                       dequant_scale_query=None, dequant_scale_key=None, dequant_offset_key=None,
                                       dequant_scale_value=None, dequant_offset_value=None,
                                       dequant_scale_key_rope=None, quant_scale_out=None, quant_offset_out=None,
                                       quant_scale_p=None, learnable_sink=None, num_query_heads=1,
                                       num_key_value_heads=0, softmax_scale=1.0, pre_tokens=_INT_MAX,
                                       next_tokens=_INT_MAX, input_layout="BSH", sparse_mode=0, block_size=0,
                                       query_quant_mode=0, key_quant_mode=0, value_quant_mode=0, inner_precise=0,
                                       return_softmax_lse=False, **dtypes):
    """The v2 interface: FusedInferAttentionScore with the names its converter maps; the ``*_dtype``
    arguments (bit-cast reinterpretations in the converter) are refused."""
    _no_ge_input(**dtypes)
    return ge_op("FusedInferAttentionScore")(
        query, [key], [value], pse_shift, atten_mask, actual_seq_qlen, actual_seq_kvlen, None, quant_scale_p, None,
        quant_scale_out, quant_offset_out, None, None, block_table, None, None, dequant_scale_key,
        dequant_offset_key, dequant_scale_value, dequant_offset_value, None, None, None, query_rope, key_rope,
        dequant_scale_key_rope, dequant_scale_query, learnable_sink, None, None, num_heads=num_query_heads,
        scale=softmax_scale, pre_tokens=pre_tokens, next_tokens=next_tokens, input_layout=input_layout,
        num_key_value_heads=num_key_value_heads, sparse_mode=sparse_mode, inner_precise=inner_precise,
        block_size=block_size, antiquant_mode=0, softmax_lse_flag=return_softmax_lse,
        key_antiquant_mode=key_quant_mode, value_antiquant_mode=value_quant_mode, query_quant_mode=query_quant_mode,
        pse_type=0)


# ---- aclgraph's static-workspace forms (TorchAir's replace_dynamic_workspace_ops) ------------------------------
# Under reduce-overhead / npugraph_ex, TorchAir replaces each fused-infer-attention node by the op's workspace query
# and its `.out` form fed that workspace, so the captured kernel keeps one buffer across replays
# (_acl_concrete_graph/acl_graph.py, _REPLACE_FUNC_MAP). On an NPU the size is CANN's tiling at the maximum sequence
# lengths (aclnnFusedInferAttentionScoreV3GetWorkspaceSize), which the simulator does not have: its kernel runs on
# the host and needs no device workspace, so the query answers an empty buffer and the `.out` form reads none.

def _no_workspace(query):
    """A workspace query's answer: the empty buffer the simulator's kernel needs, in query's dtype as torch_npu
    allocates its buffer (apply_tensor_without_format({size}, query.options()))."""
    return query.new_empty(0)


def _written(op, results, out, workspace, lse_wanted):
    """The `.out` form: the results written into `out` (torch_npu registers it as ``Tensor[] out``: [attention_out,
    softmax_lse]), which torch_npu's kernel fills without resizing (the aclnn call checks them against the shapes
    it infers). softmax_lse is written only when the call asks for it (softmax_lse_flag / return_softmax_lse):
    otherwise the kernel leaves it alone, whatever it is (torch_npu's example passes an empty [1] float16)."""
    if workspace is not None and not isinstance(workspace, torch.Tensor):
        raise TypeError(f"npu::{op}.out: workspace must be a tensor, got {type(workspace).__name__}")
    if len(out) != len(results):
        raise ValueError(f"npu::{op}.out: out must hold {len(results)} tensors (attention_out, softmax_lse), "
                         f"got {len(out)}")
    written = zip(("attention_out", "softmax_lse"), out, results, strict=True)
    written = [entry for entry in written if lse_wanted or entry[0] == "attention_out"]
    for name, target, value in written:
        if target.shape != value.shape or target.dtype != value.dtype:
            raise ValueError(f"npu::{op}.out: out's {name} is {target.dtype} {list(target.shape)} where the op "
                             f"gives {value.dtype} {list(value.shape)}; the out tensors are written as they are, "
                             "not resized")
    for _, target, value in written:
        target.copy_(value)
    return tuple(out)


def fused_infer_attention_score_get_max_workspace(query, key, value, **kwargs):
    """torch_npu's _npu_fused_infer_attention_score_get_max_workspace (its arguments are the op's)."""
    del key, value, kwargs
    return _no_workspace(query)


def fused_infer_attention_score_out(query, key, value, *, workspace=None, out, **kwargs):
    """npu_fused_infer_attention_score.out: the op, its outputs written into out = [attention_out, softmax_lse]."""
    results = npu_fused_infer_attention_score(query, key, value, **kwargs)
    return _written("npu_fused_infer_attention_score", results, out, workspace, kwargs.get("softmax_lse_flag", False))


def fused_infer_attention_score_v2_out(query, key, value, *, workspace=None, out, **kwargs):
    """npu_fused_infer_attention_score_v2.out: the v2 op, its outputs written into out = [attention_out,
    softmax_lse]."""
    results = npu_fused_infer_attention_score_v2(query, key, value, **kwargs)
    return _written("npu_fused_infer_attention_score_v2", results, out, workspace,
                    kwargs.get("return_softmax_lse", False))


_MLA_QUANT = ("dequant_scale_x", "dequant_scale_w_dq", "dequant_scale_w_uq_qr", "dequant_scale_w_dkv_kr",
              "quant_scale_ckv", "quant_scale_ckr", "smooth_scales_cq")


def _mla_prolog(op_type, token_x, weight_dq, weight_uq_qr, weight_uk, weight_dkv_kr, rmsnorm_gamma_cq,
                rmsnorm_gamma_ckv, rope_sin, rope_cos, cache_index, kv_cache, kr_cache, *, rmsnorm_epsilon_cq=1e-5,
                rmsnorm_epsilon_ckv=1e-5, cache_mode="PA_BSND", **quant):
    unknown = sorted(set(quant) - set(_MLA_QUANT))
    if unknown:
        raise TypeError(f"{op_type} has no argument {', '.join(unknown)}")
    return ge_op(op_type)(token_x, weight_dq, weight_uq_qr, weight_uk, weight_dkv_kr, rmsnorm_gamma_cq,
                          rmsnorm_gamma_ckv, rope_sin, rope_cos, cache_index, kv_cache, kr_cache,
                          *(quant.get(name) for name in _MLA_QUANT), rmsnorm_epsilon_cq=rmsnorm_epsilon_cq,
                          rmsnorm_epsilon_ckv=rmsnorm_epsilon_ckv, cache_mode=cache_mode)


@named_refusals("npu_mla_prolog")
def npu_mla_prolog(*args, **kwargs):
    """MlaProlog: (query, query_rope, kv_cache_out, kr_cache_out), the caches as updated copies."""
    return _mla_prolog("MlaProlog", *args, **kwargs)


@named_refusals("npu_mla_prolog_v2")
def npu_mla_prolog_v2(*args, **kwargs):
    """MlaPrologV2: npu_mla_prolog with query_rope in bfloat16 and dequant_scale_q_nope ([1] zeros unquantised)."""
    return _mla_prolog("MlaPrologV2", *args, **kwargs)


def _mla_prolog_v3(token_x, weight_dq, weight_uq_qr, weight_uk, weight_dkv_kr, rmsnorm_gamma_cq, rmsnorm_gamma_ckv,
                   rope_sin, rope_cos, kv_cache, kr_cache, cache_index=None, dequant_scale_x=None,
                   dequant_scale_w_dq=None, dequant_scale_w_uq_qr=None, dequant_scale_w_dkv_kr=None,
                   quant_scale_ckv=None, quant_scale_ckr=None, smooth_scales_cq=None, actual_seq_len=None,
                   k_nope_clip_alpha=None, rmsnorm_epsilon_cq=1e-5, rmsnorm_epsilon_ckv=1e-5, cache_mode="PA_BSND",
                   query_norm_flag=False, weight_quant_mode=0, kv_cache_quant_mode=0, query_quant_mode=0,
                   ckvkr_repo_mode=0, quant_scale_repo_mode=0, tile_size=128, qc_qr_scale=1.0, kc_scale=1.0,
                   **dtypes):
    """MlaPrologV3: (query, query_rope, kv_cache_out, kr_cache_out, dequant_scale_q_nope, query_norm,
    dequant_scale_q_norm), torch_npu's defaults; the ``*_dtype`` reinterpretations (bit-casts in TorchAir's
    converter) are refused."""
    _no_ge_input(**dtypes)
    return ge_op("MlaPrologV3")(
        token_x, weight_dq, weight_uq_qr, weight_uk, weight_dkv_kr, rmsnorm_gamma_cq, rmsnorm_gamma_ckv, rope_sin,
        rope_cos, kv_cache, kr_cache, cache_index, dequant_scale_x, dequant_scale_w_dq, dequant_scale_w_uq_qr,
        dequant_scale_w_dkv_kr, quant_scale_ckv, quant_scale_ckr, smooth_scales_cq, actual_seq_len,
        k_nope_clip_alpha, rmsnorm_epsilon_cq=rmsnorm_epsilon_cq, rmsnorm_epsilon_ckv=rmsnorm_epsilon_ckv,
        cache_mode=cache_mode, query_norm_flag=query_norm_flag, weight_quant_mode=weight_quant_mode,
        kv_cache_quant_mode=kv_cache_quant_mode, query_quant_mode=query_quant_mode, ckvkr_repo_mode=ckvkr_repo_mode,
        quant_scale_repo_mode=quant_scale_repo_mode, tile_size=tile_size, qc_qr_scale=qc_qr_scale, kc_scale=kc_scale)


@named_refusals("npu_mla_prolog_v3")
def npu_mla_prolog_v3(*args, **kwargs):
    """MlaPrologV3 writing kv_cache and kr_cache in place (the schema's Tensor(a!)/(b!)); returns
    (query, query_rope, dequant_scale_q_nope, query_norm, dequant_scale_q_norm)."""
    query, query_rope, kv_out, kr_out, *rest = _mla_prolog_v3(*args, **kwargs)
    args[9].copy_(kv_out)
    args[10].copy_(kr_out)
    return (query, query_rope, *rest)


@named_refusals("npu_mla_prolog_v3_functional")
def npu_mla_prolog_v3_functional(*args, **kwargs):
    """The functional twin: (query, query_rope, dequant_scale_q_nope, query_norm, dequant_scale_q_norm,
    kv_cache_out, kr_cache_out)."""
    query, query_rope, kv_out, kr_out, *rest = _mla_prolog_v3(*args, **kwargs)
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
    "npu_fused_infer_attention_score.out": fused_infer_attention_score_out,
    "npu_fused_infer_attention_score_v2.out": fused_infer_attention_score_v2_out,
    "_npu_fused_infer_attention_score_get_max_workspace": fused_infer_attention_score_get_max_workspace,
    "_npu_fused_infer_attention_score_v2_get_max_workspace": fused_infer_attention_score_get_max_workspace,
}
# aclgraph's static-workspace forms: no Meta function in torch_npu, no TorchAir converter (eager and capture only)
EAGER_ONLY = frozenset({"npu_fused_infer_attention_score.out", "npu_fused_infer_attention_score_v2.out",
                        "_npu_fused_infer_attention_score_get_max_workspace",
                        "_npu_fused_infer_attention_score_v2_get_max_workspace"})

"""Fused attention GE ops: FlashAttentionScore (forward), PromptFlashAttention, IncreFlashAttention.

Written from CANN's definitions (ops-transformer FlashAttentionScore; torch_npu's
``npu_fusion_attention`` documentation in the wheel's ``_op_plugin_docs.py``):

    attention_out = softmax(mask(scale * query @ key^T, atten_mask)) @ value

computed per head in float32 and rounded once to the query dtype. Query heads N and key/value
heads Nkv may differ (GQA): N / Nkv query heads share one key/value head.

Masks (True = masked out, as in CANN). Without ``atten_mask`` nothing is masked, whatever
``sparse_mode``/``pre_tockens``/``next_tockens`` say (documented). With it:

* sparse_mode 0: atten_mask (BNSS, B1SS, 11SS or SS, bool/uint8), and the band
  ``-pre_tockens <= j - i <= next_tockens`` counted from the top-left corner;
* 1: atten_mask only;
* 2 / 3: causal from the top-left / bottom-right corner, 4: the band counted from the bottom-right
  corner. For these CANN takes the compressed 2048x2048 upper-triangular mask; it is checked to be
  exactly that, and the mask itself is generated from the mode.

Not implemented, refused naming the node: dropout (keep_prob < 1 and drop_mask), real_shift (pse),
padding_mask, prefix and variable-length inputs (actual_seq_qlen/kvlen, TND, sparse_mode 5-8),
non-zero q_start_idx / kv_start_idx, and rows that are entirely masked (CANN's result for those
depends on inner_precise; no definition was found to follow). ``inner_precise`` changes only
fully masked rows (value 2) and the NPU's internal precision, so values 0-2 give these results.

PromptFlashAttention / IncreFlashAttention (CANN ops-transformer; torch_npu's
``npu_prompt_flash_attention`` / ``npu_incre_flash_attention`` docs) use the same attention:
layouts BSH, BSND, BNSD (and BNSD_BSND, read BNSD and written BSND, for the prompt op), GQA
through ``num_key_value_heads``, masks bool/int8/uint8 (the converter turns a float16 mask into
uint8). The prompt op takes sparse_mode 0-4 as above (mode 0 with a mask also applies the band
of pre_tokens/next_tokens) and gives zeros when key/value have no positions (documented). The
decode op masks key positions at or after ``actual_seq_lengths[b]``. Refused naming the node:
quantization inputs, pse_shift, the prompt op's actual_seq_lengths(_kv), key/value lists, paged
or left-padded caches (block_table, block_size, kv_padding_size). ``inner_precise`` selects the
NPU's internal precision (0-3 for the prompt op: 2/3 also correct fully masked rows, refused
above) and does not change float32 results.
"""
from __future__ import annotations

import torch

from ...registry import ge_kernel, refuse
from ..common import int_list, opmath, require_dtype

_COMPRESSED_MASK = 2048
_ROW_MAX_COPIES = 8  # CANN stores softmax max/sum repeated 8 times per row (32-byte blocks)


class AttentionError(ValueError):
    """An attention case this module does not implement (the caller names its op or node)."""


def to_bnsd(x, layout, heads):
    """[B, N, S, D] view of a query/key/value in `layout` (BSH, SBH, BSND, BNSD)."""
    if layout == "BNSD":
        return x
    if layout == "BSND":
        return x.transpose(1, 2)
    if layout in ("BSH", "SBH"):
        if x.shape[-1] % heads:
            raise AttentionError(f"hidden size {x.shape[-1]} is not a multiple of {heads} heads")
        bsh = x if layout == "BSH" else x.transpose(0, 1)
        return bsh.reshape(bsh.shape[0], bsh.shape[1], heads, bsh.shape[2] // heads).transpose(1, 2)
    raise AttentionError(f"input_layout {layout!r} is not implemented (BSH, SBH, BSND, BNSD are)")


def from_bnsd(out, layout):
    """The inverse of `to_bnsd` for the attention output."""
    if layout == "BNSD":
        return out
    if layout == "BSND":
        return out.transpose(1, 2)
    bsh = out.transpose(1, 2).reshape(out.shape[0], out.shape[2], -1)
    return bsh if layout == "BSH" else bsh.transpose(0, 1)


def kv_heads(key_bsh_width, query_heads, query_head_dim):
    """Key/value head count of a BSH/SBH key whose head dim equals the query's."""
    if query_head_dim == 0 or key_bsh_width % query_head_dim:
        raise AttentionError(f"key hidden size {key_bsh_width} is not a multiple of the head dim {query_head_dim}")
    return key_bsh_width // query_head_dim


def band(sq, skv, pre_tokens, next_tokens, *, bottom_right):
    """True where (i, j) lies outside ``-pre_tokens <= j - i - offset <= next_tokens``."""
    i = torch.arange(sq).unsqueeze(1)
    j = torch.arange(skv).unsqueeze(0)
    diagonal = j - i - (skv - sq if bottom_right else 0)
    return (diagonal > next_tokens) | (diagonal < -pre_tokens)


def sparse_mask(atten_mask, sparse_mode, pre_tokens, next_tokens, sq, skv, mask_dtypes=(torch.bool, torch.uint8)):
    """The boolean mask (True = masked) FlashAttentionScore / PromptFlashAttention apply, broadcastable
    to [B, N, Sq, Skv]."""
    if atten_mask is None:
        return None  # documented: no mask means full attention, sparse_mode and tokens ignored
    if atten_mask.dtype not in mask_dtypes:
        names = " or ".join(str(d).replace("torch.", "") for d in mask_dtypes)
        raise AttentionError(f"atten_mask must be {names}, got {atten_mask.dtype}")
    given = atten_mask != 0
    if given.dim() == 3:  # (B, Sq, Skv) and (1, Sq, Skv), taken by PromptFlashAttention
        given = given.unsqueeze(1)
    if sparse_mode in (0, 1):
        if given.dim() not in (2, 4) or tuple(given.shape[-2:]) != (sq, skv):
            raise AttentionError(f"atten_mask of shape {tuple(given.shape)} is not [.., {sq}, {skv}] "
                                 "(BNSS, B1SS, 11SS or SS)")
        return given | band(sq, skv, pre_tokens, next_tokens, bottom_right=False) if sparse_mode == 0 else given
    if sparse_mode in (2, 3, 4):
        expected = torch.ones(_COMPRESSED_MASK, _COMPRESSED_MASK, dtype=torch.bool).triu(1)
        if tuple(given.shape) != expected.shape or not torch.equal(given, expected):
            raise AttentionError(f"sparse_mode {sparse_mode} takes the compressed "
                                 f"{_COMPRESSED_MASK}x{_COMPRESSED_MASK} "
                                 f"upper-triangular atten_mask, got shape {tuple(given.shape)} or other values")
        if sparse_mode == 4:
            return band(sq, skv, pre_tokens, next_tokens, bottom_right=True)
        return band(sq, skv, skv + sq, 0, bottom_right=sparse_mode == 3)  # causal: no limit before the diagonal
    raise AttentionError(f"sparse_mode {sparse_mode} is not implemented (0-4 are; 5-8 need prefix/varlen inputs)")


def attention(query, key, value, scale, masked):
    """float32 attention on [B, N, S, D] tensors; returns (out [B,N,Sq,Dv], row max, row sum [B,N,Sq])."""
    q, k, v = opmath(query).float(), opmath(key).float(), opmath(value).float()
    heads, kv = q.shape[1], k.shape[1]
    if kv == 0 or heads % kv:
        raise AttentionError(f"{heads} query heads are not a multiple of {kv} key/value heads")
    if kv != heads:  # GQA: each key/value head serves heads // kv consecutive query heads
        k = k.repeat_interleave(heads // kv, dim=1)
        v = v.repeat_interleave(heads // kv, dim=1)
    scores = torch.matmul(q, k.transpose(-1, -2)) * scale
    if masked is not None:
        masked = masked.expand_as(scores)
        if scores.shape[-1] and bool(masked.all(dim=-1).any()):
            raise AttentionError("a query row is masked entirely; its result is not defined here")
        scores = scores.masked_fill(masked, float("-inf"))
    row_max = scores.amax(dim=-1) if scores.shape[-1] else scores.new_full(scores.shape[:-1], float("-inf"))
    weights = torch.exp(scores - row_max.unsqueeze(-1))
    row_sum = weights.sum(dim=-1)
    out = torch.matmul(weights / row_sum.unsqueeze(-1), v)
    return out, row_max, row_sum


def softmax_stats(row):
    """CANN's softmax_max / softmax_sum layout: [B, N, Sq, 8], each row value repeated."""
    return row.unsqueeze(-1).expand(*row.shape, _ROW_MAX_COPIES).contiguous()


_HALF_TYPES = (torch.float16, torch.bfloat16)


@ge_kernel("FlashAttentionScore", accepts={"query": _HALF_TYPES, "key": _HALF_TYPES, "value": _HALF_TYPES})
def flash_attention_score(query, key, value, real_shift, drop_mask, padding_mask, atten_mask, prefix,
                          actual_seq_qlen, actual_seq_kvlen, q_start_idx, kv_start_idx, *, scale_value, keep_prob,
                          pre_tockens, next_tockens, head_num, input_layout, inner_precise, sparse_mode):
    refused = (("real_shift (pse)", real_shift), ("drop_mask (dropout)", drop_mask), ("padding_mask", padding_mask),
               ("prefix", prefix), ("actual_seq_qlen", actual_seq_qlen), ("actual_seq_kvlen", actual_seq_kvlen))
    for what, given in refused:
        if given is not None:
            refuse(f"{what} is not implemented on the simulator")
    for what, given in (("q_start_idx", q_start_idx), ("kv_start_idx", kv_start_idx)):
        if given is not None and any(int_list(given)):
            refuse(f"a non-zero {what} is not implemented on the simulator")
    if keep_prob != 1.0:
        refuse(f"keep_prob={keep_prob} (dropout) is not implemented on the simulator")
    if inner_precise not in (0, 1, 2):
        refuse(f"inner_precise={inner_precise} is not a CANN value (0, 1, 2)")
    layout, heads = input_layout, head_num
    try:
        q = to_bnsd(query, layout, heads)
        kv = heads if layout in ("BNSD", "BSND") else kv_heads(key.shape[-1], heads, q.shape[-1])
        k, v = to_bnsd(key, layout, kv), to_bnsd(value, layout, kv)
        masked = sparse_mask(atten_mask, sparse_mode, pre_tockens, next_tockens, q.shape[2], k.shape[2])
        out, row_max, row_sum = attention(q, k, v, scale_value, masked)
    except AttentionError as error:
        refuse(str(error))
    return (softmax_stats(row_max), softmax_stats(row_sum), query.new_empty([0]),
            from_bnsd(out, layout).to(query.dtype).contiguous())


# ---- inference attention: PromptFlashAttention (full sequence) and IncreFlashAttention (decode) ----

INFER_MASK_DTYPES = (torch.bool, torch.int8, torch.uint8)


def _heads_and_layouts(layout, num_heads, num_key_value_heads):
    """(input layout, output layout, key/value heads); BNSD_BSND reads BNSD and writes BSND."""
    if num_heads <= 0:
        raise AttentionError(f"num_heads={num_heads} must be positive")
    kv = num_key_value_heads or num_heads  # 0 means as many as the query (documented)
    if layout == "BNSD_BSND":
        return "BNSD", "BSND", kv
    if layout not in ("BSH", "BSND", "BNSD"):
        raise AttentionError(f"input_layout {layout!r} is not implemented (BSH, BSND, BNSD, BNSD_BSND are)")
    return layout, layout, kv


def _bnsd_inputs(query, key, value, layout, num_heads, kv):
    q, k, v = to_bnsd(query, layout, num_heads), to_bnsd(key, layout, kv), to_bnsd(value, layout, kv)
    if q.shape[1] != num_heads or k.shape[1] != kv:
        raise AttentionError(f"the tensors have {q.shape[1]} query / {k.shape[1]} key heads, "
                             f"num_heads={num_heads}, key/value heads={kv}")
    return q, k, v


def prompt_attention(query, key, value, atten_mask, *, num_heads, scale_value, pre_tokens, next_tokens, input_layout,
                     num_key_value_heads, sparse_mode):
    """PromptFlashAttention: softmax(scale * q k^T, masked) v in the query dtype (key/value S of 0:
    zeros, documented)."""
    in_layout, out_layout, kv = _heads_and_layouts(input_layout, num_heads, num_key_value_heads)
    q, k, v = _bnsd_inputs(query, key, value, in_layout, num_heads, kv)
    if k.shape[2] == 0:
        out = q.new_zeros(*q.shape[:3], v.shape[3], dtype=torch.float32)
    else:
        masked = sparse_mask(atten_mask, sparse_mode, pre_tokens, next_tokens, q.shape[2], k.shape[2],
                             INFER_MASK_DTYPES)
        out = attention(q, k, v, scale_value, masked)[0]
    return from_bnsd(out, out_layout).to(query.dtype).contiguous()


def incre_attention(query, key, value, atten_mask, actual_seq_lengths, *, num_heads, scale_value, input_layout,
                    num_key_value_heads):
    """IncreFlashAttention: one query token per batch against the key/value cache; keys at or after
    actual_seq_lengths[b] (one value for all batches, or the first B values) do not take part."""
    in_layout, out_layout, kv = _heads_and_layouts(input_layout, num_heads, num_key_value_heads)
    if input_layout == "BNSD_BSND":
        raise AttentionError("input_layout 'BNSD_BSND' is not an IncreFlashAttention layout")
    q, k, v = _bnsd_inputs(query, key, value, in_layout, num_heads, kv)
    batch, skv = q.shape[0], k.shape[2]
    masked = None
    if atten_mask is not None:
        if atten_mask.dtype not in INFER_MASK_DTYPES:
            raise AttentionError(f"atten_mask must be bool, int8 or uint8, got {atten_mask.dtype}")
        given = atten_mask != 0
        if given.dim() == 2:      # (B, Skv)
            given = given[:, None, None, :]
        elif given.dim() == 3:    # (B, 1, Skv)
            given = given[:, None]
        if given.dim() != 4 or given.shape[-1] != skv:
            raise AttentionError(f"atten_mask of shape {tuple(atten_mask.shape)} does not end in Skv={skv}")
        masked = given
    if actual_seq_lengths is not None:
        lengths = list(actual_seq_lengths)
        if len(lengths) == 1:
            lengths = lengths * batch
        if len(lengths) < batch or any(not 0 <= n <= skv for n in lengths[:batch]):
            raise AttentionError(f"actual_seq_lengths {lengths} must give 0..{skv} for each of {batch} batches")
        beyond = torch.arange(skv)[None, :] >= torch.tensor(lengths[:batch])[:, None]
        beyond = beyond[:, None, None, :]
        masked = beyond if masked is None else masked | beyond
    out = attention(q, k, v, scale_value, masked)[0]
    return from_bnsd(out, out_layout).to(query.dtype).contiguous()


def _refuse_given(given, why):
    for name, tensor in given:
        if tensor is not None:
            refuse(f"{name} is not implemented on the simulator ({why})")


_INFER_TYPES = (torch.float16, torch.bfloat16, torch.float32)


@ge_kernel("PromptFlashAttention", accepts={"query": _INFER_TYPES, "key": _INFER_TYPES, "value": _INFER_TYPES})
def prompt_flash_attention(query, key, value, pse_shift, atten_mask, actual_seq_lengths, actual_seq_lengths_kv,
                           deq_scale1, quant_scale1, deq_scale2, quant_scale2, quant_offset2, *, num_heads,
                           scale_value, pre_tokens, next_tokens, input_layout, num_key_value_heads, sparse_mode,
                           inner_precise):
    _refuse_given((("deq_scale1", deq_scale1), ("quant_scale1", quant_scale1), ("deq_scale2", deq_scale2),
                   ("quant_scale2", quant_scale2), ("quant_offset2", quant_offset2)), "quantization")
    _refuse_given((("pse_shift", pse_shift),), "position shift")
    _refuse_given((("actual_seq_lengths", actual_seq_lengths), ("actual_seq_lengths_kv", actual_seq_lengths_kv)),
                  "variable lengths")
    if inner_precise not in (0, 1, 2, 3):
        refuse(f"inner_precise={inner_precise} is not a CANN value (0-3)")
    try:
        return prompt_attention(
            query, key, value, atten_mask, num_heads=num_heads, scale_value=scale_value, pre_tokens=pre_tokens,
            next_tokens=next_tokens, input_layout=input_layout, num_key_value_heads=num_key_value_heads,
            sparse_mode=sparse_mode)
    except AttentionError as error:
        refuse(str(error))


@ge_kernel("IncreFlashAttention")
def incre_flash_attention(query, key, value, pse_shift, atten_mask, actual_seq_lengths, dequant_scale1, quant_scale1,
                          dequant_scale2, quant_scale2, quant_offset2, antiquant_scale, antiquant_offset, block_table,
                          kv_padding_size, *, num_heads, scale_value, input_layout, num_key_value_heads, block_size,
                          inner_precise):
    """key and value are GE lists (DYNAMIC_INPUT): one tensor each is implemented."""
    if len(key) != 1 or len(value) != 1:
        refuse(f"{len(key)} key / {len(value)} value tensors: only one of each (no key/value list) is implemented")
    for name, tensor in (("query", query), ("key", key[0]), ("value", value[0])):
        require_dtype(name, tensor, _INFER_TYPES)
    _refuse_given((("dequant_scale1", dequant_scale1), ("quant_scale1", quant_scale1),
                   ("dequant_scale2", dequant_scale2), ("quant_scale2", quant_scale2),
                   ("quant_offset2", quant_offset2), ("antiquant_scale", antiquant_scale),
                   ("antiquant_offset", antiquant_offset)), "quantization")
    _refuse_given((("pse_shift", pse_shift),), "position shift")
    _refuse_given((("block_table", block_table), ("kv_padding_size", kv_padding_size)),
                  "paged / left-padded key-value cache")
    if block_size:
        refuse(f"block_size={block_size} (paged attention) is not implemented on the simulator")
    if inner_precise not in (0, 1):
        refuse(f"inner_precise={inner_precise} is not a CANN value (0, 1)")
    try:
        return incre_attention(
            query, key[0], value[0], atten_mask, None if actual_seq_lengths is None else int_list(actual_seq_lengths),
            num_heads=num_heads, scale_value=scale_value, input_layout=input_layout,
            num_key_value_heads=num_key_value_heads)
    except AttentionError as error:
        refuse(str(error))

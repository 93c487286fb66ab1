"""Fused attention GE ops: FlashAttentionScore (forward), PromptFlashAttention, IncreFlashAttention.

Written from CANN's definitions (ops-transformer FlashAttentionScore; torch_npu's
``npu_fusion_attention`` documentation in the wheel's ``_op_plugin_docs.py``):

    attention_out = softmax(mask(scale * query @ key^T, atten_mask)) @ value

computed per head in float32 and rounded once to the query dtype (query, key and value: one of float16,
bfloat16, float32, as torch_npu documents). Query heads N and key/value
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

PromptFlashAttention, IncreFlashAttention and FusedInferAttentionScore use `attention` and `band`
through ``infer_attention.py`` (per-batch lengths, PagedAttention) and its kernels.

FlashAttentionScoreGrad: the backward of FlashAttentionScore (``npu_fusion_attention_grad``).

From CANN's definition (ops-transformer ``aclnnFlashAttentionScoreGrad.md``): with
S = mask(scale * Q K^T), P = softmax(S) and Y = P V,

    dV = P^T dY,   dS = P * (dY V^T - rowsum(dY * Y)),   dQ = scale * dS K,   dK = scale * dS^T Q

computed in float32 and rounded once to the query dtype. P is rebuilt, as CANN does, from the
forward's row statistics ``softmax_max`` / ``softmax_sum`` ([B, N, Sq, 8], each row value repeated)
and Y is the forward's output ``attention_in``: all three are required here (the simulator does not
recompute them). GQA: a key/value head's gradient sums those of the query heads sharing it. Layouts,
masks and sparse_mode 0-4 as FlashAttentionScore (above).

Refused naming the node: dropout (keep_prob < 1, drop_mask), pse_shift, padding_mask, prefix,
variable lengths (actual_seq_qlen/kvlen), non-zero q/kv_start_idx, fully masked rows. dpse is
an empty tensor (no pse).
"""
from __future__ import annotations

import torch
from ...registry import ge_kernel, refuse
from ..common import int_list, opmath

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


# torch_npu's npu_fusion_attention doc (the wheel's _op_plugin_docs.py): query/key/value "float16, bfloat16, float32"
_HALF_TYPES = (torch.float16, torch.bfloat16, torch.float32)


def refuse_unsimulated_inputs(pse: tuple[str, object], drop_mask, padding_mask, prefix, actual_seq_qlen,
                              actual_seq_kvlen, q_start_idx, kv_start_idx, keep_prob, inner_precise) -> None:
    """The inputs and attrs of FlashAttentionScore (and its Grad) the simulator does not compute: refused
    by name. `pse`: (its name on the node type, the input)."""
    refused = (pse, ("drop_mask (dropout)", drop_mask), ("padding_mask", padding_mask), ("prefix", prefix),
               ("actual_seq_qlen", actual_seq_qlen), ("actual_seq_kvlen", actual_seq_kvlen))
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


@ge_kernel("FlashAttentionScore", one_dtype=("query", "key", "value"),
           accepts={"query": _HALF_TYPES, "key": _HALF_TYPES, "value": _HALF_TYPES})
def flash_attention_score(query, key, value, real_shift, drop_mask, padding_mask, atten_mask, prefix,
                          actual_seq_qlen, actual_seq_kvlen, q_start_idx, kv_start_idx, *, scale_value, keep_prob,
                          pre_tockens, next_tockens, head_num, input_layout, inner_precise, sparse_mode):
    refuse_unsimulated_inputs(("real_shift (pse)", real_shift), drop_mask, padding_mask, prefix, actual_seq_qlen,
                              actual_seq_kvlen, q_start_idx, kv_start_idx, keep_prob, inner_precise)
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


def attention_grad(q, k, v, dy, out, row_max, row_sum, scale, masked):
    """float32 gradients (dq, dk, dv) of [B, N, S, D] attention; row_max/row_sum [B, N, Sq]."""
    q, k, v, dy, out = (opmath(t).float() for t in (q, k, v, dy, out))
    heads, kv = q.shape[1], k.shape[1]
    if kv == 0 or heads % kv:
        raise AttentionError(f"{heads} query heads are not a multiple of {kv} key/value heads")
    group = heads // kv
    k_full, v_full = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    scores = torch.matmul(q, k_full.transpose(-1, -2)) * scale
    if masked is not None:
        masked = masked.expand_as(scores)
        if scores.shape[-1] and bool(masked.all(dim=-1).any()):
            raise AttentionError("a query row is masked entirely; its gradient is not defined here")
        scores = scores.masked_fill(masked, float("-inf"))
    probs = torch.exp(scores - row_max.float().unsqueeze(-1)) / row_sum.float().unsqueeze(-1)
    dv_full = torch.matmul(probs.transpose(-1, -2), dy)
    d_probs = torch.matmul(dy, v_full.transpose(-1, -2))
    d_scores = probs * (d_probs - (dy * out).sum(dim=-1, keepdim=True))
    dq = torch.matmul(d_scores, k_full) * scale
    dk_full = torch.matmul(d_scores.transpose(-1, -2), q) * scale

    def per_kv_head(full):
        return full.reshape(full.shape[0], kv, group, *full.shape[2:]).sum(dim=2)

    return dq, per_kv_head(dk_full), per_kv_head(dv_full)


def fusion_attention_grad(query, key, value, dy, atten_mask, softmax_max, softmax_sum, attention_in, *, head_num,
                          input_layout, scale, pre_tokens, next_tokens, sparse_mode):
    """(dq, dk, dv) in the layout and dtype of query/key/value; raises AttentionError."""
    for name, given in (("softmax_max", softmax_max), ("softmax_sum", softmax_sum), ("attention_in", attention_in)):
        if given is None:
            raise AttentionError(f"{name} (from the forward) is required: the simulator does not recompute it")
    q = to_bnsd(query, input_layout, head_num)
    kv = head_num if input_layout in ("BNSD", "BSND") else kv_heads(key.shape[-1], head_num, q.shape[-1])
    k, v = to_bnsd(key, input_layout, kv), to_bnsd(value, input_layout, kv)
    grad_out, out = to_bnsd(dy, input_layout, head_num), to_bnsd(attention_in, input_layout, head_num)
    expected = (q.shape[0], head_num, q.shape[2], 8)
    for name, stats in (("softmax_max", softmax_max), ("softmax_sum", softmax_sum)):
        if tuple(stats.shape) != expected:
            raise AttentionError(f"{name} has shape {tuple(stats.shape)}, expected {list(expected)} ([B, N, Sq, 8])")
    masked = sparse_mask(atten_mask, sparse_mode, pre_tokens, next_tokens, q.shape[2], k.shape[2])
    dq, dk, dv = attention_grad(q, k, v, grad_out, out, softmax_max[..., 0], softmax_sum[..., 0], scale, masked)
    return tuple(from_bnsd(g, input_layout).to(t.dtype).contiguous()
                 for g, t in ((dq, query), (dk, key), (dv, value)))


@ge_kernel("FlashAttentionScoreGrad", one_dtype=("query", "key", "value", "dy"),
           accepts={"query": _HALF_TYPES, "key": _HALF_TYPES, "value": _HALF_TYPES,
                                               "dy": _HALF_TYPES})
def flash_attention_score_grad(query, key, value, dy, pse_shift, drop_mask, padding_mask, atten_mask, softmax_max,
                               softmax_sum, softmax_in, attention_in, prefix, actual_seq_qlen, actual_seq_kvlen,
                               q_start_idx, kv_start_idx, *, scale_value, keep_prob, pre_tockens, next_tockens,
                               head_num, input_layout, inner_precise, sparse_mode):
    refuse_unsimulated_inputs(("pse_shift", pse_shift), drop_mask, padding_mask, prefix, actual_seq_qlen,
                              actual_seq_kvlen, q_start_idx, kv_start_idx, keep_prob, inner_precise)
    try:
        dq, dk, dv = fusion_attention_grad(
            query, key, value, dy, atten_mask, softmax_max, softmax_sum, attention_in, head_num=head_num,
            input_layout=input_layout, scale=scale_value, pre_tokens=pre_tockens, next_tokens=next_tockens,
            sparse_mode=sparse_mode)
    except AttentionError as error:
        refuse(str(error))
    return dq, dk, dv, query.new_empty([0])

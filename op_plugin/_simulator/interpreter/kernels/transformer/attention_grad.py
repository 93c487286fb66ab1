"""FlashAttentionScoreGrad: the backward of FlashAttentionScore (``npu_fusion_attention_grad``).

From CANN's definition (ops-transformer ``aclnnFlashAttentionScoreGrad.md``): with
S = mask(scale * Q K^T), P = softmax(S) and Y = P V,

    dV = P^T dY,   dS = P * (dY V^T - rowsum(dY * Y)),   dQ = scale * dS K,   dK = scale * dS^T Q

computed in float32 and rounded once to the query dtype. P is rebuilt, as CANN does, from the
forward's row statistics ``softmax_max`` / ``softmax_sum`` ([B, N, Sq, 8], each row value repeated)
and Y is the forward's output ``attention_in``: all three are required here (the simulator does not
recompute them). GQA: a key/value head's gradient sums those of the query heads sharing it. Layouts,
masks and sparse_mode 0-4 as FlashAttentionScore (``attention.py``).

Refused naming the node: dropout (keep_prob < 1, drop_mask), pse_shift, padding_mask, prefix,
variable lengths (actual_seq_qlen/kvlen), non-zero q/kv_start_idx, fully masked rows. dpse is
an empty tensor (no pse).
"""
from __future__ import annotations

import torch

from ...registry import ge_kernel, refuse
from ..common import opmath
from .attention import AttentionError, from_bnsd, kv_heads, refuse_unsimulated_inputs, sparse_mask, to_bnsd


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


_HALF_TYPES = (torch.float16, torch.bfloat16)


@ge_kernel("FlashAttentionScoreGrad", accepts={"query": _HALF_TYPES, "key": _HALF_TYPES, "value": _HALF_TYPES,
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

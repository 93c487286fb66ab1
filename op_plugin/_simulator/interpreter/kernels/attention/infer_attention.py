"""Inference attention as CANN's FusedInferAttentionScore defines it, shared by the GE kernels of
FusedInferAttentionScore, PromptFlashAttention and IncreFlashAttention (below), which torch_npu's
eager ops of the same names call through ``ge_op`` (``npu/attention.py``: argument mapping only).

Sources: ops-transformer ``aclnnFusedInferAttentionScoreV4.md`` / ``aclnnPromptFlashAttentionV3.md`` /
``aclnnIncreFlashAttentionV4.md`` and torch_npu's ``_op_plugin_docs.py``. Per batch b:

    out[b] = softmax(mask(scale * q_b @ k_b^T)) @ v_b,   lse[b] = rowmax + log(rowsum)

in float32, rounded once to the query dtype. q_b holds the first actual_seq_lengths[b] query rows
(the prompt branch; the decode branch, Q_S == 1, ignores them as documented), k_b / v_b the first
actual_seq_lengths_kv[b] key positions: read from the tensor (right padding), or, with
``block_table`` (PagedAttention), position p of batch b from block ``block_table[b, p // block_size]``
row ``p % block_size`` of the cache, laid out (blocknum, blocksize, H) or (blocknum, KV_N,
blocksize, D). GQA: query head h reads key/value head h // (N / KV_N). Layouts BSH, BSND, BNSD,
BNSD_BSND (read BNSD, write BSND) and TND (rows of batch b are actual_seq_lengths[b-1]..[b],
cumulative, as documented). MLA's query_rope / key_rope extend q and k along D (their scores add).

Masks (True / non-zero = masked). Decode branch: atten_mask (B, KV_S), (B, 1, KV_S) or
(B, 1, 1, KV_S), sparse_mode and pre/next_tokens ignored (documented). Prompt branch: sparse_mode
0 (atten_mask | the band -pre_tokens <= j - i <= next_tokens from the top-left corner; no mask:
nothing masked), 1 (atten_mask), 2/3 (causal from the top-left / bottom-right corner), 4 (the
band from the bottom-right corner), with the compressed 2048x2048 mask for 2-4; "bottom-right" is
per batch, at (actual q length, actual kv length), as CANN's interception rules state. A mask
larger than (Q_S, KV_S) is read from its top-left corner (CANN allows padding it to alignment).

Chosen where CANN is silent (docs/torch-npu-ops.md says so): query rows past actual_seq_lengths[b]
are written as 0 with softmax_lse +inf (CANN: "inf marks invalid data"); a key/value tensor with
S = 0 gives zeros (documented). Refused: key/value of another dtype than the query, an empty head
dim, a row whose keys are all masked (also actual kv length 0), TND with a sparse_mode 0/1 mask, the
NZ (5-d) cache.

GE kernels of the inference attentions: PromptFlashAttention, IncreFlashAttention and
FusedInferAttentionScore, computed by ``infer_attention`` above (CANN's definition; see its doc).

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
from .flash_attention import AttentionError, attention, band, from_bnsd, to_bnsd
from ...registry import ge_kernel, refuse
from ..common import int_list, require_dtype

MASK_DTYPES = (torch.bool, torch.int8, torch.uint8)
_COMPRESSED = 2048
_LAYOUTS = {"BSH": ("BSH", "BSH"), "BSND": ("BSND", "BSND"), "BNSD": ("BNSD", "BNSD"),
            "BNSD_BSND": ("BNSD", "BSND"), "TND": ("TND", "TND")}


def _per_batch(lengths, batch, what, limit):
    """actual_seq_lengths(_kv) as one length per batch: one value for all, or the first `batch`."""
    values = [int(v) for v in lengths]
    if len(values) == 1:
        values = values * batch
    if len(values) < batch:
        raise AttentionError(f"{what} has {len(values)} values for {batch} batches (1 or at least B are taken)")
    values = values[:batch]
    if any(not 0 <= v <= limit for v in values):
        raise AttentionError(f"{what} {values} must lie in 0..{limit}")
    return values


def _cumulative(lengths, what, total):
    """TND: cumulative ends -> (start, end) per batch."""
    if lengths is None:
        raise AttentionError(f"input_layout 'TND' needs {what} (cumulative lengths, documented)")
    ends = [int(v) for v in lengths]
    starts = [0] + ends[:-1]
    if any(e < s for s, e in zip(starts, ends, strict=True)) or (ends and ends[-1] > total):
        raise AttentionError(f"{what} {ends} must be non-decreasing cumulative lengths up to {total}")
    return list(zip(starts, ends, strict=True))


def _split(x, layout, heads, spans, what):
    """Per-batch [heads, rows, D] slices of a query/key/value; spans: (batch, length) or (start, end)."""
    if layout == "TND":
        if x.dim() != 3 or x.shape[1] != heads:
            raise AttentionError(f"TND {what} of shape {tuple(x.shape)} does not have {heads} heads in dim 1")
        return [x[start:end].transpose(0, 1) for start, end in spans]
    if x.dim() != (3 if layout == "BSH" else 4):
        raise AttentionError(f"{what} of shape {tuple(x.shape)} is not {layout}")
    bnsd = to_bnsd(x, layout, heads)
    if bnsd.shape[1] != heads:
        raise AttentionError(f"{what} has {bnsd.shape[1]} heads in layout {layout}, expected {heads}")
    return [bnsd[b, :, :length] for b, length in spans]


def _paged(cache, block_table, block_size, lengths, kv_heads, query_layout, what):
    """Per-batch [KV_N, length, D] key/value gathered block by block from a PagedAttention cache."""
    if block_size <= 0:
        raise AttentionError(f"block_table needs a positive block_size, got {block_size}")
    if block_table.dtype != torch.int32 or block_table.dim() != 2:
        raise AttentionError(f"block_table must be a 2-d int32 tensor, got {block_table.dtype} "
                             f"of shape {tuple(block_table.shape)}")
    if cache.dim() == 3:    # (blocknum, blocksize, H)
        if cache.shape[2] % kv_heads:
            raise AttentionError(f"{what} cache width {cache.shape[2]} is not a multiple of {kv_heads} heads")
        blocks = cache.reshape(cache.shape[0], cache.shape[1], kv_heads, cache.shape[2] // kv_heads)
    elif cache.dim() == 4:  # (blocknum, KV_N, blocksize, D): documented for query layouts BNSD and TND
        if query_layout not in ("BNSD", "TND"):
            raise AttentionError(f"a (blocknum, KV_N, blocksize, D) {what} cache takes query layout BNSD or TND, "
                                 f"not {query_layout} (documented)")
        if cache.shape[1] != kv_heads:
            raise AttentionError(f"{what} cache has {cache.shape[1]} heads, expected {kv_heads}")
        blocks = cache.permute(0, 2, 1, 3)
    else:
        raise AttentionError(f"a {cache.dim()}-d {what} cache (NZ layout) is not implemented; "
                             "(blocknum, blocksize, H) and (blocknum, KV_N, blocksize, D) are")
    if blocks.shape[1] != block_size:
        raise AttentionError(f"{what} cache blocks hold {blocks.shape[1]} rows, block_size={block_size}")
    if block_table.shape[0] != len(lengths):
        raise AttentionError(f"block_table has {block_table.shape[0]} rows for {len(lengths)} batches")
    out = []
    for b, length in enumerate(lengths):
        count = -(-length // block_size)
        if count > block_table.shape[1]:
            raise AttentionError(f"batch {b} needs {count} blocks for {length} positions; block_table has "
                                 f"{block_table.shape[1]} per batch")
        ids = block_table[b, :count].long()
        if count and (int(ids.min()) < 0 or int(ids.max()) >= blocks.shape[0]):
            raise AttentionError(f"block_table row {b} names blocks {ids.tolist()} outside 0..{blocks.shape[0] - 1}")
        out.append(blocks[ids].reshape(count * block_size, kv_heads, -1)[:length].transpose(0, 1))
    return out


def _mask4(atten_mask, decode):
    """atten_mask as bool [B or 1, N or 1, rows, cols]."""
    if atten_mask.dtype not in MASK_DTYPES:
        raise AttentionError(f"atten_mask must be bool, int8 or uint8, got {atten_mask.dtype}")
    given = atten_mask != 0
    if given.dim() == 2:
        return given[:, None, None, :] if decode else given[None, None]
    if given.dim() == 3:
        return given[:, None] if not decode or given.shape[1] != 1 else given[:, :, None]
    if given.dim() == 4:
        return given
    raise AttentionError(f"atten_mask of shape {tuple(atten_mask.shape)} has {given.dim()} dims (2-4 are taken)")


def _check_compressed(atten_mask, sparse_mode):
    expected = torch.ones(_COMPRESSED, _COMPRESSED, dtype=torch.bool).triu(1)
    given = None if atten_mask is None else (atten_mask != 0).reshape(-1, *atten_mask.shape[-2:])
    if given is None or given.shape != (1, _COMPRESSED, _COMPRESSED) or not torch.equal(given[0], expected):
        raise AttentionError(f"sparse_mode {sparse_mode} takes the compressed {_COMPRESSED}x{_COMPRESSED} "
                             "upper-triangular atten_mask (shape (2048, 2048), (1, 2048, 2048) or (1, 1, 2048, 2048))")


def _batch_mask(mask4, b, rows, cols, *, decode, sparse_mode, pre_tokens, next_tokens):
    """The bool mask [N or 1, rows, cols] of batch b, or None."""
    if not decode and sparse_mode in (2, 3, 4):
        if sparse_mode == 4:
            return band(rows, cols, pre_tokens, next_tokens, bottom_right=True)[None]
        return band(rows, cols, rows + cols, 0, bottom_right=sparse_mode == 3)[None]
    if mask4 is None:
        return None
    mine = mask4[b if mask4.shape[0] > 1 else 0]
    if mine.shape[-2] < rows or mine.shape[-1] < cols:
        raise AttentionError(f"atten_mask of shape {tuple(mask4.shape)} is smaller than batch {b}'s "
                             f"{rows} query rows x {cols} key positions")
    mine = mine[:, :rows, :cols]
    if not decode and sparse_mode == 0:
        mine = mine | band(rows, cols, pre_tokens, next_tokens, bottom_right=False)
    return mine


def infer_attention(query, key, value, atten_mask=None, *, actual_q=None, actual_kv=None, block_table=None,
                    block_size=0, num_heads, num_key_value_heads=0, scale, pre_tokens=2147483647,
                    next_tokens=2147483647, input_layout="BSH", sparse_mode=0, decode=False, query_rope=None,
                    key_rope=None, lse_flag=False):
    """(attention_out, softmax_lse); softmax_lse is [B, N, Q_S, 1] ([T, N, 1] for TND) float32, or an
    empty [0] tensor without lse_flag (what the wheel's Meta gives). Raises AttentionError."""
    for name, tensor in (("key", key), ("value", value)):
        if tensor.dtype != query.dtype:
            raise AttentionError(f"{name} has dtype {tensor.dtype}, query {query.dtype}: without quantization they "
                                 "are one (int8 quantization is not implemented)")
        if tensor.dim() and tensor.shape[-1] == 0 and query.numel():
            raise AttentionError(f"{name} {tuple(tensor.shape)} has an empty last dim (no head dim) while query "
                                 f"{tuple(query.shape)} is not empty")
    if num_heads <= 0:
        raise AttentionError(f"num_heads={num_heads} must be positive")
    kv_heads = num_key_value_heads or num_heads  # 0: as many as the query (documented)
    if kv_heads <= 0 or num_heads % kv_heads:
        raise AttentionError(f"num_heads={num_heads} is not a multiple of num_key_value_heads={kv_heads}")
    if input_layout not in _LAYOUTS:
        raise AttentionError(f"input_layout {input_layout!r} is not implemented ({', '.join(_LAYOUTS)} are)")
    if decode and input_layout == "BNSD_BSND":
        raise AttentionError("input_layout 'BNSD_BSND' takes Q_S > 1 only (documented)")
    if (query_rope is None) != (key_rope is None):
        raise AttentionError("query_rope and key_rope are given together or not at all (documented)")
    if not decode and sparse_mode not in (0, 1, 2, 3, 4):
        raise AttentionError(f"sparse_mode {sparse_mode} is not implemented (0-4 are)")
    in_layout, out_layout = _LAYOUTS[input_layout]
    tnd = in_layout == "TND"
    if tnd:
        q_spans = _cumulative(actual_q, "actual_seq_lengths", query.shape[0])
        batch = len(q_spans)
    else:
        q_bnsd = to_bnsd(query, in_layout, num_heads)
        batch, q_s = q_bnsd.shape[0], q_bnsd.shape[2]
        q_lens = [q_s] * batch if decode or actual_q is None else _per_batch(actual_q, batch, "actual_seq_lengths",
                                                                               q_s)
        q_spans = list(enumerate(q_lens))
    if block_table is not None:
        if actual_kv is None:
            raise AttentionError("block_table (PagedAttention) needs actual_seq_lengths_kv (documented)")
        kv_lens = _per_batch(actual_kv, batch, "actual_seq_lengths_kv", block_table.shape[-1] * max(block_size, 1))
        keys = _paged(key, block_table, block_size, kv_lens, kv_heads, in_layout, "key")
        values = _paged(value, block_table, block_size, kv_lens, kv_heads, in_layout, "value")
        ropes = None if key_rope is None else _paged(key_rope, block_table, block_size, kv_lens, kv_heads, in_layout,
                                                     "key_rope")
        kv_s = block_table.shape[1] * block_size
    else:
        if tnd:
            kv_spans = _cumulative(actual_kv, "actual_seq_lengths_kv", key.shape[0])
            if len(kv_spans) != batch:
                raise AttentionError(f"actual_seq_lengths_kv has {len(kv_spans)} batches, the query {batch}")
            kv_s = max((end - start for start, end in kv_spans), default=0)
        else:
            kv_bnsd = to_bnsd(key, in_layout, kv_heads)
            if kv_bnsd.shape[0] != batch:
                raise AttentionError(f"key has batch {kv_bnsd.shape[0]}, the query {batch}")
            kv_s = kv_bnsd.shape[2]
            kv_lens = [kv_s] * batch if actual_kv is None else _per_batch(actual_kv, batch, "actual_seq_lengths_kv",
                                                                            kv_s)
            kv_spans = list(enumerate(kv_lens))
        keys = _split(key, in_layout, kv_heads, kv_spans, "key")
        values = _split(value, in_layout, kv_heads, kv_spans, "value")
        ropes = None if key_rope is None else _split(key_rope, in_layout, kv_heads, kv_spans, "key_rope")
    queries = _split(query, in_layout, num_heads, q_spans, "query")
    if query_rope is not None:
        extra = _split(query_rope, in_layout, num_heads, q_spans, "query_rope")
        queries = [torch.cat([q, r], dim=-1) for q, r in zip(queries, extra, strict=True)]
        keys = [torch.cat([k, r], dim=-1) for k, r in zip(keys, ropes, strict=True)]
    if tnd and atten_mask is not None and sparse_mode in (0, 1):
        raise AttentionError("TND with a sparse_mode 0/1 atten_mask is not implemented (documented: TND takes "
                             "sparse_mode 0 without a mask, 3 or 4)")
    if not decode and sparse_mode in (2, 3, 4):
        _check_compressed(atten_mask, sparse_mode)
    mask4 = None if atten_mask is None or (not decode and sparse_mode in (2, 3, 4)) else _mask4(atten_mask, decode)
    value_d = values[0].shape[-1] if values else 0
    if tnd:
        out = query.new_zeros(query.shape[0], num_heads, value_d, dtype=torch.float32)
        lse = torch.full((query.shape[0], num_heads, 1), float("inf"))
    else:
        out = query.new_zeros(batch, num_heads, q_s, value_d, dtype=torch.float32)
        lse = torch.full((batch, num_heads, q_s, 1), float("inf"))
    for b, (q, k, v) in enumerate(zip(queries, keys, values, strict=True)):
        rows, cols = q.shape[1], k.shape[1]
        if rows == 0 or kv_s == 0:
            continue  # no query row, or an empty key/value tensor: zeros (documented)
        if cols == 0:
            raise AttentionError(f"every query row of batch {b} is masked entirely (actual key/value length 0); "
                                 "its result is not defined here")
        if q.shape[-1] != k.shape[-1]:
            raise AttentionError(f"query head dim {q.shape[-1]} differs from the key's {k.shape[-1]}")
        masked = _batch_mask(mask4, b, rows, cols, decode=decode, sparse_mode=sparse_mode, pre_tokens=pre_tokens,
                             next_tokens=next_tokens)
        o, row_max, row_sum = attention(q[None], k[None], v[None], scale, None if masked is None else masked[None])
        if tnd:
            start = q_spans[b][0]
            out[start:start + rows] = o[0].transpose(0, 1)
            lse[start:start + rows] = (row_max + row_sum.log())[0].transpose(0, 1).unsqueeze(-1)
        else:
            out[b, :, :rows] = o[0]
            lse[b, :, :rows] = (row_max + row_sum.log())[0].unsqueeze(-1)
    result = out if tnd else from_bnsd(out, out_layout)
    lse = lse if lse_flag else torch.empty([0], dtype=torch.float32)
    return result.to(query.dtype).contiguous(), lse

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

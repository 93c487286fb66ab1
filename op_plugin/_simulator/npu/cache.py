"""CPU reference kernels of torch_npu's KV-cache ops: paged-cache writes and the fused RMS norm + rope
+ cache write (CPU dispatch key). Semantics from CANN's operator docs (ops-transformer
``attention/scatter_pa_kv_cache``, ``posembedding/kv_rms_norm_rope_cache``) and torch_npu's docs.

* ``npu_scatter_pa_kv_cache(key, value, key_cache, value_cache, slot_mapping, cache_mode)`` (in place;
  ``_functional``: new caches): token ``t`` goes to slot ``s = slot_mapping[t]``, i.e. block
  ``s // block_size``, row ``s % block_size``. ``cache_mode="Norm"`` (CANN scenario 2): cache
  ``[blocks, block_size, heads, head_size]``, ``cache[b, r] = key[t]``. ``"PA_NZ"`` (scenario 1): cache
  ``[blocks, heads * head_size // L, block_size, L]`` or ``[blocks, heads, head_size // L, block_size, L]``
  with ``L = 32 / itemsize``, the token's ``heads * head_size`` values split in rows of ``L``
  (on an NPU this tensor carries the FRACTAL_NZ format; its logical values are the same on a CPU host).
  Refused: the compressed scenarios (4-D key, ``compress_lens``/``seq_lens``/``compress_seq_offsets``:
  CANN documents their shapes, not which token lands where), slots outside ``[0, blocks * block_size)``
  and a slot given twice (CANN: "not guaranteed correct").
* ``npu_kv_rmsnorm_rope_cache(kv, gamma, cos, sin, index, k_cache, ckv_cache, ...)``: kv ``[B, N, S, D]``
  splits into ``Dv = gamma.numel()`` and ``Dk = D - Dv``; ``c_kv = rms_norm(kv[..., :Dv]) * gamma`` and
  ``k_rope = x_part1 * cos + x_part2 * sin`` with ``x = kv[..., Dv:]``, ``x_part1 = cat(x[::2], x[1::2])``,
  ``x_part2 = cat(-x[1::2], x[::2])`` (float32, rounded to kv's dtype); then each token ``(b, s)`` is written
  to the caches: ``Norm``: index ``[B, S]``, cache ``[Bc, N, Sc, .]``, ``cache[b, :, index[b, s]]``;
  ``PA``/``PA_BNSD``/``PA_NZ``: index ``[B * S]``, cache ``[blocks, block_size, N, .]``, slot
  ``index[b * S + s]``. An index of -1 skips the token. Refused: N != 1 (CANN supports only N = 1),
  ``PA_BLK_*`` (where a token lands inside the block its index names is not documented), quantised caches
  (int8 caches, scales/offsets, the v2 ``*_cache_dtype`` formats: no quantisation formula is documented)
  and the optional ``v`` (undocumented). k_rope and c_kv are returned whatever ``is_output_kv`` says (on
  an NPU they are only written when it is True). The v1 op updates the caches in place (as on an NPU,
  though its schema declares no mutation) and returns copies of them; v2 is declared in place;
  ``_v2_functional`` returns new caches.
"""
from __future__ import annotations

import torch

from ..._base.numerics import opmath

_FLOAT16S = (torch.float16, torch.bfloat16)


def _check_slots(op, what, slots, count, capacity, skip=None):
    """Slots as a long vector; outside [0, capacity) (other than `skip`) or repeated is refused."""
    if slots.dtype not in (torch.int32, torch.int64):
        raise TypeError(f"npu::{op}: {what} has dtype {slots.dtype}; it takes int32 or int64")
    flat = slots.reshape(-1).long()
    if flat.numel() != count:
        raise ValueError(f"npu::{op}: {what} has {flat.numel()} entries for {count} tokens")
    used = flat[flat != skip] if skip is not None else flat
    if bool(((used < 0) | (used >= capacity)).any()):
        low = "-1 or " if skip is not None else ""
        raise IndexError(f"npu::{op}: a {what} value is outside {low}[0, {capacity})")
    if torch.unique(used).numel() != used.numel():
        raise ValueError(f"npu::{op}: a {what} value appears twice; CANN does not define which write wins")
    return flat


def _pa_write(op, name, cache, tokens, slots, cache_mode):
    """cache (a copy) with token t written to slot slots[t] (ScatterPaKvCache scenarios 1 and 2)."""
    out = cache.clone()
    if tokens.numel() == 0 and cache.numel() == 0:  # scenario 6: no value / value cache
        return out
    if tokens.dim() != 3 or tokens.dtype != cache.dtype:
        raise ValueError(f"npu::{op}: {name} must be 3-D [tokens, heads, head_size] with the dtype of its cache "
                         f"(got {tuple(tokens.shape)} {tokens.dtype}, cache {cache.dtype})")
    count, heads, size = tokens.shape
    if cache_mode in (None, "Norm"):
        if cache.dim() != 4 or tuple(cache.shape[2:]) != (heads, size):
            raise ValueError(f"npu::{op}: cache_mode 'Norm' takes a {name} cache [blocks, block_size, {heads}, "
                             f"{size}], got {tuple(cache.shape)}")
        block_size = cache.shape[1]
        flat = _check_slots(op, "slot_mapping", slots, count, cache.shape[0] * block_size)
        out[flat // block_size, flat % block_size] = tokens
        return out
    if cache_mode != "PA_NZ":
        raise ValueError(f"npu::{op}: cache_mode {cache_mode!r} is not 'Norm' or 'PA_NZ'")
    row = 32 // tokens.element_size()
    nz4 = (heads * size // row, row)
    nz5 = (heads, size // row, row)
    if size % row or not (cache.dim() == 4 and (cache.shape[1], cache.shape[3]) == nz4
                          or cache.dim() == 5 and (cache.shape[1], cache.shape[2], cache.shape[4]) == nz5):
        raise ValueError(f"npu::{op}: cache_mode 'PA_NZ' takes a {name} cache [blocks, {nz4[0]}, block_size, {row}] "
                         f"or [blocks, {heads}, {size // row}, block_size, {row}] (head_size a multiple of {row}), "
                         f"got {tuple(cache.shape)}")
    block_size = cache.shape[-2]
    flat = _check_slots(op, "slot_mapping", slots, count, cache.shape[0] * block_size)
    blocks, rows = flat // block_size, flat % block_size
    if cache.dim() == 4:
        out[blocks, :, rows, :] = tokens.reshape(count, *nz4)
    else:
        out[blocks, :, :, rows, :] = tokens.reshape(count, *nz5)
    return out


def _scatter_pa(op, key, value, key_cache, value_cache, slot_mapping, compress_lens, compress_seq_offsets,
                seq_lens, cache_mode):
    if key.dim() == 4 or any(t is not None for t in (compress_lens, compress_seq_offsets, seq_lens)):
        raise NotImplementedError(f"npu::{op}: the compressed scenarios (4-D key, compress_lens, seq_lens, "
                                  "compress_seq_offsets) are not simulated: CANN documents their shapes, not "
                                  "which token lands where")
    if value.numel() and tuple(value.shape[:2]) != tuple(key.shape[:2]):
        raise ValueError(f"npu::{op}: key and value must share [tokens, heads]; got {tuple(key.shape)}, "
                         f"{tuple(value.shape)}")
    return (_pa_write(op, "key", key_cache, key, slot_mapping, cache_mode),
            _pa_write(op, "value", value_cache, value, slot_mapping, cache_mode))


def npu_scatter_pa_kv_cache_functional(key, value, key_cache, value_cache, slot_mapping, *, compress_lens=None,
                                       compress_seq_offsets=None, seq_lens=None, cache_mode="PA_NZ"):
    return _scatter_pa("npu_scatter_pa_kv_cache_functional", key, value, key_cache, value_cache, slot_mapping,
                       compress_lens, compress_seq_offsets, seq_lens, cache_mode)


def npu_scatter_pa_kv_cache(key, value, key_cache, value_cache, slot_mapping, *, compress_lens=None,
                            compress_seq_offsets=None, seq_lens=None, cache_mode="PA_NZ"):
    new_key, new_value = _scatter_pa("npu_scatter_pa_kv_cache", key, value, key_cache, value_cache, slot_mapping,
                                     compress_lens, compress_seq_offsets, seq_lens, cache_mode)
    key_cache.copy_(new_key)
    value_cache.copy_(new_value)


_PA_MODES = ("PA", "PA_BNSD", "PA_NZ")


def _kv_rmsnorm_rope(op, kv, gamma, cos, sin, index, k_cache, ckv_cache, scales, v, epsilon, cache_mode):
    """(new k_cache, new ckv_cache, k_rope, c_kv)."""
    if any(t is not None for t in scales) or k_cache.dtype not in _FLOAT16S + (torch.float32,) \
            or ckv_cache.dtype not in _FLOAT16S + (torch.float32,):
        raise NotImplementedError(f"npu::{op}: quantised caches (int8/fp8 caches, scales, offsets) are not simulated: "
                                  "CANN's docs give no quantisation formula for this op")
    if v is not None:
        raise NotImplementedError(f"npu::{op}: the optional v input is not simulated (undocumented by CANN)")
    if cache_mode not in ("Norm",) + _PA_MODES:
        raise NotImplementedError(f"npu::{op}: cache_mode {cache_mode!r} is not simulated (Norm, PA, PA_BNSD, PA_NZ "
                                  "are; PA_BLK_*: where a token lands inside its block is not documented)")
    if kv.dim() != 4 or gamma.dim() != 1 or cos.dim() != 4 or sin.shape != cos.shape:
        raise ValueError(f"npu::{op}: kv [B, N, S, D], gamma [Dv], cos and sin [B, 1, S or 1, Dk] expected")
    batch, heads, seq, width = kv.shape
    dv = gamma.shape[0]
    dk = width - dv
    if heads != 1 or dk <= 0 or dk % 2 or cos.shape[-1] != dk:
        raise ValueError(f"npu::{op}: N must be 1 (CANN supports only N = 1) and D = Dv + Dk with an even "
                         f"Dk = cos.shape[-1]; got kv {tuple(kv.shape)}, gamma {dv}, cos {tuple(cos.shape)}")
    if not kv.dtype == gamma.dtype == cos.dtype == sin.dtype == k_cache.dtype == ckv_cache.dtype:
        raise TypeError(f"npu::{op}: kv, gamma, cos, sin and the caches must have one dtype")
    wide = opmath(kv).float()
    norm_part, rope_part = wide[..., :dv], wide[..., dv:]
    rstd = torch.rsqrt(norm_part.pow(2).mean(-1, keepdim=True) + epsilon)
    c_kv = (norm_part * rstd * opmath(gamma).float()).to(kv.dtype)
    evens, odds = rope_part[..., ::2], rope_part[..., 1::2]
    k_rope = (torch.cat((evens, odds), -1) * opmath(cos).float()
              + torch.cat((-odds, evens), -1) * opmath(sin).float()).to(kv.dtype)
    k_out, ckv_out = k_cache.clone(), ckv_cache.clone()
    for name, cache, rows, last in (("k_cache", k_out, k_rope, dk), ("ckv_cache", ckv_out, c_kv, dv)):
        if cache.dim() != 4 or cache.shape[-1] != last:
            raise ValueError(f"npu::{op}: {name} must be 4-D with a last dim of {last}, got {tuple(cache.shape)}")
        if cache_mode == "Norm":
            if tuple(index.shape) != (batch, seq) or cache.shape[0] < batch or cache.shape[1] != 1:
                raise ValueError(f"npu::{op}: cache_mode 'Norm' takes index [B, S] = [{batch}, {seq}] and a "
                                 f"{name} [Bc >= {batch}, 1, Sc, {last}]; got {tuple(index.shape)}, "
                                 f"{tuple(cache.shape)}")
            for b in range(batch):
                slots = _check_slots(op, "index", index[b], seq, cache.shape[2], skip=-1)
                keep = slots >= 0
                cache[b, 0, slots[keep]] = rows[b, 0][keep]
        else:
            if cache.shape[2] != 1:
                raise ValueError(f"npu::{op}: cache_mode {cache_mode!r} takes a {name} [blocks, block_size, 1, "
                                 f"{last}], got {tuple(cache.shape)}")
            slots = _check_slots(op, "index", index, batch * seq, cache.shape[0] * cache.shape[1], skip=-1)
            keep = slots >= 0
            cache.view(-1, last)[slots[keep]] = rows.reshape(batch * seq, last)[keep]
    return k_out, ckv_out, k_rope, c_kv


def _v2_dtypes(op, k_cache_dtype, ckv_cache_dtype):
    if k_cache_dtype is not None or ckv_cache_dtype is not None:
        raise NotImplementedError(f"npu::{op}: k_cache_dtype/ckv_cache_dtype (hifloat8/fp8 caches) are not simulated")


def npu_kv_rmsnorm_rope_cache(kv, gamma, cos, sin, index, k_cache, ckv_cache, *, k_rope_scale=None, c_kv_scale=None,
                              k_rope_offset=None, c_kv_offset=None, v=None, epsilon=1e-5, cache_mode="Norm",
                              is_output_kv=False):
    k_out, ckv_out, k_rope, c_kv = _kv_rmsnorm_rope(
        "npu_kv_rmsnorm_rope_cache", kv, gamma, cos, sin, index, k_cache, ckv_cache,
        (k_rope_scale, c_kv_scale, k_rope_offset, c_kv_offset), v, epsilon, cache_mode)
    k_cache.copy_(k_out)  # in place, as on an NPU (the caches are the aclnn op's in/out tensors)
    ckv_cache.copy_(ckv_out)
    return k_out, ckv_out, k_rope, c_kv


def npu_kv_rmsnorm_rope_cache_v2(kv, gamma, cos, sin, index, k_cache, ckv_cache, *, k_rope_scale=None,
                                 c_kv_scale=None, k_rope_offset=None, c_kv_offset=None, v=None, epsilon=1e-5,
                                 cache_mode="Norm", is_output_kv=False, k_cache_dtype=None, ckv_cache_dtype=None):
    op = "npu_kv_rmsnorm_rope_cache_v2"
    _v2_dtypes(op, k_cache_dtype, ckv_cache_dtype)
    k_out, ckv_out, k_rope, c_kv = _kv_rmsnorm_rope(
        op, kv, gamma, cos, sin, index, k_cache, ckv_cache,
        (k_rope_scale, c_kv_scale, k_rope_offset, c_kv_offset), v, epsilon, cache_mode)
    k_cache.copy_(k_out)
    ckv_cache.copy_(ckv_out)
    return k_rope, c_kv


def npu_kv_rmsnorm_rope_cache_v2_functional(kv, gamma, cos, sin, index, k_cache, ckv_cache, *, k_rope_scale=None,
                                            c_kv_scale=None, k_rope_offset=None, c_kv_offset=None, v=None,
                                            epsilon=1e-5, cache_mode="Norm", is_output_kv=False, k_cache_dtype=None,
                                            ckv_cache_dtype=None):
    op = "npu_kv_rmsnorm_rope_cache_v2_functional"
    _v2_dtypes(op, k_cache_dtype, ckv_cache_dtype)
    k_out, ckv_out, k_rope, c_kv = _kv_rmsnorm_rope(
        op, kv, gamma, cos, sin, index, k_cache, ckv_cache,
        (k_rope_scale, c_kv_scale, k_rope_offset, c_kv_offset), v, epsilon, cache_mode)
    return k_rope, c_kv, k_out, ckv_out


KERNELS = {
    "npu_scatter_pa_kv_cache": npu_scatter_pa_kv_cache,
    "npu_scatter_pa_kv_cache_functional": npu_scatter_pa_kv_cache_functional,
    "npu_kv_rmsnorm_rope_cache": npu_kv_rmsnorm_rope_cache,
    "npu_kv_rmsnorm_rope_cache_v2": npu_kv_rmsnorm_rope_cache_v2,
    "npu_kv_rmsnorm_rope_cache_v2_functional": npu_kv_rmsnorm_rope_cache_v2_functional,
}

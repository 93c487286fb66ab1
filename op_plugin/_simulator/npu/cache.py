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
* ``npu_kv_rmsnorm_rope_cache(kv, gamma, cos, sin, index, k_cache, ckv_cache, ...)`` (aclnnKvRmsNormRopeCache
  and V2): without ``v`` (V1) kv ``[B, 1, S, D]`` splits into ``Dv = gamma.numel()`` and ``Dk = D - Dv``;
  ``c_kv = rms_norm(kv[..., :Dv]) * gamma``, ``k_rope = x_part1 * cos + x_part2 * sin`` with ``x = kv[..., Dv:]``,
  ``x_part1 = cat(x[::2], x[1::2])``, ``x_part2 = cat(-x[1::2], x[::2])``. With ``v`` (V2, kv-separated, N in
  1, 2, 4, 8): the RMS norm of all of kv, the rope on its first ``cos.shape[-1]`` dims, the rest passed on,
  and ``c_kv = v``. float32 inside, rounded to kv's dtype. Each token ``(b, s)`` is written to the caches:
  ``Norm``: index ``[B, S]``, cache ``[Bc, N, Sc, .]`` at ``index[b, s]``; ``PA``/``PA_BNSD``/``PA_NZ``: index
  ``[B * S]``, cache ``[blocks, block_size, N, .]`` at slot ``index[b * S + s]``. An index of -1 skips the
  token. An int8 cache stores CANN's quantisation of the values: ``round(x * scale + offset)`` clamped to
  [-128, 127] (``round`` read as torch's, half to even; scale/offset float32 broadcasting over ``[N, D]``).
  Refused: ``PA_BLK_*`` (where a token lands inside the block its index names is not documented) and
  hifloat8/fp8 caches (the v2 ``*_cache_dtype`` formats). k_rope and c_kv are returned whatever
  ``is_output_kv`` says (on an NPU they are only written when it is True). The v1 op updates the caches in
  place (as on an NPU, though its schema declares no mutation) and returns copies of them; v2 is declared
  in place; ``_v2_functional`` returns new caches.
* ``npu_scatter_list(self, indices, updates, mask, reduce, axis)`` (ops-nn ``index/scatter_list``, its
  golden): new copies of the tensors of ``self``; for each ``i`` whose ``mask[i]`` is not 0 (all without
  mask), ``self[i]``'s window ``[start, start + n)`` along ``axis`` (of ``updates``, which has one more leading
  dim; the var axis is one less) takes ``updates[i]``'s first ``n`` rows: 1-D ``indices[i]`` is ``start`` with
  ``n`` the updates' axis size, 2-D ``indices[i]`` is ``[start, n]``. A window outside the var axis is refused
  (the README: out-of-range indices are not supported), as is a reduce other than ``"update"``.
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


def _kv_values(op, kv, gamma, cos, sin, v, epsilon):
    """(k_rope, c_kv) in kv's dtype, float32 inside: V1 (v None) splits kv into the normed and the roped
    part; V2 (v given) norms all of kv, ropes its first cos.shape[-1] dims and passes v through."""
    if kv.dim() != 4 or gamma.dim() != 1 or cos.dim() != 4 or sin.shape != cos.shape:
        raise ValueError(f"npu::{op}: kv [B, N, S, D], gamma 1-D, cos and sin [B, N or 1, S or 1, Dr] expected")
    dtypes = {kv.dtype, gamma.dtype, cos.dtype, sin.dtype} | ({v.dtype} if v is not None else set())
    if len(dtypes) != 1 or kv.dtype not in _FLOAT16S + (torch.float32,):
        raise TypeError(f"npu::{op}: kv, gamma, cos, sin (and v) must have one float dtype, "
                        f"got {sorted(map(str, dtypes))}")
    heads, width, rope = kv.shape[1], kv.shape[3], cos.shape[-1]
    wide = opmath(kv).float()

    def rms(x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + epsilon) * opmath(gamma).float()

    def interleave_rope(x):
        evens, odds = x[..., ::2], x[..., 1::2]
        return torch.cat((evens, odds), -1) * opmath(cos).float() + torch.cat((-odds, evens), -1) * opmath(sin).float()

    if v is None:  # V1: kv = [normed part Dv | rope part Dk]
        dv = gamma.shape[0]
        if heads != 1 or width - dv <= 0 or (width - dv) % 2 or rope != width - dv:
            raise ValueError(f"npu::{op}: without v, N must be 1 (CANN) and D = Dv (gamma) + an even Dk = cos's last "
                             f"dim; got kv {tuple(kv.shape)}, gamma {dv}, cos {tuple(cos.shape)}")
        return interleave_rope(wide[..., dv:]).to(kv.dtype), rms(wide[..., :dv]).to(kv.dtype)
    if v.dim() != 4 or tuple(v.shape[:3]) != tuple(kv.shape[:3]) or heads not in (1, 2, 4, 8):
        raise ValueError(f"npu::{op}: v must be [B, N, S, Dv] with kv's first three dims and N in 1, 2, 4, 8; got "
                         f"kv {tuple(kv.shape)}, v {tuple(v.shape)}")
    if gamma.shape[0] != width or rope % 2 or rope > width:
        raise ValueError(f"npu::{op}: with v, gamma must have kv's last dim {width} and cos an even last dim <= it")
    normed = rms(wide)
    return torch.cat((interleave_rope(normed[..., :rope]), normed[..., rope:]), -1).to(kv.dtype), v.clone()


def _as_written(op, name, rows, cache, scale, offset):
    """rows as the cache stores them: CANN's quantisation into an int8 cache (x * scale [+ offset], round,
    clamp to [-128, 127]), else the rows themselves (a float cache of their dtype)."""
    if cache.dtype == torch.int8:
        if scale is None:
            raise ValueError(f"npu::{op}: an int8 {name} needs its scale (CANN)")
        heads, width = rows.shape[1], rows.shape[3]
        for what, t in (("scale", scale), ("offset", offset)):
            if t is not None and (t.dtype != torch.float32 or torch.broadcast_shapes(t.shape, (heads, width))
                                  != (heads, width)):
                raise ValueError(f"npu::{op}: the {name} {what} must be float32 broadcasting to [N, D] = "
                                 f"[{heads}, {width}], got {t.dtype} {tuple(t.shape)}")
        x = rows.float().permute(0, 2, 1, 3) * scale  # [B, S, N, D]: scales per head and column
        if offset is not None:
            x = x + offset
        return torch.round(x).clamp(-128, 127).to(torch.int8).permute(0, 2, 1, 3)
    if scale is not None or offset is not None or cache.dtype != rows.dtype:
        raise NotImplementedError(f"npu::{op}: a {cache.dtype} {name} with scale/offset or another dtype than the "
                                  f"values' ({rows.dtype}) is not simulated (int8 quantisation is; hifloat8/fp8 not)")
    return rows


def _kv_rmsnorm_rope(op, kv, gamma, cos, sin, index, k_cache, ckv_cache, scales, v, epsilon, cache_mode):
    """(new k_cache, new ckv_cache, k_rope, c_kv)."""
    if cache_mode not in ("Norm",) + _PA_MODES:
        raise NotImplementedError(f"npu::{op}: cache_mode {cache_mode!r} is not simulated (Norm, PA, PA_BNSD, PA_NZ "
                                  "are; PA_BLK_*: where a token lands inside its block is not documented)")
    k_rope, c_kv = _kv_values(op, kv, gamma, cos, sin, v, epsilon)
    k_scale, ckv_scale, k_offset, ckv_offset = scales
    batch, heads, seq, _ = kv.shape
    k_out, ckv_out = k_cache.clone(), ckv_cache.clone()
    for name, cache, values, scale, offset in (("k_cache", k_out, k_rope, k_scale, k_offset),
                                               ("ckv_cache", ckv_out, c_kv, ckv_scale, ckv_offset)):
        last = values.shape[-1]
        rows = _as_written(op, name, values, cache, scale, offset)
        if cache_mode == "Norm":
            if tuple(index.shape) != (batch, seq) or cache.dim() != 4 or cache.shape[0] < batch \
                    or (cache.shape[1], cache.shape[3]) != (heads, last):
                raise ValueError(f"npu::{op}: cache_mode 'Norm' takes index [B, S] = [{batch}, {seq}] and a "
                                 f"{name} [Bc >= {batch}, {heads}, Sc, {last}]; got {tuple(index.shape)}, "
                                 f"{tuple(cache.shape)}")
            for b in range(batch):
                slots = _check_slots(op, "index", index[b], seq, cache.shape[2], skip=-1)
                keep = slots >= 0
                cache[b, :, slots[keep]] = rows[b][:, keep]
        else:
            if cache.dim() != 4 or (cache.shape[2], cache.shape[3]) != (heads, last):
                raise ValueError(f"npu::{op}: cache_mode {cache_mode!r} takes a {name} [blocks, block_size, {heads}, "
                                 f"{last}], got {tuple(cache.shape)}")
            slots = _check_slots(op, "index", index, batch * seq, cache.shape[0] * cache.shape[1], skip=-1)
            keep = slots >= 0
            cache.view(-1, heads, last)[slots[keep]] = rows.permute(0, 2, 1, 3).reshape(batch * seq, heads, last)[keep]
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


def scatter_list_windows(op, var, indices, updates, mask, reduce, axis):
    """(list index, var axis, start, rows) of each window ScatterList writes; refuses what CANN leaves undefined."""
    if reduce != "update":
        raise ValueError(f"npu::{op}: reduce={reduce!r}: CANN's ScatterList documents 'update' only")
    if updates.dim() < 2 or updates.shape[0] != len(var):
        raise ValueError(f"npu::{op}: updates {tuple(updates.shape)} must lead with one entry per tensor ({len(var)})")
    up_axis = axis + updates.dim() if axis < 0 else axis
    if not 1 <= up_axis < updates.dim():
        raise ValueError(f"npu::{op}: axis {axis} is not a non-leading dim of updates {tuple(updates.shape)}")
    if indices.dim() not in (1, 2) or indices.shape[0] != len(var) or (indices.dim() == 2 and indices.shape[1] != 2):
        raise ValueError(f"npu::{op}: indices {tuple(indices.shape)} must be ({len(var)},) or ({len(var)}, 2)")
    flags = None if mask is None else mask.reshape(-1).tolist()
    windows = []
    for i, tensor in enumerate(var):
        if tensor.dim() != updates.dim() - 1:
            raise ValueError(f"npu::{op}: self[{i}] {tuple(tensor.shape)} must have one dim fewer than updates")
        if flags is not None and flags[i] == 0:
            continue
        row, width = indices[i].tolist(), updates.shape[up_axis]
        start, rows = (row[0], min(row[1], width)) if indices.dim() == 2 else (row, width)
        if rows > 0 and (start < 0 or start + rows > tensor.shape[up_axis - 1]):
            raise ValueError(f"npu::{op}: self[{i}]'s window [{start}, {start + rows}) leaves its axis of size "
                             f"{tensor.shape[up_axis - 1]} (CANN: out-of-range indices are not supported)")
        if rows > 0:
            windows.append((i, up_axis - 1, start, rows))
    return windows


def npu_scatter_list(self, indices, updates, mask=None, reduce="update", axis=-2):
    out = [tensor.clone() for tensor in self]
    for i, dim, start, rows in scatter_list_windows("npu_scatter_list", self, indices, updates, mask, reduce, axis):
        out[i].narrow(dim, start, rows).copy_(updates[i].narrow(dim, 0, rows))
    return out


KERNELS = {
    "npu_scatter_list": npu_scatter_list,
    "npu_scatter_pa_kv_cache": npu_scatter_pa_kv_cache,
    "npu_scatter_pa_kv_cache_functional": npu_scatter_pa_kv_cache_functional,
    "npu_kv_rmsnorm_rope_cache": npu_kv_rmsnorm_rope_cache,
    "npu_kv_rmsnorm_rope_cache_v2": npu_kv_rmsnorm_rope_cache_v2,
    "npu_kv_rmsnorm_rope_cache_v2_functional": npu_kv_rmsnorm_rope_cache_v2_functional,
}

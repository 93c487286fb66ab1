"""KV-cache writes of the attention ops (CANN ops-transformer ``attention/``): ScatterPaKvCache (tokens written
into a paged cache at slot_mapping's slots) and KvRmsNormRopeCache (RMS norm and rope of kv, written into the
k/ckv caches, quantised with their scales and offsets when given). Written from CANN's definitions; slots out of
range or written twice are refused (CANN does not define them). ScatterNdUpdate, which CANN files under
``index/``, is in ``index/scatter.py``.
"""
from __future__ import annotations

import torch
from ...registry import ge_kernel, refuse
from ..common import opmath


def _slots(what, slots, count, capacity, skip_negative_one=False):
    """A slot/index input as a long vector of `count` entries inside [0, capacity) (-1 allowed when
    `skip_negative_one`), none repeated: CANN defines neither other values nor repeats."""
    if slots.dtype not in (torch.int32, torch.int64):
        refuse(f"{what} has dtype {slots.dtype}; the prototype takes int32 or int64")
    flat = slots.reshape(-1).long()
    if flat.numel() != count:
        refuse(f"{what} has {flat.numel()} entries for {count} tokens")
    live = flat[flat != -1] if skip_negative_one else flat
    if bool(((live < 0) | (live >= capacity)).any()):
        refuse(f"a {what} value is outside [0, {capacity})" + (" (or -1: skip)" if skip_negative_one else ""))
    if torch.unique(live).numel() != live.numel():
        refuse(f"a {what} value appears twice: which write wins is not defined by CANN")
    return flat


def _paged_write(what, cache, tokens, slot_mapping, cache_mode):
    """ScatterPaKvCache's write of one of key/value into its cache (scenario 1 PA_NZ, 2 Norm)."""
    if tokens.numel() == 0 and cache.numel() == 0:  # scenario 6: no value
        return cache.clone()
    if tokens.dim() != 3:
        refuse(f"{what} must be 3-D [tokens, num_head, head_size] (the compressed 4-D scenario is not simulated)")
    if tokens.dtype != cache.dtype:
        refuse(f"{what} has dtype {tokens.dtype}, its cache {cache.dtype}: they must be one")
    count, heads, size = tokens.shape
    out = cache.clone()
    if cache_mode == "Norm":
        if cache.dim() != 4 or cache.shape[2] != heads or cache.shape[3] != size:
            refuse(f"cache_mode Norm takes a {what}_cache [num_blocks, block_size, {heads}, {size}], "
                   f"got {tuple(cache.shape)}")
        flat = _slots("slot_mapping", slot_mapping, count, cache.shape[0] * cache.shape[1])
        out.view(-1, heads, size)[flat] = tokens
        return out
    # PA_NZ: the token's num_head * head_size values in rows of 32 bytes, row r at cache[block, r, offset, :]
    width = 32 // tokens.element_size()
    if cache.dim() == 4 and cache.shape[1] * cache.shape[3] == heads * size and cache.shape[3] == width:
        grouped = tokens.reshape(count, heads * size // width, width)
        per_block = out.permute(0, 2, 1, 3)  # [num_blocks, block_size, rows, width], a view of out
    elif cache.dim() == 5 and (cache.shape[1], cache.shape[2] * cache.shape[4]) == (heads, size) \
            and cache.shape[4] == width:
        grouped = tokens.reshape(count, heads, size // width, width)
        per_block = out.permute(0, 3, 1, 2, 4)
    else:
        hint = ""
        if cache.dim() == 4 and tuple(cache.shape[2:]) == (heads, size):  # torch_npu's default is PA_NZ
            hint = (f"; {what}_cache {tuple(cache.shape)} has the Norm layout [num_blocks, block_size, num_head, "
                    "head_size] (vllm-ascend's): pass cache_mode=\"Norm\" (the default, \"PA_NZ\", takes the "
                    "FRACTAL_NZ layouts above)")
        refuse(f"cache_mode PA_NZ takes a {what}_cache [num_blocks, {heads}*{size}//{width}, block_size, {width}] "
               f"or [num_blocks, {heads}, {size}//{width}, block_size, {width}], got {tuple(cache.shape)}{hint}")
    block_size = per_block.shape[1]
    flat = _slots("slot_mapping", slot_mapping, count, cache.shape[0] * block_size)
    for token, slot in enumerate(flat.tolist()):
        per_block[slot // block_size, slot % block_size] = grouped[token]
    return out


@ge_kernel("ScatterPaKvCache")
def scatter_pa_kv_cache(key, key_cache, slot_mapping, value, value_cache, compress_lens, compress_seq_offset,
                        seq_lens, *, cache_mode, scatter_mode, strides, offsets):
    """CANN ScatterPaKvCache (ops-transformer attention/scatter_pa_kv_cache): each token t of key/value
    written to slot slot_mapping[t] = block * block_size + offset of its cache; scenarios 1 (PA_NZ) and
    2 (Norm) with scatter_mode None. The compressed scenarios (3-5), Nct strides/offsets and NHSD are
    refused: CANN documents their shapes, not where each token lands."""
    del strides, offsets  # read only with scatter_mode "Nct", refused below
    if scatter_mode != "None":
        refuse(f"scatter_mode={scatter_mode!r} is not simulated (only 'None')")
    if compress_lens is not None or compress_seq_offset is not None or seq_lens is not None:
        refuse("the compressed scenarios (compress_lens, compress_seq_offset, seq_lens) are not simulated")
    if cache_mode not in ("Norm", "PA_NZ"):
        refuse(f"cache_mode={cache_mode!r} is not 'Norm' or 'PA_NZ'")
    if value.numel() and tuple(value.shape[:2]) != tuple(key.shape[:2]):
        refuse(f"key {tuple(key.shape)} and value {tuple(value.shape)} must share [tokens, num_head]")
    return (_paged_write("key", key_cache, key, slot_mapping, cache_mode),
            _paged_write("value", value_cache, value, slot_mapping, cache_mode))


_KV_FLOATS = (torch.float16, torch.bfloat16, torch.float32)


def _written(what, values, cache, scale, offset):
    """values [B, N, S, D] as `cache` stores them: int8 caches quantise (CANN: x * scale, + offset, round,
    clamp to [-128, 127]; the scale/offset broadcast over [N, D]); float caches take them as they are."""
    if cache.dtype == torch.int8:
        if scale is None:
            refuse(f"{what} is int8 but its scale is not fed (CANN requires it)")
        n, d = values.shape[1], values.shape[3]
        for name, t in (("scale", scale), ("offset", offset)):
            if t is not None and t.dtype != torch.float32:
                refuse(f"the {what} {name} has dtype {t.dtype}; CANN takes float32")
            trailing = list(reversed(t.shape)) if t is not None else []
            if t is not None and (t.dim() > 2 or any(a not in (1, b) for a, b in zip(trailing, (d, n)[:len(trailing)],
                                                                                      strict=True))):
                refuse(f"the {what} {name} of shape {tuple(t.shape)} does not broadcast to [N, D] = [{n}, {d}]")
        x = values.float().transpose(1, 2) * scale.float()
        if offset is not None:
            x = x + offset.float()
        return torch.clamp(torch.round(x), -128, 127).to(torch.int8).transpose(1, 2)
    if scale is not None or offset is not None:
        refuse(f"a scale/offset with a {cache.dtype} {what} is not simulated (int8 quantisation is)")
    if cache.dtype not in _KV_FLOATS or cache.dtype != values.dtype:
        refuse(f"{what} has dtype {cache.dtype}; a non-quantised cache takes kv's dtype {values.dtype} "
               "(hifloat8/fp8 caches are not simulated)")
    return values


@ge_kernel("KvRmsNormRopeCache", one_dtype=("kv", "gamma", "cos", "sin"), accepts={"kv": _KV_FLOATS})
def kv_rms_norm_rope_cache(kv, gamma, cos, sin, index, k_cache, ckv_cache, k_rope_scale, c_kv_scale, k_rope_offset,
                           c_kv_offset, v, *, epsilon, cache_mode, is_output_kv):
    """CANN KvRmsNormRopeCache (ops-transformer posembedding/kv_rms_norm_rope_cache, aclnnKvRmsNormRopeCache(V2)):
    RMSNorm(x) = x / sqrt(mean(x^2) + epsilon) * gamma; interleave-rope y = x_part1 * cos + x_part2 * sin with
    x_part1 = cat(x[::2], x[1::2]), x_part2 = cat(-x[1::2], x[::2]). Without v (V1, N = 1): kv = [Dv | Dk],
    c_kv = RMSNorm(kv[..., :Dv]), k_rope = rope(kv[..., Dv:]). With v (V2, N in 1, 2, 4, 8): k_rope =
    cat(rope(RMSNorm(kv)[..., :rope]), RMSNorm(kv)[..., rope:]), c_kv = v. float32 inside, rounded to kv's
    dtype. Each token (b, s) goes to its index (-1: skipped): Norm cache [Bc, N, Sc, .] at index[b, s]; PA,
    PA_BNSD, PA_NZ cache [blocks, block_size, N, .] at slot index[b * S + s]; int8 caches quantised (see
    _written). Outputs (k_cache, ckv_cache, k_rope, c_kv), k_rope/c_kv whatever is_output_kv says. Refused:
    PA_BLK_* modes, hifloat8/fp8 caches."""
    del is_output_kv  # only whether an NPU writes k_rope/c_kv out
    if cache_mode not in ("Norm", "PA", "PA_BNSD", "PA_NZ"):
        refuse(f"cache_mode={cache_mode!r} is not simulated (Norm, PA, PA_BNSD, PA_NZ)")
    if kv.dim() != 4 or gamma.dim() != 1 or cos.dim() != 4 or tuple(sin.shape) != tuple(cos.shape):
        refuse(f"kv must be [B, N, S, D], gamma 1-D and cos/sin one 4-D shape; got {tuple(kv.shape)}, "
               f"{tuple(gamma.shape)}, {tuple(cos.shape)}, {tuple(sin.shape)}")
    batch, heads, seq, width = kv.shape
    rope = cos.shape[-1]
    x = opmath(kv).float()
    g = opmath(gamma).float()
    c, s_ = opmath(cos).float(), opmath(sin).float()

    def rms_norm(t):
        return t / torch.sqrt(t.square().mean(dim=-1, keepdim=True) + epsilon) * g

    def rotate(t):
        x1, x2 = t[..., 0::2], t[..., 1::2]
        return torch.cat((x1, x2), dim=-1) * c + torch.cat((-x2, x1), dim=-1) * s_

    if v is None:
        dv = gamma.numel()
        if heads != 1 or width - dv != rope or rope <= 0 or rope % 2:
            refuse(f"without v, kv must be [B, 1, S, Dv + Dk] with Dv = gamma's {dv} and an even Dk = cos's last "
                   f"dim {rope} (CANN: N = 1); got {tuple(kv.shape)}")
        k_rope, c_kv = rotate(x[..., dv:]).to(kv.dtype), rms_norm(x[..., :dv]).to(kv.dtype)
    else:
        if v.dim() != 4 or tuple(v.shape[:3]) != tuple(kv.shape[:3]) or heads not in (1, 2, 4, 8) \
                or v.dtype != kv.dtype:
            refuse(f"v must be [B, N, S, Dv] of kv's dtype with kv's [B, N, S] and N in 1, 2, 4, 8; got kv "
                   f"{tuple(kv.shape)}, v {tuple(v.shape)} {v.dtype}")
        if gamma.numel() != width or rope % 2 or rope > width:
            refuse(f"with v, gamma must have kv's last dim {width} and cos an even last dim <= it")
        normed = rms_norm(x)
        k_rope = torch.cat((rotate(normed[..., :rope]), normed[..., rope:]), dim=-1).to(kv.dtype)
        c_kv = v.clone()  # an output of its own, not an alias of the input
    outs = []
    for what, cache, values, scale, offset in (("k_cache", k_cache, k_rope, k_rope_scale, k_rope_offset),
                                               ("ckv_cache", ckv_cache, c_kv, c_kv_scale, c_kv_offset)):
        last = values.shape[-1]
        stored = _written(what, values, cache, scale, offset)
        out = cache.clone()
        if cache_mode == "Norm":
            if tuple(index.shape) != (batch, seq) or cache.dim() != 4 or cache.shape[0] < batch \
                    or cache.shape[1] != heads or cache.shape[3] != last:
                refuse(f"cache_mode Norm takes index [{batch}, {seq}] and {what} [>= {batch}, {heads}, Sc, {last}]; "
                       f"got {tuple(index.shape)}, {tuple(cache.shape)}")
            for b in range(batch):
                positions = _slots("index", index[b], seq, cache.shape[2], skip_negative_one=True)
                for s, position in enumerate(positions.tolist()):
                    if position != -1:
                        out[b, :, position] = stored[b, :, s]
        else:
            if cache.dim() != 4 or cache.shape[2] != heads or cache.shape[3] != last:
                refuse(f"cache_mode {cache_mode} takes {what} [blocks, block_size, {heads}, {last}], "
                       f"got {tuple(cache.shape)}")
            block_size = cache.shape[1]
            slots = _slots("index", index, batch * seq, cache.shape[0] * block_size, skip_negative_one=True)
            for token, slot in enumerate(slots.tolist()):
                if slot != -1:
                    out[slot // block_size, slot % block_size] = stored[token // seq, :, token % seq]
        outs.append(out)
    return outs[0], outs[1], k_rope, c_kv

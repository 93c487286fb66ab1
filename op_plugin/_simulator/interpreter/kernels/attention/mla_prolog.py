"""MlaProlog / MlaPrologV2: Multi-head Latent Attention's pre-processing (``npu_mla_prolog``, ``_v2``).

From CANN's definition (ops-transformer ``aclnnMlaPrologV2WeightNz.md`` and the design note
``MlaProlog算子设计介绍.md``), per token x ([T, He] or [B, S, He]):

    c^Q  = RmsNorm(x W^DQ) * gamma_cq                   (eps rmsnorm_epsilon_cq)
    [q^C | q^R] = c^Q [W^UQ | W^QR]                     (weight_uq_qr: the first N*D columns are W^UQ)
    query      = q^C W^UK                               (per head: [D] x weight_uk[n] [D, Hckv])
    query_rope = ROPE(q^R)
    [c^KV | k^R] = x [W^DKV | W^KR]                     (weight_dkv_kr: the first Hckv columns are W^DKV)
    kv_cache[cache_index] = RmsNorm(c^KV) * gamma_ckv,  kr_cache[cache_index] = ROPE(k^R)

ROPE is the design note's formula (15), the form the kernel computes: x's even and odd elements
de-interleaved, then ``x' * cos + rotate_half(x') * sin`` with rope_cos / rope_sin as given
([T, Dr] or [B, S, Dr], broadcast over the heads). The caches are ``PA_BSND``
(BlockNum, BlockSize, Nkv, H): cache_index is the row in BlockNum * BlockSize. Computed in float32,
each output rounded once (query in rope_sin's dtype, query_rope bfloat16 for v2 as the wheel's Meta
gives, the caches in their dtype); the caches are returned as updated copies (the schema is
functional; on an NPU the aclnn op also writes them in place). V2's dequant_scale_q_nope is [1]
zeros outside quantisation (its value there is not documented).

Refused naming the node: int8 inputs and every quantisation tensor, cache_mode PA_NZ, Nkv != 1,
cache_index values outside [0, BlockNum * BlockSize) or repeated (the order of two writes to one row
is not documented).
"""
from __future__ import annotations

import torch
from ...registry import ge_kernel, refuse
from ..common import opmath


class MlaError(ValueError):
    """A case this module does not implement (the caller names its op or node)."""


def _rms(x, gamma, eps):
    return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps) * opmath(gamma).float()


def _rope(x, cos, sin):
    """Formula (15): de-interleave x (evens, then odds), then x * cos + rotate_half(x) * sin."""
    x = torch.cat([x[..., 0::2], x[..., 1::2]], dim=-1)
    first, second = x.chunk(2, dim=-1)
    return x * cos + torch.cat([-second, first], dim=-1) * sin


def _write(cache, index, rows, what):
    if cache.dim() != 4 or cache.shape[2] != 1:
        raise MlaError(f"{what} of shape {tuple(cache.shape)} is not (BlockNum, BlockSize, 1, H) (PA_BSND, Nkv 1)")
    if cache.shape[3] != rows.shape[-1]:
        raise MlaError(f"{what} rows hold {cache.shape[3]} values, the computed rows {rows.shape[-1]}")
    out = cache.clone()
    out.view(-1, cache.shape[3])[index] = rows.to(cache.dtype)
    return out


def mla_prolog(token_x, weight_dq, weight_uq_qr, weight_uk, weight_dkv_kr, gamma_cq, gamma_ckv, rope_sin, rope_cos,
               cache_index, kv_cache, kr_cache, *, eps_cq, eps_ckv, cache_mode, query_rope_dtype, qc_qr_scale=1.0,
               kc_scale=1.0):
    """(query, query_rope, kv_cache_out, kr_cache_out); raises MlaError."""
    if cache_mode != "PA_BSND":
        raise MlaError(f"cache_mode {cache_mode!r} is not implemented (PA_BSND is)")
    for name, tensor in (("token_x", token_x), ("weight_dq", weight_dq), ("weight_uq_qr", weight_uq_qr),
                         ("weight_dkv_kr", weight_dkv_kr), ("kv_cache", kv_cache), ("kr_cache", kr_cache)):
        if not tensor.is_floating_point():
            raise MlaError(f"{name} has dtype {tensor.dtype}: quantised (int8) MLA prolog is not implemented")
    if token_x.dim() not in (2, 3) or weight_uk.dim() != 3:
        raise MlaError(f"token_x must be 2-d or 3-d and weight_uk 3-d, got {token_x.dim()} and {weight_uk.dim()}")
    lead = tuple(token_x.shape[:-1])
    heads, head_dim, hckv = weight_uk.shape
    hidden, dr = token_x.shape[-1], rope_sin.shape[-1]
    expected = {"weight_dq": (weight_dq, (hidden, weight_dq.shape[-1])),
                "weight_uq_qr": (weight_uq_qr, (weight_dq.shape[-1], heads * (head_dim + dr))),
                "weight_dkv_kr": (weight_dkv_kr, (hidden, hckv + dr)), "rope_cos": (rope_cos, lead + (dr,)),
                "rope_sin": (rope_sin, lead + (dr,)), "cache_index": (cache_index, lead)}
    for name, (tensor, shape) in expected.items():
        if tuple(tensor.shape) != shape:
            raise MlaError(f"{name} has shape {tuple(tensor.shape)}, expected {shape}")
    x = opmath(token_x).float().reshape(-1, hidden)
    tokens = x.shape[0]
    cos, sin = opmath(rope_cos).float().reshape(tokens, dr), opmath(rope_sin).float().reshape(tokens, dr)
    index = cache_index.reshape(-1).long()
    slots = kv_cache.shape[0] * kv_cache.shape[1]
    if tokens and (int(index.min()) < 0 or int(index.max()) >= slots):
        raise MlaError(f"cache_index values must lie in [0, {slots}) (BlockNum * BlockSize)")
    if index.unique().numel() != index.numel():
        raise MlaError("cache_index repeats a row: the order of the writes is not documented")
    cq = qc_qr_scale * _rms(x @ opmath(weight_dq).float(), gamma_cq, eps_cq)
    qc_qr = cq @ opmath(weight_uq_qr).float()
    qc = qc_qr[:, :heads * head_dim].reshape(tokens, heads, head_dim)
    qr = qc_qr[:, heads * head_dim:].reshape(tokens, heads, dr)
    query = torch.einsum("tnd,ndh->tnh", qc, opmath(weight_uk).float())
    query_rope = _rope(qr, cos[:, None], sin[:, None])
    ckv_kr = x @ opmath(weight_dkv_kr).float()
    ckv = kc_scale * _rms(ckv_kr[:, :hckv], gamma_ckv, eps_ckv)
    kr = _rope(ckv_kr[:, hckv:], cos, sin)
    return (query.reshape(*lead, heads, hckv).to(rope_sin.dtype).contiguous(),
            query_rope.reshape(*lead, heads, dr).to(query_rope_dtype or rope_sin.dtype).contiguous(),
            _write(kv_cache, index, ckv, "kv_cache"), _write(kr_cache, index, kr, "kr_cache"))


_QUANT_INPUTS = ("dequant_scale_x", "dequant_scale_w_dq", "dequant_scale_w_uq_qr", "dequant_scale_w_dkv_kr",
                 "quant_scale_ckv", "quant_scale_ckr", "smooth_scales_cq")


def run(given_quant, args, **kwargs):
    """mla_prolog with the quantisation inputs refused; MlaError becomes the caller's `error`."""
    for name, tensor in zip(_QUANT_INPUTS, given_quant, strict=True):
        if tensor is not None:
            raise MlaError(f"{name} (quantisation) is not implemented on the simulator")
    return mla_prolog(*args, **kwargs)


@ge_kernel("MlaProlog")
def mla_prolog_v1(token_x, weight_dq, weight_uq_qr, weight_uk, weight_dkv_kr, rmsnorm_gamma_cq, rmsnorm_gamma_ckv,
                  rope_sin, rope_cos, cache_index, kv_cache, kr_cache, dequant_scale_x, dequant_scale_w_dq,
                  dequant_scale_w_uq_qr, dequant_scale_w_dkv_kr, quant_scale_ckv, quant_scale_ckr, smooth_scales_cq, *,
                  rmsnorm_epsilon_cq, rmsnorm_epsilon_ckv, cache_mode):
    try:
        return run((dequant_scale_x, dequant_scale_w_dq, dequant_scale_w_uq_qr, dequant_scale_w_dkv_kr,
                    quant_scale_ckv, quant_scale_ckr, smooth_scales_cq),
                   (token_x, weight_dq, weight_uq_qr, weight_uk, weight_dkv_kr, rmsnorm_gamma_cq, rmsnorm_gamma_ckv,
                    rope_sin, rope_cos, cache_index, kv_cache, kr_cache),
                   eps_cq=rmsnorm_epsilon_cq, eps_ckv=rmsnorm_epsilon_ckv, cache_mode=cache_mode, query_rope_dtype=None)
    except MlaError as error:
        refuse(str(error))


@ge_kernel("MlaPrologV2")
def mla_prolog_v2(token_x, weight_dq, weight_uq_qr, weight_uk, weight_dkv_kr, rmsnorm_gamma_cq, rmsnorm_gamma_ckv,
                  rope_sin, rope_cos, cache_index, kv_cache, kr_cache, dequant_scale_x, dequant_scale_w_dq,
                  dequant_scale_w_uq_qr, dequant_scale_w_dkv_kr, quant_scale_ckv, quant_scale_ckr, smooth_scales_cq, *,
                  rmsnorm_epsilon_cq, rmsnorm_epsilon_ckv, cache_mode):
    try:
        outs = run((dequant_scale_x, dequant_scale_w_dq, dequant_scale_w_uq_qr, dequant_scale_w_dkv_kr,
                    quant_scale_ckv, quant_scale_ckr, smooth_scales_cq),
                   (token_x, weight_dq, weight_uq_qr, weight_uk, weight_dkv_kr, rmsnorm_gamma_cq, rmsnorm_gamma_ckv,
                    rope_sin, rope_cos, cache_index, kv_cache, kr_cache),
                   eps_cq=rmsnorm_epsilon_cq, eps_ckv=rmsnorm_epsilon_ckv, cache_mode=cache_mode,
                   query_rope_dtype=torch.bfloat16)
    except MlaError as error:
        refuse(str(error))
    return (*outs, torch.zeros([1], dtype=torch.float32))


# V3's reserved arguments (aclnnMlaPrologV3WeightNz: "预留接口", pass the default) and quantisation modes.
V3_DEFAULTS = {"query_norm_flag": False, "weight_quant_mode": 0, "kv_cache_quant_mode": 0, "query_quant_mode": 0,
               "ckvkr_repo_mode": 0, "quant_scale_repo_mode": 0, "tile_size": 128}


def run_v3(given_quant, args, *, actual_seq_len, k_nope_clip_alpha, settings, **kwargs):
    """V3 without quantisation: V2's computation with c^Q scaled by qc_qr_scale and c^KV by kc_scale
    (aclnnMlaPrologV3WeightNz); returns (query, query_rope, kv_cache_out, kr_cache_out) and the three
    empty outputs the wheel's Meta gives for CANN 8.5.0 (dequant_scale_q_nope, query_norm,
    dequant_scale_q_norm: [0])."""
    for name, value in settings.items():
        if value != V3_DEFAULTS[name]:
            raise MlaError(f"{name}={value!r} is not implemented on the simulator (reserved or quantisation; "
                           f"{V3_DEFAULTS[name]!r} is)")
    for name, tensor in (("actual_seq_len", actual_seq_len), ("k_nope_clip_alpha", k_nope_clip_alpha)):
        if tensor is not None:
            raise MlaError(f"{name} is reserved by CANN (pass None); not implemented on the simulator")
    if args[11] is None:
        raise MlaError("cache_index is required here (the PA_BSND cache rows)")
    order = (0, 1, 2, 3, 4, 5, 6, 7, 8, 11, 9, 10)  # v3 puts cache_index after the caches
    outs = run(given_quant, tuple(args[i] for i in order), query_rope_dtype=torch.bfloat16, **kwargs)
    empty = (torch.empty([0], dtype=torch.float32), torch.empty([0], dtype=args[2].dtype),
             torch.empty([0], dtype=torch.float32))
    return outs[0].to(torch.bfloat16), outs[1], outs[2], outs[3], *empty


@ge_kernel("MlaPrologV3")
def mla_prolog_v3(token_x, weight_dq, weight_uq_qr, weight_uk, weight_dkv_kr, rmsnorm_gamma_cq, rmsnorm_gamma_ckv,
                  rope_sin, rope_cos, kv_cache, kr_cache, cache_index, dequant_scale_x, dequant_scale_w_dq,
                  dequant_scale_w_uq_qr, dequant_scale_w_dkv_kr, quant_scale_ckv, quant_scale_ckr, smooth_scales_cq,
                  actual_seq_len, k_nope_clip_alpha, *, rmsnorm_epsilon_cq, rmsnorm_epsilon_ckv, cache_mode,
                  query_norm_flag, weight_quant_mode, kv_cache_quant_mode, query_quant_mode, ckvkr_repo_mode,
                  quant_scale_repo_mode, tile_size, qc_qr_scale, kc_scale):
    settings = dict(query_norm_flag=query_norm_flag, weight_quant_mode=weight_quant_mode,
                    kv_cache_quant_mode=kv_cache_quant_mode, query_quant_mode=query_quant_mode,
                    ckvkr_repo_mode=ckvkr_repo_mode, quant_scale_repo_mode=quant_scale_repo_mode, tile_size=tile_size)
    try:
        return run_v3((dequant_scale_x, dequant_scale_w_dq, dequant_scale_w_uq_qr, dequant_scale_w_dkv_kr,
                       quant_scale_ckv, quant_scale_ckr, smooth_scales_cq),
                      (token_x, weight_dq, weight_uq_qr, weight_uk, weight_dkv_kr, rmsnorm_gamma_cq, rmsnorm_gamma_ckv,
                       rope_sin, rope_cos, kv_cache, kr_cache, cache_index),
                      actual_seq_len=actual_seq_len, k_nope_clip_alpha=k_nope_clip_alpha, settings=settings,
                      eps_cq=rmsnorm_epsilon_cq, eps_ckv=rmsnorm_epsilon_ckv, cache_mode=cache_mode,
                      qc_qr_scale=qc_qr_scale, kc_scale=kc_scale)
    except MlaError as error:
        refuse(str(error))

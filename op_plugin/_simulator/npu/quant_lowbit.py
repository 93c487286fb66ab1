"""CPU reference kernels of torch_npu's quantisers with fp8 and int4 outputs: npu_quant_max (fp8),
npu_rotate_quant (int8 / int4 packed into int32) and npu_kronecker_quant (int4 packed into int32).

Semantics from torch_npu's ``_op_plugin_docs.py`` and ops-nn (``quant/quant_max``, ``quant/grouped_quant_max``,
``matmul/rotate_quant``, ``quant/flat_quant``: READMEs and the kernels' arithmetic); the formats (fp8 saturating
cast, int4 nibble order) and their sources are in ``formats.py``. See docs/torch-npu-ops.md, "fp8 and int4
outputs", for every rounding point and refusal.
"""
from __future__ import annotations

import torch

from .formats import FP8_BY_NUMBER, HIFLOAT8_NUMBER, pack_int4, refuse_hifloat8, saturate_int4, to_fp8

_HALF = (torch.float16, torch.bfloat16)
_FLOATS = (torch.float32, torch.float16, torch.bfloat16)
_MX_NUMBERS = {291: "float8_e5m2", 292: "float8_e4m3fn", 296: "float4_e2m1fn_x2", 23: "float8_e5m2",
               24: "float8_e4m3fn"}


def _fail(op, message, kind=ValueError):
    raise kind(f"npu::{op}: {message}")


def _fp8_dtype(op, dst_dtype, round_mode):
    if isinstance(dst_dtype, torch.dtype) and dst_dtype in (torch.float8_e5m2, torch.float8_e4m3fn):
        out = dst_dtype
    elif int(dst_dtype) == HIFLOAT8_NUMBER:
        refuse_hifloat8(op, "dst_dtype")
    elif int(dst_dtype) in FP8_BY_NUMBER:
        out = FP8_BY_NUMBER[int(dst_dtype)]
    else:
        _fail(op, f"dst_dtype={dst_dtype} is not torch.float8_e5m2, torch.float8_e4m3fn or torch_npu.hifloat8")
    if round_mode != "rint":
        _fail(op, f"round_mode={round_mode!r}: float8_e5m2/float8_e4m3fn outputs take 'rint' only (torch_npu's doc)")
    return out


def npu_quant_max(x, scale, *, round_mode="rint", dst_dtype=291, group_list=None):
    """y = cast(x * scale, fp8) (float32 product, saturating round-half-even), amax = max|x| in x's dtype; with a
    group_list of more than one element, rows group_list[g-1]:group_list[g] use scale[g] and give amax[g]."""
    op = "npu_quant_max"
    out = _fp8_dtype(op, dst_dtype, round_mode)
    if x.dtype not in _FLOATS:
        _fail(op, f"x has dtype {x.dtype}; torch_npu takes float32, float16, bfloat16", TypeError)
    if not 1 <= x.dim() <= 8 or x.numel() == 0:
        _fail(op, f"x of shape {tuple(x.shape)}: 1 to 8 dims and not empty (CANN's amax of nothing is not documented)")
    if scale.dtype != torch.float32 or scale.dim() != 1:
        _fail(op, f"scale must be a 1-D float32 tensor, got {scale.dtype} {tuple(scale.shape)}")
    if x.isnan().any():
        _fail(op, "x holds NaN: CANN does not document the amax of a NaN")
    wide = x.float()
    if group_list is None or group_list.numel() <= 1:   # torch_npu's doc: one group is no grouping
        if scale.shape[0] != 1:
            _fail(op, f"scale has {scale.shape[0]} values; without groups it takes one")
        return to_fp8(wide * scale[0], out), x.abs().max().reshape(1)
    bounds = group_list.tolist()
    if not 2 <= x.dim() <= 8 or scale.shape[0] != len(bounds):
        _fail(op, f"with {len(bounds)} groups x needs 2+ dims and scale {len(bounds)} values, got x "
                  f"{tuple(x.shape)}, scale {tuple(scale.shape)}")
    if sorted(bounds) != bounds or bounds[0] < 0 or bounds[-1] != x.shape[0]:
        _fail(op, f"group_list {bounds} must rise to x's dim 0 ({x.shape[0]}) (cumulative row counts)")
    y = torch.empty(x.shape, dtype=out)
    amax = torch.zeros(len(bounds), dtype=x.dtype)   # an empty group's amax stays 0, as the kernel starts it
    start = 0
    for group, end in enumerate(bounds):
        y[start:end] = to_fp8(wide[start:end] * scale[group], out)
        if end > start:
            amax[group] = x[start:end].abs().max()
        start = end
    return y, amax


def _cube(a, b, dtype):
    """A cube matmul: float32 accumulation written as `dtype` (the fixpipe's rounding taken as half to even)."""
    return (a.float() @ b.float()).to(dtype)


def _int_dst(op, dst_dtype):
    """'int8' or 'int4' for npu_rotate_quant's dst_dtype (None: int8)."""
    if dst_dtype is None or dst_dtype in (1, torch.int8, torch.qint8):
        return "int8"
    if dst_dtype in (16, torch.quint4x2):
        return "int4"
    if not isinstance(dst_dtype, torch.dtype) and int(dst_dtype) in _MX_NUMBERS:
        _fail(op, f"dst_dtype={dst_dtype} ({_MX_NUMBERS[int(dst_dtype)]}): MX outputs (Ascend 950) are not emulated",
              NotImplementedError)
    _fail(op, f"dst_dtype={dst_dtype} is not torch.int8 or torch.quint4x2 (A2/A3)")


def npu_rotate_quant(x, rotation, *, alpha=None, dst_dtype=None, axis=-1, round_mode="rint", scale_alg=0,
                     dst_type_max=0.0, transpose_y=False):
    """A2/A3: Y = (x blocks of K) @ rotation, in x's dtype; per row s = max|Y| / C (C 127 int8, 7 int4),
    y = rint(Y * (C / max|Y|)); int4 values packed 8 per int32 (formats.pack_int4)."""
    op = "npu_rotate_quant"
    kind = _int_dst(op, dst_dtype)
    if x.dtype not in _HALF or rotation.dtype != x.dtype:
        _fail(op, f"x ({x.dtype}) and rotation ({rotation.dtype}) must share float16 or bfloat16", TypeError)
    if alpha is not None or scale_alg != 0 or dst_type_max != 0.0 or transpose_y:
        _fail(op, "alpha, scale_alg, dst_type_max, transpose_y take None, 0, 0.0, False on A2/A3 (torch_npu's doc)")
    if round_mode != "rint":
        _fail(op, f"round_mode={round_mode!r}: the A2/A3 kernel rounds half to even whatever round_mode says; only "
                  "'rint' is emulated", NotImplementedError)
    if x.dim() != 2 or axis not in (-1, 1):
        _fail(op, f"x must be 2-D (got {tuple(x.shape)}) and axis -1 or 1 (got {axis}) on A2/A3")
    m, n = x.shape
    k = rotation.shape[0]
    if rotation.dim() != 2 or rotation.shape[1] != k or n % k or n % 8:
        _fail(op, f"rotation {tuple(rotation.shape)} must be [K, K] with K dividing x's last dim {n}, a multiple of 8")
    blocks = _cube(x.reshape(m, n // k, k), rotation, x.dtype).reshape(m, n).float()
    if not blocks.isfinite().all():
        _fail(op, "x @ rotation overflows x's dtype: the per-row scale is then undefined")
    top = 127.0 if kind == "int8" else 7.0
    peaks = blocks.abs().amax(dim=1)
    if (peaks == 0).any():
        _fail(op, "a row of x @ rotation is all zeros: CANN divides by its max (0), undefined")
    levels = torch.round(blocks * (torch.tensor(top) / peaks)[:, None])
    scale = peaks * (torch.tensor(1.0) / torch.tensor(top))   # 0-d tensors: IEEE division
    if kind == "int8":
        return levels.clamp(-128, 127).to(torch.int8), scale
    return pack_int4(saturate_int4(levels)), scale


def npu_kronecker_quant(x, kronecker_p1, kronecker_p2, clip_ratio=None, dst_dtype=None, dst_type_max=None):
    """A2/A3 (ops-nn FlatQuant): per k, x'' = p1 @ (x[k] @ p2), x[k] @ p2 written in x's dtype and x'' in float16;
    quant_scale[k] = max|x''| * clip / 7, out = rint(float16(x'' * ((7 / clip) / max|x''|))) saturated to int4,
    packed 8 per int32 [K, M, N / 8]."""
    op = "npu_kronecker_quant"
    if dst_dtype not in (None, 3, torch.int32):
        kind = NotImplementedError if dst_dtype in (296, getattr(torch, "float4_e2m1fn_x2", None)) else ValueError
        _fail(op, f"dst_dtype={dst_dtype}: only torch.int32 (int4 packed 8 per int32) is emulated", kind)
    if dst_type_max not in (None, 0.0):
        _fail(op, f"dst_type_max={dst_type_max} applies to float4_e2m1 outputs only")
    clip = torch.tensor(1.0 if clip_ratio is None else clip_ratio, dtype=torch.float32)
    if not 0.0 < clip.item() <= 1.0:
        _fail(op, f"clip_ratio={clip_ratio} is outside (0, 1]")
    if x.dtype not in _HALF or kronecker_p1.dtype != x.dtype or kronecker_p2.dtype != x.dtype:
        _fail(op, f"x, kronecker_p1, kronecker_p2 must share float16 or bfloat16 (got {x.dtype}, "
                  f"{kronecker_p1.dtype}, {kronecker_p2.dtype})", TypeError)
    if x.dim() != 3 or kronecker_p1.shape != (x.shape[1],) * 2 or kronecker_p2.shape != (x.shape[2],) * 2:
        _fail(op, f"x {tuple(x.shape)} must be [K, M, N], kronecker_p1 [M, M] and kronecker_p2 [N, N] (got "
                  f"{tuple(kronecker_p1.shape)}, {tuple(kronecker_p2.shape)})")
    if x.shape[2] % 8:
        _fail(op, f"x's last dim {x.shape[2]} must be a multiple of 8 (8 int4 per int32)")
    right = _cube(x, kronecker_p2, x.dtype)
    product = kronecker_p1.float() @ right.float()
    if not product.isfinite().all() or (product.abs() > torch.finfo(torch.float16).max).any():
        _fail(op, "kronecker_p1 @ x @ kronecker_p2 leaves float16's range (the kernel writes it as float16)")
    halves = product.to(torch.float16).float()
    words, scales = [], []
    seven = torch.tensor(7.0)
    for block in halves:   # one quantisation per k, as the kernel's loop over K
        peak = block.abs().max()
        multiplier = (seven / clip) / peak if peak != 0 else seven
        scales.append(peak * clip / seven)
        levels = torch.round((block * multiplier).to(torch.float16).float())
        words.append(pack_int4(saturate_int4(levels)))
    return torch.stack(words), torch.stack(scales)


KERNELS: dict = {
    "npu_quant_max": npu_quant_max,
    "npu_rotate_quant": npu_rotate_quant,
    "npu_kronecker_quant": npu_kronecker_quant,
}

"""CPU reference kernels of torch_npu's fused quantisation ops (registered through quant.KERNELS):
npu_dequant_swiglu_quant, npu_add_rms_norm_dynamic_quant, npu_add_rms_norm_quant, npu_anti_quant.

Semantics from torch_npu's ``_op_plugin_docs.py`` and hicann ops-nn (``quant/dequant_swiglu_quant``,
``norm/add_rms_norm_dynamic_quant``, ``norm/add_rms_norm_quant`` READMEs and aclnn docs), in float32:

* dequant-SwiGLU-quant: ``x * weight_scale * activation_scale`` (int32 x), SwiGLU on the halves
  (activate_left: swish of the first half, else of the second), then per-token dynamic quantisation
  ``scale = rowmax|out · quant_scale| / 127``, ``y = round(out · quant_scale / scale)`` with round_mode
  0 rint (half to even, the default), 1 round (half away from zero), 2 floor, 3 ceil, 4 trunc (the A2/A3
  kernel, dequant_swiglu_quant.h: Swish as x / (1 + exp(-x)), scale = max · float32(1/127)). Static
  quantisation, a bias and swiglu_mode != 0 are refused: CANN's docs do not give their formulas/order.
* add-RMS-norm quant ops, with each kernel's precision (ops-nn ``op_kernel`` sources): ``x = x1 + x2``
  (x_out its rounding), ``y = x * rstd * gamma (+ beta)``, ``rstd = 1 / sqrt(sum(x^2) * (1/n) + eps)``;
  dynamic: ``y·s * (127 / rowmax|y·s|)`` rounded half to even, scale ``1 / (127 / rowmax)``; static:
  ``rint(y / scales + zero_points)`` (``y * scales`` without div_mode); int8 saturating. An output CANN
  marks invalid (y2/scale2 with no second smooth scale, y2 with no scales2) is returned empty (dynamic,
  as the wheel's Meta) or as zeros (static: the wheel's Meta gives it x's shape; CANN leaves its contents
  undefined).
* anti-quant (ops-nn ``quant/ascend_anti_quant_v2`` aclnn doc): ``y = dst_dtype((x + offset) * scale)`` in
  float32, int8 x, scale/offset of one element or one per last-axis element; int4 (packed in int32),
  hifloat8 and fp8 inputs are refused by name (not emulated).
* trans-quant-param (ops-nn ``quant/trans_quant_param_v2`` README): int64 ``(bits(scale) & 0xFFFFE000) |
  (1 << 46)``, and with an offset ``(clamp(round(offset), -256, 255) & 0x1FF) << 37``. round_mode 1 (rounding
  the bits to the top 19 instead of truncating) is refused: the README does not give the rounding rule
  bit-exactly; so is an offset exactly halfway between integers (the README's Round does not give the tie).
"""
from __future__ import annotations

import torch

from .formats import pack_int4, unpack_int4
from .quant import _fail, _int_out, saturate, scalar_dtype

_HALF = (torch.float16, torch.bfloat16)
# an fp8 x's src_dtype: the dtype itself, torch's ScalarType number or torch_npu's
_FP8_NUMBERS = {torch.float8_e5m2: (23, 291), torch.float8_e4m3fn: (24, 292)}
_INV_127 = torch.tensor(1.0 / 127.0, dtype=torch.float32)
_ROUND_MODES = {0: torch.round, 1: lambda v: torch.sign(v) * torch.floor(v.abs() + 0.5), 2: torch.floor,
                3: torch.ceil, 4: torch.trunc}


def _per_token(op, wide):
    absmax = wide.abs().amax(dim=-1, keepdim=True)
    if bool((absmax == 0).any()):
        _fail(op, "a token (row) of zeros: its scale is 0 and round(0 / 0) is left undefined by CANN; refused")
    return absmax * _INV_127   # dequant_swiglu_quant.h: max * float32(1 / 127); y = out / scale


def _group_rows(op, rows, group_index, what):
    """Row -> group number for count-mode group_index (tokens per group, in order)."""
    counts = [int(v) for v in group_index.reshape(-1).tolist()]
    if any(c < 0 for c in counts) or sum(counts) != rows:
        _fail(op, f"{what} {counts} must be non-negative token counts summing to {rows} (rows past the sum are "
                  "left unwritten by CANN)")
    return torch.repeat_interleave(torch.arange(len(counts)), torch.tensor(counts, dtype=torch.int64))


def npu_dequant_swiglu_quant(x, *, weight_scale=None, activation_scale=None, bias=None, quant_scale=None,
                             quant_offset=None, group_index=None, activate_left=False, quant_mode=0, dst_type=None,
                             round_mode=None, activate_dim=None, swiglu_mode=0, clamp_limit=7.0, glu_alpha=1.702,
                             glu_bias=1.0):
    op = "npu_dequant_swiglu_quant"
    if quant_mode != 1:
        _fail(op, f"quant_mode={quant_mode} (static): CANN's docs do not give the static formula; use quant_mode=1",
              NotImplementedError)
    if swiglu_mode != 0 or bias is not None or quant_offset is not None:
        _fail(op, "swiglu_mode != 0, bias and quant_offset are not simulated (CANN's docs leave their order open)",
              NotImplementedError)
    if activate_dim not in (None, -1, x.dim() - 1):
        _fail(op, f"activate_dim={activate_dim}: only the last dim is simulated", NotImplementedError)
    if _int_out(op, "dst_type", scalar_dtype(op, "dst_type", dst_type, torch.int8)) != torch.int8:
        _fail(op, "y is int8 only")
    if int(round_mode or 0) not in _ROUND_MODES:
        _fail(op, f"round_mode={round_mode} is not 0-4 (rint, round, floor, ceil, trunc)")
    if x.dim() != 2 or x.shape[-1] % 2:
        _fail(op, f"x must be 2-D (tokens, 2H) with an even last dim; got {tuple(x.shape)}")
    groups = None if group_index is None else _group_rows(op, x.shape[0], group_index, "group_index")
    if x.dtype == torch.int32:
        if weight_scale is None or activation_scale is None:
            _fail(op, "an int32 x needs weight_scale and activation_scale")
        ws = weight_scale.float().reshape(-1, x.shape[-1])
        wide = x.float() * (ws[groups] if groups is not None else ws) * activation_scale.float().reshape(-1, 1)
    elif x.dtype in _HALF:
        if weight_scale is not None or activation_scale is not None:
            _fail(op, "weight_scale/activation_scale go with an int32 x only")
        wide = x.float()
    else:
        _fail(op, f"x has dtype {x.dtype}; torch_npu takes int32, float16 or bfloat16", TypeError)
    first, second = wide.chunk(2, dim=-1)
    gate, linear = (first, second) if activate_left else (second, first)
    out = gate / (1.0 + torch.exp(-gate)) * linear   # the kernel's Swish: x / (1 + exp(-x))
    if quant_scale is not None:
        qs = quant_scale.float().reshape(-1, out.shape[-1])
        out = out * (qs[groups] if groups is not None else qs)
    scale = _per_token(op, out)
    y = saturate(_ROUND_MODES[int(round_mode or 0)](out / scale), torch.int8)
    return y, scale.squeeze(-1)


def _check_norm_inputs(op, x1, x2, gamma):
    for name, tensor in (("x1", x1), ("x2", x2), ("gamma", gamma)):
        if tensor.dtype not in _HALF:
            _fail(op, f"{name} has dtype {tensor.dtype}; torch_npu takes float16 or bfloat16", TypeError)
    if x2.shape != x1.shape:
        _fail(op, f"x2 of shape {tuple(x2.shape)} is not x1's {tuple(x1.shape)} (CANN does not broadcast them)")
    if gamma.shape != x1.shape[-1:]:
        _fail(op, f"gamma of shape {tuple(gamma.shape)} is not ({x1.shape[-1]},)")


def _rstd(wide, epsilon):
    """1 / sqrt(sum(x^2) * (1/n) + eps), as both A2/A3 kernels scale the square sum."""
    return 1.0 / torch.sqrt((wide * wide).sum(dim=-1, keepdim=True) * (1.0 / wide.shape[-1]) + epsilon)


def _add_rms_for_dynamic_quant(op, x1, x2, gamma, beta, epsilon):
    """ops-nn add_rms_norm_dynamic_quant (A2/A3): the float32 sum is normalised (x_out is its rounding), then
    x * rstd * gamma (+ beta), all in float32."""
    _check_norm_inputs(op, x1, x2, gamma)
    wide = x1.float() + x2.float()
    y = wide * _rstd(wide, epsilon) * gamma.float()
    return wide.to(x1.dtype), (y if beta is None else y + beta.float())


def _add_rms_for_quant(op, x1, x2, gamma, beta, epsilon):
    """ops-nn add_rms_norm_quant (A2/A3, per-channel scales): float16 adds and multiplies gamma in float16
    (x * rstd rounded, then the product rounded); bfloat16 normalises the float32 sum (its bfloat16 rounding
    when beta is given) and multiplies gamma in float32; beta is added in float32."""
    _check_norm_inputs(op, x1, x2, gamma)
    if x1.dtype == torch.float16:
        x = (x1.float() + x2.float()).half()
        y = ((x.float() * _rstd(x.float(), epsilon)).half().float() * gamma.float()).half().float()
    else:
        wide = x1.float() + x2.float()
        x = wide.to(x1.dtype)
        normed = x.float() if beta is not None else wide
        y = normed * _rstd(normed, epsilon) * gamma.float()
    return x, (y if beta is None else y + beta.float())


def npu_add_rms_norm_dynamic_quant(x1, x2, gamma, *, smooth_scale1=None, smooth_scale2=None, beta=None,
                                   epsilon=1e-6, output_mask=None, y_dtype=None):
    op = "npu_add_rms_norm_dynamic_quant"
    int4 = y_dtype in (16, 285, torch.quint4x2)   # int4, packed 8 per int32; the kernel's C is 7 (127 for int8)
    if int4 and x1.shape[-1] % 8:
        _fail(op, f"int4 outputs need x1's last dim to be a multiple of 8, got {tuple(x1.shape)}")
    if not int4 and _int_out(op, "y_dtype", scalar_dtype(op, "y_dtype", y_dtype, torch.int8)) != torch.int8:
        _fail(op, "y1/y2 are int8 or int4 (torch.quint4x2) only")
    x, y = _add_rms_for_dynamic_quant(op, x1, x2, gamma, beta, epsilon)
    if output_mask:
        want = [bool(output_mask[0]), bool(output_mask[1])]
    else:
        want = [True, smooth_scale1 is not None and smooth_scale2 is not None]
    outputs = []
    for wanted, smooth in zip(want, (smooth_scale1, smooth_scale2), strict=True):
        if not wanted:
            outputs.append((torch.empty(0, dtype=torch.int32 if int4 else torch.int8),
                            torch.empty(0, dtype=torch.float32)))
            continue
        wide = y * smooth.float() if smooth is not None else y
        absmax = wide.abs().amax(dim=-1, keepdim=True)
        if bool((absmax == 0).any()):
            _fail(op, "a token (row) of zeros: C / 0 is left undefined by CANN; refused")
        # the kernel multiplies by C / max and writes 1 / (C / max) as the scale (0-d tensors: IEEE divisions)
        factor = torch.tensor(7.0 if int4 else 127.0) / absmax
        levels = torch.round(wide * factor)
        quantised = pack_int4(levels.clamp(-8, 7).to(torch.int8)) if int4 else saturate(levels, torch.int8)
        outputs.append((quantised, (torch.tensor(1.0) / factor).squeeze(-1)))
    (y1, scale1), (y2, scale2) = outputs
    return y1, y2, x, scale1, scale2


def npu_add_rms_norm_quant(x1, x2, gamma, scales1, zero_points1=None, beta=None, scales2=None, zero_points2=None, *,
                           axis=-1, epsilon=1e-6, div_mode=True, dst_type=None):
    op = "npu_add_rms_norm_quant"
    if axis != -1:
        _fail(op, f"axis {axis}: only -1 (the last dim) is taken, as torch_npu's Meta says")
    if _int_out(op, "dst_type", scalar_dtype(op, "dst_type", dst_type, torch.int8)) != torch.int8:
        _fail(op, "y1/y2 are int8 only")
    x, y = _add_rms_for_quant(op, x1, x2, gamma, beta, epsilon)
    outs = []
    for scales, zero_points in ((scales1, zero_points1), (scales2, zero_points2)):
        if scales is None:
            outs.append(torch.zeros(x.shape, dtype=torch.int8))
            continue
        if div_mode and bool((scales == 0).any()):
            _fail(op, "a scale of 0 with div_mode=True: CANN requires non-zero scales (y / 0 is undefined)")
        value = y / scales.float() if div_mode else y * scales.float()
        if zero_points is not None:
            value = value + zero_points.float()
        outs.append(saturate(torch.round(value), torch.int8))
    return outs[0], outs[1], x


def npu_anti_quant(x, scale, *, offset=None, dst_dtype=None, src_dtype=None):
    op = "npu_anti_quant"
    if x.dtype == torch.int32:   # int4 packed 8 per int32 (formats.unpack_int4); src_dtype says so or is left out
        if src_dtype not in (None, 16, 285, torch.quint4x2) or x.dim() == 0:
            _fail(op, f"int32 x carries int4 (src_dtype torch.quint4x2), got src_dtype={src_dtype}, shape "
                      f"{tuple(x.shape)}")
        x = unpack_int4(x)
    elif x.dtype in (torch.float8_e5m2, torch.float8_e4m3fn):
        if src_dtype is not None and src_dtype not in (x.dtype, *_FP8_NUMBERS[x.dtype]):
            _fail(op, f"src_dtype={src_dtype} does not match x's dtype {x.dtype} (CANN requires them to agree)")
        if scale.dtype != torch.float32 or (offset is not None and offset.dtype != torch.float32):
            _fail(op, "fp8 x takes float32 scale and offset (torch_npu's Meta)")
    elif x.dtype != torch.int8:
        _fail(op, f"x of dtype {x.dtype}: int8, int4 packed in int32 and fp8 x are simulated (hifloat8 is not)",
              NotImplementedError)
    elif scalar_dtype(op, "src_dtype", src_dtype, torch.int8) != torch.int8:
        _fail(op, f"src_dtype={src_dtype} does not match x's dtype int8 (CANN requires them to agree)")
    out_dtype = scalar_dtype(op, "dst_dtype", dst_dtype, torch.float16)
    if out_dtype not in _HALF:
        _fail(op, f"dst_dtype={out_dtype}: CANN's AscendAntiQuant writes float16 or bfloat16 only")
    width = x.shape[-1] if x.dim() else 1
    for what, tensor in (("scale", scale), ("offset", offset)):
        if tensor is None:
            continue
        if tensor.dtype not in (torch.float32, torch.bfloat16):
            _fail(op, f"{what} of dtype {tensor.dtype}: CANN takes float32 or bfloat16")
        if tensor.dim() != 1 or tensor.numel() not in (1, width):
            _fail(op, f"{what} of shape {tuple(tensor.shape)}: must be 1-D with 1 or x.shape[-1]={width} elements")
    if offset is not None and (offset.dtype, offset.shape) != (scale.dtype, scale.shape):
        _fail(op, "offset must have scale's dtype and shape (CANN's constraint)")
    value = x.float() if offset is None else x.float() + offset.float()
    return (value * scale.float()).to(out_dtype)   # aclnnAscendAntiQuant: y = dst((x + offset) * scale)


def npu_trans_quant_param(scale, offset=None, round_mode=0):
    op = "npu_trans_quant_param"
    if scale.dtype != torch.float32 or (offset is not None and offset.dtype != torch.float32):
        _fail(op, "scale and offset must be float32 (CANN's TransQuantParamV2)")
    if round_mode not in (0, None):
        _fail(op, f"round_mode={round_mode}: only 0 (truncation to the top 19 bits) is simulated; CANN's README does "
                  "not give mode 1's rounding bit-exactly", NotImplementedError)
    if not (scale.dim() == 1 or (scale.dim() == 2 and scale.shape[0] == 1)) or (
            offset is not None and (offset.dim() != 1 if scale.dim() == 1 else offset.shape != scale.shape)):
        given = None if offset is None else tuple(offset.shape)
        _fail(op, f"scale {tuple(scale.shape)} must be (n,) or (1, n), offset {given}"
                  " (n,) or (1,) beside an (n,) scale and scale's shape beside a (1, n) one (torch_npu's Meta)")
    shape = torch.broadcast_shapes(scale.shape, offset.shape) if offset is not None else scale.shape
    packed = (scale.view(torch.int32).to(torch.int64) & _FP19_BITS) | _QUANT_FLAG_BIT
    packed = packed.expand(shape)
    if offset is not None:
        if bool((offset.frac().abs() == 0.5).any()):
            _fail(op, "an offset exactly halfway between integers: CANN's README does not say how Round breaks the tie")
        nine = torch.round(offset).clamp(-256, 255).to(torch.int64) & 0x1FF
        packed = (packed & 0x4000FFFFFFFF) | (nine << 37)
    return packed.contiguous()


_FP19_BITS, _QUANT_FLAG_BIT = 0xFFFFE000, 1 << 46


KERNELS = {
    "npu_anti_quant": npu_anti_quant,
    "npu_trans_quant_param": npu_trans_quant_param,
    "npu_dequant_swiglu_quant": npu_dequant_swiglu_quant,
    "npu_add_rms_norm_dynamic_quant": npu_add_rms_norm_dynamic_quant,
    "npu_add_rms_norm_quant": npu_add_rms_norm_quant,
}

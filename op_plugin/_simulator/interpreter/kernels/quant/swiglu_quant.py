"""Quantisation fused with SwiGLU (CANN ops-nn ``quant/dequant_swiglu_quant``, ``quant/swiglu_mx_quant``):
DequantSwigluQuant and SwigluMxQuant.

* DequantSwigluQuant (ops-nn README / aclnn doc, not op_plugin's torch_npu reference kernels; float32, float-to-int8
  casts saturating): dequantOut = x · weight_scale · activation_scale (int32 x; weight_scale per group with
  count-mode group_index), SwiGLU on the halves (activate_left: Swish of the first), then the dynamic
  quantisation scale = rowmax|out · quant_scale| / 127, y = round_mode(out · quant_scale / scale)
  ("rint" half to even, "round" half away from zero, floor, ceil, trunc). A bias (int32 x only; [2H], or
  [groups, 2H] with group_index, a row per group) is added where CANN's golden (ops-nn
  quant/dequant_swiglu_quant/tests/st/aclnnDequantSwigluQuantV2/executor_aclnnDequantSwigluQuantV2.py,
  ``golden``) and the A2 kernel (op_kernel/dequant_swiglu_quant.h ``ComputeDequant``) add it: an int32 bias to x
  in int32 before the scales, a float32/float16/bfloat16 one in float32 after them. quant_mode "static",
  quant_offset and swiglu_mode != 0 are refused: the docs do not give those formulas or orders.
* SwigluMxQuant (aclnnSwigluMxQuant doc, arch35 kernel): in float32, swiglu_mode 0 ``a / (1 + exp(-a)) * b`` with
  a the right half along activate_dim (the left with activate_left), b the other; swiglu_mode 1 (last dim only)
  ``g = min(x[..., 0::2], clamp_limit)``, ``g / (1 + exp(-glu_alpha * g)) * (clamp(x[..., 1::2], +-clamp_limit)
  + glu_bias)``; the result is rounded to x's dtype (RINT) and DynamicMxQuant'ed along ``axis`` in blocks of 32
  (``formats.py``). group_index (count mode, 2-D x, activate_dim -1, counts summing to the rows): no effect with
  axis -1; with axis -2 blocks restart at each group and the scale pairs of the groups follow one another (the
  kernel's cumulative ceil(rows / 64)), the rest of mxscale is zeros (unwritten by CANN). Other group_index uses
  are refused.
"""
from __future__ import annotations

import torch

from ...registry import ge_kernel, refuse
from ... import lowbit_formats as mx
from ..common import require_int8, saturate_int8
from ...lowbit_formats import as_e8m0, as_ge, check_fp4_last_dim, check_modes, mx_along

_ROUNDING = {"rint": torch.round, "round": lambda v: torch.sign(v) * torch.floor(v.abs() + 0.5),
             "floor": torch.floor, "ceil": torch.ceil, "trunc": torch.trunc}


def _rowmax_scale(wide):
    absmax = wide.abs().amax(dim=-1, keepdim=True)
    if bool((absmax == 0).any()):
        refuse("a row of zeros: its scale is 0 and round(0 / 0) is not defined by CANN")
    return absmax * torch.tensor(1.0 / 127.0, dtype=torch.float32)   # Muls(max, DYNAMIC_QUANT_FACTOR)


def _bias_rows(bias, x, group_index, rows):
    """The bias row of each row of x: [2H] (or [1, 2H]) for all, [groups, 2H] one per group_index entry."""
    if bias.dtype not in (torch.int32, torch.float32, torch.float16, torch.bfloat16):
        refuse(f"bias has dtype {bias.dtype}; CANN takes int32, float32, float16 or bfloat16")
    width, groups = x.shape[-1], (1 if group_index is None else group_index.numel())
    if list(bias.shape) == [width] and groups == 1:
        return bias.reshape(1, width)
    if list(bias.shape) != [groups, width]:
        refuse(f"bias {list(bias.shape)} must be [{width}] or [{groups}, {width}] ([groups, 2H] with group_index)")
    return bias if rows is None else bias[rows]


def _groups(group_index, rows):
    counts = [int(v) for v in group_index.reshape(-1).tolist()]
    if any(c < 0 for c in counts) or sum(counts) != rows:
        refuse(f"group_index {counts} must be token counts summing to {rows} (rows past the sum are unwritten)")
    return torch.repeat_interleave(torch.arange(len(counts)), torch.tensor(counts, dtype=torch.int64))


@ge_kernel("DequantSwigluQuant", accepts={"x": (torch.int32, torch.float16, torch.bfloat16), **{
    name: (torch.float32,) for name in ("weight_scale", "activation_scale", "quant_scale", "quant_offset")}})
def dequant_swiglu_quant(x, weight_scale, activation_scale, bias, quant_scale, quant_offset, group_index, *,
                         activate_left, quant_mode, dst_type, round_mode, activate_dim, swiglu_mode, clamp_limit,
                         glu_alpha, glu_bias):
    require_int8(dst_type)
    if quant_mode != "dynamic":
        refuse(f"quant_mode={quant_mode!r}: only 'dynamic' is simulated (the static formula is not documented)")
    if swiglu_mode != 0 or quant_offset is not None:
        refuse("swiglu_mode != 0 and quant_offset are not simulated (their order is not documented)")
    if activate_dim not in (-1, x.dim() - 1) or x.dim() != 2 or x.shape[-1] % 2:
        refuse(f"x {list(x.shape)} with activate_dim {activate_dim}: a 2-D x activated on its even last dim only")
    if round_mode not in _ROUNDING:
        refuse(f"round_mode={round_mode!r} is not rint, round, floor, ceil or trunc")
    rows = None if group_index is None else _groups(group_index, x.shape[0])
    bias_rows = None if bias is None else _bias_rows(bias, x, group_index, rows)
    wide = x.float()
    if x.dtype == torch.int32:
        if weight_scale is None or activation_scale is None:
            refuse("an int32 x needs weight_scale and activation_scale")
        if bias_rows is not None and bias.dtype == torch.int32:   # int32 add (wrapping), then the int -> float cast
            wide = (x + bias_rows).float()
        per_channel = weight_scale.float().reshape(-1, x.shape[-1])
        wide = wide * (per_channel if rows is None else per_channel[rows]) * activation_scale.float().reshape(-1, 1)
        if bias_rows is not None and bias.dtype != torch.int32:
            wide = wide + bias_rows.float()
    elif weight_scale is not None or activation_scale is not None or bias is not None:
        refuse("weight_scale/activation_scale/bias go with an int32 x only")
    half = x.shape[-1] // 2
    a, b = wide[:, :half], wide[:, half:]
    gate, linear = (a, b) if activate_left else (b, a)
    out = gate / (1.0 + torch.exp(-gate)) * linear   # Swish as the kernel computes it
    if quant_scale is not None:
        smooth = quant_scale.float().reshape(-1, half)
        out = out * (smooth if rows is None else smooth[rows])
    scale = _rowmax_scale(out)
    return saturate_int8(_ROUNDING[round_mode](out / scale)), scale.squeeze(-1)

_HALF = (torch.float16, torch.bfloat16)


def swiglu_out(x, activate_dim, activate_left, swiglu_mode, clamp_limit, glu_alpha, glu_bias):
    """SwigluMxQuant's activation, rounded to x's dtype."""
    if x.dtype not in _HALF or not 2 <= x.dim() <= 7:
        refuse(f"x must be float16/bfloat16 of 2-7 dims; got {x.dtype}{list(x.shape)}")
    if activate_dim not in (-1, -2, x.dim() - 1, x.dim() - 2):
        refuse(f"activate_dim={activate_dim} is not the last or second-to-last dim")
    dim = activate_dim % x.dim()
    if x.shape[dim] % 2:
        refuse(f"x's activate_dim size {x.shape[dim]} must be even")
    wide = x.float()
    if swiglu_mode == 0:
        first, second = wide.chunk(2, dim=dim)
        a, b = (first, second) if activate_left else (second, first)
        out = a / (1.0 + torch.exp(-a)) * b
    elif swiglu_mode == 1:
        if dim != x.dim() - 1:
            refuse("swiglu_mode=1 takes the last dim as activate_dim")
        glu = torch.clamp(wide[..., 0::2], max=float(clamp_limit))
        linear = torch.clamp(wide[..., 1::2], -float(clamp_limit), float(clamp_limit)) + float(glu_bias)
        out = glu / (1.0 + torch.exp(glu * -float(glu_alpha))) * linear
    else:
        refuse(f"swiglu_mode={swiglu_mode} is not 0 or 1")
    return out.to(x.dtype)


def _group_counts(x, group_index, group_mode, activate_dim):
    """group_index as row counts (count mode), checked to cover x's rows exactly."""
    if group_mode != 0:
        refuse("group_mode=1 (cumsum): the arch35 kernel reads group_index as row counts; not simulated")
    if x.dim() != 2 or activate_dim not in (-1, 1) or group_index.dim() != 1:
        refuse("group_index is simulated for a 2-D x with activate_dim -1 and a 1-D group_index")
    counts = [int(v) for v in group_index.tolist()]
    if any(c < 0 for c in counts) or sum(counts) != x.shape[0]:
        refuse(f"group_index counts {counts} must be non-negative and sum to x's {x.shape[0]} rows (rows past the "
               "groups are left unwritten by CANN)")
    return counts


def _grouped_rows_mx(out, counts, fmt, round_mode, scale_alg):
    """axis -2 with groups: blocks of 32 from each group's first row; group g's scale pairs follow the previous
    groups' ceil(rows / 64) pairs (the kernel's cumuScaleOffset); mxscale rows past them (Meta: rows // 64 +
    groups) are unwritten by CANN: zeros here."""
    values = torch.zeros(out.shape, dtype=torch.uint8 if fmt.torch_dtype is None else fmt.torch_dtype)
    scales = torch.zeros(out.shape[0] // 64 + len(counts), out.shape[1], 2, dtype=torch.uint8)
    start = offset = 0
    for rows in counts:
        if rows:
            elements, pairs = mx_along(out[start:start + rows], 0, 32, fmt, round_mode, scale_alg)
            values[start:start + rows] = elements
            scales[offset:offset + pairs.shape[0]] = pairs
            offset += pairs.shape[0]
        start += rows
    return values, scales


def swiglu_mx(x, group_index, *, activate_dim, activate_left, swiglu_mode, clamp_limit, glu_alpha, glu_bias, axis,
              fmt, round_mode, scale_alg, max_dtype_value, group_mode=0):
    """(elements, mxscale codes) of SwigluMxQuant."""
    counts = None if group_index is None else _group_counts(x, group_index, group_mode, activate_dim)
    check_modes(fmt, round_mode, scale_alg, scale_algs=(0, 1))
    if float(max_dtype_value) < 0:
        refuse(f"max_dtype_value={max_dtype_value} must be non-negative")
    if not bool(torch.isfinite(x).all()):
        refuse("x holds inf/NaN: CANN leaves the MX elements of such a block undefined")
    out = swiglu_out(x, activate_dim, activate_left, swiglu_mode, clamp_limit, glu_alpha, glu_bias)
    if axis not in (-1, -2, x.dim() - 1, x.dim() - 2):
        refuse(f"axis={axis} is not the last or second-to-last dim")
    check_fp4_last_dim(out, fmt)
    if counts is not None and axis % x.dim() == 0:
        return _grouped_rows_mx(out, counts, fmt, round_mode, scale_alg)
    return mx_along(out, axis, 32, fmt, round_mode, scale_alg)


@ge_kernel("SwigluMxQuant")
def swiglu_mx_quant(x, group_index, *, activate_dim, activate_left, swiglu_mode, clamp_limit, glu_alpha, glu_bias,
                    group_mode, axis, dst_type, round_mode, scale_alg, max_dtype_value):
    fmt = mx.element_format("dst_type", dst_type)
    if group_mode not in (0, 1):
        refuse(f"group_mode={group_mode} is not 0 (count) or 1 (cumsum)")
    y, codes = swiglu_mx(x, group_index, activate_dim=activate_dim, activate_left=activate_left,
                         swiglu_mode=swiglu_mode, clamp_limit=clamp_limit, glu_alpha=glu_alpha, glu_bias=glu_bias,
                         axis=axis, fmt=fmt, round_mode=round_mode, scale_alg=scale_alg,
                         max_dtype_value=max_dtype_value, group_mode=group_mode)
    return as_ge(y, fmt), as_e8m0(codes)

"""CPU reference kernels of torch_npu's MX quantisation ops: npu_dynamic_mx_quant,
npu_dynamic_mx_quant_with_dual_axis, npu_dynamic_block_mx_quant, npu_rms_norm_dynamic_mx_quant,
npu_add_rms_norm_dynamic_mx_quant, npu_swiglu_mx_quant, npu_dynamic_dual_level_mx_quant,
npu_grouped_dynamic_mx_quant and the dequantiser npu_anti_mx_quant.

On an NPU these eager ops run the CANN kernels their GE types run in graph mode, so each maps torch_npu's
arguments onto the interpreter's MX code (``interpreter/kernels/formats.py`` for the format,
``quant/mx_quant.py`` and the fused ops' modules for the ops: semantics and refusals there) and returns what
torch_npu returns: fp8
elements as torch.float8_e4m3fn / float8_e5m2, fp4 elements as uint8 with two per byte (element 2i in the
low nibble), float8_e8m0 scales as uint8 (the wheel's Meta functions' dtypes).
"""
from __future__ import annotations

import torch

from ..interpreter.kernels import formats as mx
from ..interpreter.kernels.norm import rms_norm_quant
from ..interpreter.kernels.quant import mx_quant, swiglu_quant
from .checks import named_refusals


def element_format(op: str, dst_type) -> mx.ElementFormat:
    """torch_npu's dst_type (296/297 fp4, 291/292 or torch's 23/24 fp8) as an MX element format."""
    number = mx.TORCH_NPU_DST.get(int(dst_type))
    if number is None:
        raise ValueError(f"npu::{op}: dst_type={dst_type} is not an MX element type (296 float4_e2m1fn_x2, "
                         "297 float4_e1m2fn_x2, 291/23 float8_e5m2, 292/24 float8_e4m3fn)")
    return mx.BY_GE_NUMBER[number]


def eager_elements(elements, fmt):
    """Elements as torch_npu returns them: fp8 as is, fp4 codes packed two per byte (uint8)."""
    return elements if fmt.torch_dtype is not None else mx.pack_fp4(elements)


@named_refusals("npu_dynamic_mx_quant")
def npu_dynamic_mx_quant(input, *, axis=-1, round_mode="rint", dst_type=296, block_size=32, scale_alg=0,
                         dst_type_max=0.0, max_low_bound=0.0):
    fmt = element_format("npu_dynamic_mx_quant", dst_type)
    scale_alg = 0 if scale_alg is None else scale_alg
    mx_quant.check_dynamic_args(input, axis, fmt, round_mode, block_size, scale_alg, dst_type_max, max_low_bound)
    elements, codes = mx.mx_along(input, axis, block_size, fmt, round_mode, scale_alg, max_low_bound, dst_type_max)
    return eager_elements(elements, fmt), codes


@named_refusals("npu_dynamic_mx_quant_with_dual_axis")
def npu_dynamic_mx_quant_with_dual_axis(input, *, round_mode="rint", dst_type=296, scale_alg=0, dst_type_max=0.0):
    fmt = element_format("npu_dynamic_mx_quant_with_dual_axis", dst_type)
    mx_quant.check_dual_axis_args(input, fmt, round_mode, scale_alg, dst_type_max or 0.0)
    y1, codes1 = mx.mx_along(input, -1, 32, fmt, round_mode, scale_alg)
    y2, codes2 = mx.mx_along(input, -2, 32, fmt, round_mode, scale_alg)
    return eager_elements(y1, fmt), codes1, eager_elements(y2, fmt), codes2


@named_refusals("npu_dynamic_block_mx_quant")
def npu_dynamic_block_mx_quant(input, *, round_mode="rint", dst_type=296, scale_alg=0, dst_type_max=0.0):
    fmt = element_format("npu_dynamic_block_mx_quant", dst_type)
    mx_quant.check_block_args(input, fmt, round_mode, scale_alg, dst_type_max)
    y, scale1, scale2 = mx_quant.block_mx(input, fmt, round_mode, scale_alg, dst_type_max)
    return eager_elements(y, fmt), scale1, scale2


@named_refusals("npu_rms_norm_dynamic_mx_quant")
def npu_rms_norm_dynamic_mx_quant(x, gamma, *, beta=None, epsilon=1e-06, scale_alg=0, round_mode="rint",
                                  dst_type=296):
    fmt = element_format("npu_rms_norm_dynamic_mx_quant", dst_type)
    rms_norm_quant.check_norm_args(x, gamma, beta, fmt, round_mode, scale_alg)
    y, codes, rstd = rms_norm_quant.rms_norm_mx(x.float(), x.dtype, gamma, beta, epsilon, fmt, round_mode, scale_alg)
    return eager_elements(y, fmt), codes, rstd


@named_refusals("npu_add_rms_norm_dynamic_mx_quant")
def npu_add_rms_norm_dynamic_mx_quant(x1, x2, gamma, *, beta=None, epsilon=1e-06, scale_alg=0, round_mode="rint",
                                      dst_type=296):
    fmt = element_format("npu_add_rms_norm_dynamic_mx_quant", dst_type)
    if x1.shape != x2.shape or x1.dtype != x2.dtype:
        raise ValueError("npu::npu_add_rms_norm_dynamic_mx_quant: x1 and x2 must share shape and dtype; got "
                         f"{x1.dtype}{list(x1.shape)}, {x2.dtype}{list(x2.shape)}")
    rms_norm_quant.check_norm_args(x1, gamma, beta, fmt, round_mode, scale_alg)
    rms_norm_quant.check_norm_args(x2, gamma, beta, fmt, round_mode, scale_alg)
    wide = x1.float() + x2.float()
    y, codes, rstd = rms_norm_quant.rms_norm_mx(wide, x1.dtype, gamma, beta, epsilon, fmt, round_mode, scale_alg)
    return eager_elements(y, fmt), wide.to(x1.dtype), codes, rstd


@named_refusals("npu_swiglu_mx_quant")
def npu_swiglu_mx_quant(x, *, group_index=None, activate_dim=-1, activate_left=False, swiglu_mode=0, clamp_limit=7.0,
                        glu_alpha=1.702, glu_bias=1.0, group_mode=0, axis=-1, dst_type=296, round_mode="rint",
                        scale_alg=0, max_dtype_value=0):
    fmt = element_format("npu_swiglu_mx_quant", dst_type)
    if group_mode not in (0, 1):
        raise ValueError(f"npu::npu_swiglu_mx_quant: group_mode={group_mode} is not 0 (count) or 1 (cumsum)")
    y, codes = swiglu_quant.swiglu_mx(x, group_index, activate_dim=activate_dim, activate_left=activate_left,
                               swiglu_mode=swiglu_mode, clamp_limit=clamp_limit, glu_alpha=glu_alpha,
                               glu_bias=glu_bias, axis=axis, fmt=fmt, round_mode=round_mode, scale_alg=scale_alg,
                               max_dtype_value=max_dtype_value, group_mode=group_mode)
    return eager_elements(y, fmt), codes


@named_refusals("npu_dynamic_dual_level_mx_quant")
def npu_dynamic_dual_level_mx_quant(input, *, smooth_scale=None, round_mode="rint"):
    codes, level0, scale = mx_quant.dual_level_mx(input, smooth_scale, round_mode, 512, 32)
    return mx.pack_fp4(codes), level0, scale


@named_refusals("npu_grouped_dynamic_mx_quant")
def npu_grouped_dynamic_mx_quant(x, group_index, *, round_mode="rint", dst_type=23, blocksize=32, scale_alg=0,
                                 dst_type_max=0.0):
    fmt = element_format("npu_grouped_dynamic_mx_quant", dst_type)
    mx.check_modes(fmt, round_mode, 0 if scale_alg is None else scale_alg, dst_type_max or 0.0)
    y, scales = mx_quant.grouped_mx(x, group_index, fmt, round_mode, 0 if scale_alg is None else scale_alg, blocksize)
    return eager_elements(y, fmt), scales


# torch ScalarType numbers torch_npu's dst_type takes (Meta: TORCH_DTYPE_ENUM_VALUE_TO_SCALAR_TYPE_MAP)
_ANTI_DST = {6: torch.float32, 5: torch.float16, 15: torch.bfloat16}


@named_refusals("npu_anti_mx_quant")
def npu_anti_mx_quant(x, mxscale, *, axis=-1, dst_type=15, src_type=292):
    op = "npu_anti_mx_quant"
    dst = _ANTI_DST.get(int(15 if dst_type is None else dst_type))
    if dst is None:
        raise ValueError(f"npu::{op}: dst_type={dst_type} is not torch.float32 (6), float16 (5) or bfloat16 (15)")
    src = element_format(op, 292 if src_type is None else src_type)
    if x.dtype == torch.uint8:
        if src.torch_dtype is not None:
            raise ValueError(f"npu::{op}: a uint8 x holds fp4 (src_type 296/297), got src_type={src_type}")
        values = mx.fp4_values(mx.unpack_fp4(x), src)
    elif x.dtype == src.torch_dtype:
        values = x.float()
    else:
        raise ValueError(f"npu::{op}: x of dtype {x.dtype} does not match src_type={src_type}")
    axis = -1 if axis is None else axis
    if not -x.dim() <= axis < x.dim():
        raise ValueError(f"npu::{op}: axis={axis} is out of range for x of rank {x.dim()}")
    return mx_quant.anti_mx(values, mxscale.view(torch.uint8), axis).to(dst)


KERNELS = {
    "npu_grouped_dynamic_mx_quant": npu_grouped_dynamic_mx_quant,
    "npu_anti_mx_quant": npu_anti_mx_quant,
    "npu_dynamic_dual_level_mx_quant": npu_dynamic_dual_level_mx_quant,
    "npu_swiglu_mx_quant": npu_swiglu_mx_quant,
    "npu_rms_norm_dynamic_mx_quant": npu_rms_norm_dynamic_mx_quant,
    "npu_add_rms_norm_dynamic_mx_quant": npu_add_rms_norm_dynamic_mx_quant,
    "npu_dynamic_mx_quant": npu_dynamic_mx_quant,
    "npu_dynamic_mx_quant_with_dual_axis": npu_dynamic_mx_quant_with_dual_axis,
    "npu_dynamic_block_mx_quant": npu_dynamic_block_mx_quant,
}

"""torch_npu's MX quantisation ops as adapters over their GE kernels (``ge_op``): npu_dynamic_mx_quant ->
DynamicMxQuant, npu_dynamic_mx_quant_with_dual_axis -> DynamicMxQuantWithDualAxis, npu_dynamic_block_mx_quant ->
DynamicBlockMxQuant, npu_rms_norm_dynamic_mx_quant -> RmsNormDynamicMxQuant, npu_add_rms_norm_dynamic_mx_quant ->
AddRmsNormDynamicMxQuant, npu_swiglu_mx_quant -> SwigluMxQuant, npu_dynamic_dual_level_mx_quant ->
DynamicDualLevelMxQuant, npu_grouped_dynamic_mx_quant -> GroupedDynamicMxQuant and the dequantiser
npu_anti_mx_quant -> AntiMxQuant.

On an NPU each eager op is its aclnn API (aclnnDynamicMxQuant, ...), which launches the kernel its GE type runs
in graph mode (ops-nn quant/dynamic_mx_quant and its siblings: one op directory holds the kernel, the GE
prototype and the aclnn API), so each adapter maps torch_npu's arguments onto the GE op's attrs (torch_npu's
dst_type numbers 296/297/291/292/23/24 onto ge::DataType 40/41/35/36) and returns what torch_npu returns: fp8
elements as torch.float8_e4m3fn / float8_e5m2, fp4 elements as uint8 with two per byte (element 2i in the low
nibble, as TorchAir's Bitcast packs them), float8_e8m0 scales as uint8 (the wheel's Meta functions' dtypes).
Semantics and refusals are the kernels' (``interpreter/kernels/quant/mx_quant.py``, ``swiglu_quant.py``,
``norm/rms_norm_quant.py``).

float4_e1m2 (dst_type 297) runs the same kernels: they write its codes one per byte as uint8 (DT_FLOAT4_E1M2
has no torch dtype), which the adapters pack as they pack e2m1. Only a graph cannot carry it: the executor
refuses a DT_FLOAT4_E1M2 output desc by name. The one exception is npu_anti_mx_quant of e1m2 input
(src_type 297): AntiMxQuant reads the source format from x's dtype and no dtype carries e1m2, so that case
calls the kernel's own dequantisation (``mx_quant.anti_mx``) on the decoded values.
"""
from __future__ import annotations

import torch

from ..interpreter.calls import ge_op
from ..interpreter import lowbit_formats as mx
from .checks import named_refusals


def element_format(op: str, dst_type) -> mx.ElementFormat:
    """torch_npu's dst_type (296/297 fp4, 291/292 or torch's 23/24 fp8) as an MX element format."""
    number = mx.TORCH_NPU_DST.get(int(dst_type))
    if number is None:
        raise ValueError(f"npu::{op}: dst_type={dst_type} is not an MX element type (296 float4_e2m1fn_x2, "
                         "297 float4_e1m2fn_x2, 291/23 float8_e5m2, 292/24 float8_e4m3fn)")
    return mx.BY_GE_NUMBER[number]


def eager_elements(elements, fmt):
    """A GE kernel's elements as torch_npu returns them: fp8 as is, fp4 codes (one per byte) packed two per
    byte (uint8)."""
    return elements if fmt.torch_dtype is not None else mx.pack_fp4(elements.view(torch.uint8))


def _scale(codes):
    """float8_e8m0 scales as torch_npu returns them: uint8."""
    return codes.view(torch.uint8)


@named_refusals("npu_dynamic_mx_quant")
def npu_dynamic_mx_quant(input, *, axis=-1, round_mode="rint", dst_type=296, block_size=32, scale_alg=0,
                         dst_type_max=0.0, max_low_bound=0.0):
    fmt = element_format("npu_dynamic_mx_quant", dst_type)
    y, scale = ge_op("DynamicMxQuant")(input, axis=axis, round_mode=round_mode, dst_type=fmt.ge_number,
                                       blocksize=block_size, scale_alg=0 if scale_alg is None else scale_alg,
                                       dst_type_max=float(dst_type_max or 0.0),
                                       max_low_bound=float(max_low_bound or 0.0))
    return eager_elements(y, fmt), _scale(scale)


@named_refusals("npu_dynamic_mx_quant_with_dual_axis")
def npu_dynamic_mx_quant_with_dual_axis(input, *, round_mode="rint", dst_type=296, scale_alg=0,
                                        dst_type_max=0.0):
    fmt = element_format("npu_dynamic_mx_quant_with_dual_axis", dst_type)
    y1, scale1, y2, scale2 = ge_op("DynamicMxQuantWithDualAxis")(
        input, round_mode=round_mode, dst_type=fmt.ge_number, scale_alg=0 if scale_alg is None else scale_alg,
        dst_type_max=float(dst_type_max or 0.0))
    return eager_elements(y1, fmt), _scale(scale1), eager_elements(y2, fmt), _scale(scale2)


@named_refusals("npu_dynamic_block_mx_quant")
def npu_dynamic_block_mx_quant(input, *, round_mode="rint", dst_type=296, scale_alg=0, dst_type_max=0.0):
    fmt = element_format("npu_dynamic_block_mx_quant", dst_type)
    y, scale1, scale2 = ge_op("DynamicBlockMxQuant")(
        input, round_mode=round_mode, dst_type=fmt.ge_number, scale_alg=0 if scale_alg is None else scale_alg,
        dst_type_max=float(dst_type_max or 0.0))
    return eager_elements(y, fmt), _scale(scale1), _scale(scale2)


@named_refusals("npu_rms_norm_dynamic_mx_quant")
def npu_rms_norm_dynamic_mx_quant(x, gamma, *, beta=None, epsilon=1e-06, scale_alg=0, round_mode="rint",
                                  dst_type=296):
    fmt = element_format("npu_rms_norm_dynamic_mx_quant", dst_type)
    y, scale, rstd = ge_op("RmsNormDynamicMxQuant")(x, gamma, beta, epsilon=float(epsilon), scale_alg=scale_alg,
                                                    round_mode=round_mode, dst_type=fmt.ge_number,
                                                    output_rstd=True)
    return eager_elements(y, fmt), _scale(scale), rstd


@named_refusals("npu_add_rms_norm_dynamic_mx_quant")
def npu_add_rms_norm_dynamic_mx_quant(x1, x2, gamma, *, beta=None, epsilon=1e-06, scale_alg=0, round_mode="rint",
                                      dst_type=296):
    fmt = element_format("npu_add_rms_norm_dynamic_mx_quant", dst_type)
    y, x, scale, rstd = ge_op("AddRmsNormDynamicMxQuant")(x1, x2, gamma, beta, epsilon=float(epsilon),
                                                          scale_alg=scale_alg, round_mode=round_mode,
                                                          dst_type=fmt.ge_number, output_rstd=True)
    return eager_elements(y, fmt), x, _scale(scale), rstd


@named_refusals("npu_swiglu_mx_quant")
def npu_swiglu_mx_quant(x, *, group_index=None, activate_dim=-1, activate_left=False, swiglu_mode=0, clamp_limit=7.0,
                        glu_alpha=1.702, glu_bias=1.0, group_mode=0, axis=-1, dst_type=296, round_mode="rint",
                        scale_alg=0, max_dtype_value=0):
    fmt = element_format("npu_swiglu_mx_quant", dst_type)
    y, scale = ge_op("SwigluMxQuant")(x, group_index, activate_dim=activate_dim, activate_left=activate_left,
                                      swiglu_mode=swiglu_mode, clamp_limit=float(clamp_limit),
                                      glu_alpha=float(glu_alpha), glu_bias=float(glu_bias), group_mode=group_mode,
                                      axis=axis, dst_type=fmt.ge_number, round_mode=round_mode, scale_alg=scale_alg,
                                      max_dtype_value=float(max_dtype_value))
    return eager_elements(y, fmt), _scale(scale)


@named_refusals("npu_dynamic_dual_level_mx_quant")
def npu_dynamic_dual_level_mx_quant(input, *, smooth_scale=None, round_mode="rint"):
    y, level0, scale = ge_op("DynamicDualLevelMxQuant")(input, smooth_scale, round_mode=round_mode,
                                                        level0_block_size=512, level1_block_size=32)
    return eager_elements(y, mx.E2M1), level0, _scale(scale)


@named_refusals("npu_grouped_dynamic_mx_quant")
def npu_grouped_dynamic_mx_quant(x, group_index, *, round_mode="rint", dst_type=23, blocksize=32, scale_alg=0,
                                 dst_type_max=0.0):
    fmt = element_format("npu_grouped_dynamic_mx_quant", dst_type)
    y, scale = ge_op("GroupedDynamicMxQuant")(x, group_index, round_mode=round_mode, dst_type=fmt.ge_number,
                                              blocksize=blocksize, scale_alg=0 if scale_alg is None else scale_alg,
                                              dst_type_max=float(dst_type_max or 0.0))
    return eager_elements(y, fmt), _scale(scale)


# torch ScalarType numbers torch_npu's dst_type takes (Meta: TORCH_DTYPE_ENUM_VALUE_TO_SCALAR_TYPE_MAP) -> the
# ge::DataType number AntiMxQuant's dst_type takes, and the dtype
_ANTI_DST = {6: (0, torch.float32), 5: (1, torch.float16), 15: (27, torch.bfloat16)}


@named_refusals("npu_anti_mx_quant")
def npu_anti_mx_quant(x, mxscale, *, axis=-1, dst_type=15, src_type=292):
    op = "npu_anti_mx_quant"
    dst = _ANTI_DST.get(int(15 if dst_type is None else dst_type))
    if dst is None:
        raise ValueError(f"npu::{op}: dst_type={dst_type} is not torch.float32 (6), float16 (5) or bfloat16 (15)")
    src = element_format(op, 292 if src_type is None else src_type)
    axis = -1 if axis is None else axis
    if x.dtype == torch.uint8:
        if src.torch_dtype is not None:
            raise ValueError(f"npu::{op}: a uint8 x holds fp4 (src_type 296/297), got src_type={src_type}")
        codes = mx.unpack_fp4(x)
        if src is mx.E1M2:   # no dtype carries e1m2 into AntiMxQuant (see the module doc): the kernel's formula
            if not -x.dim() <= axis < x.dim():
                raise ValueError(f"npu::{op}: axis={axis} is out of range for x of rank {x.dim()}")
            from ..interpreter.kernels.quant import mx_quant  # on first use: `import op_plugin` loads no kernel

            return mx_quant.anti_mx(mx.fp4_values(codes, src), mxscale.view(torch.uint8), axis).to(dst[1])
        x = codes.view(torch.float4_e2m1fn_x2)
    elif x.dtype != src.torch_dtype:
        raise ValueError(f"npu::{op}: x of dtype {x.dtype} does not match src_type={src_type}")
    return ge_op("AntiMxQuant")(x, mxscale, axis=axis, dst_type=dst[0])


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

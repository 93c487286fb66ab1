"""torch_npu's fused quantisation ops as adapters over the GE kernels their TorchAir converters lower them to:
npu_anti_quant, npu_trans_quant_param, npu_dequant_swiglu_quant, npu_add_rms_norm_dynamic_quant,
npu_add_rms_norm_quant.

On an NPU these eager ops call the same CANN kernels their GE types run in graph mode, so each maps its arguments
onto the GE op (semantics, precision and refusals in ``interpreter/kernels/quant/dynamic_quant.py``,
``quant/swiglu_quant.py``, ``norm/rms_norm_quant.py`` and docs/torch-npu-ops.md), packs the outputs as torch_npu
returns them and names the op in every refusal (``formats.named_refusals``):

* ``npu_anti_quant`` -> AscendAntiQuantV2 (sqrt_mode false; ``custom/npu_anti_quant.py``): an int32 x carries
  int4, unpacked by the converter's Bitcast (``interpreter/lowbit_formats.unpack_int4``); src_dtype must agree with
  x (the converter's checks); dst_dtype None is float16.
* ``npu_trans_quant_param`` -> TransQuantParamV2 (``custom/transquantparam.py``).
* ``npu_dequant_swiglu_quant`` -> DequantSwigluQuant: quant_mode 1 "dynamic" (else "static"), round_mode 0-4
  rint/round/floor/ceil/trunc, activate_dim None -1 (``custom/npu_dequant_swiglu_quant.py``).
* ``npu_add_rms_norm_dynamic_quant`` -> AddRmsNormDynamicQuant (output_mask None: []); int4 y1/y2 (y_dtype
  torch.quint4x2) packed 8 per int32 as the converter's Bitcast, invalid outputs empty.
* ``npu_add_rms_norm_quant`` -> AddRmsNormQuant (op_plugin's lowering: TorchAir has no converter).
"""
from __future__ import annotations

import torch

from ..interpreter.calls import ge_op
from ..interpreter.lowbit_formats import unpack_int4
from .checks import named_refusals
from .formats import fail, ge_number, int_out, packed_int4, scalar_dtype

_HALF = (torch.float16, torch.bfloat16)
# the dtype an x of torch_npu's npu_anti_quant carries, by its storage dtype, and the src_dtype values naming it
_ANTI_SRC = {torch.int8: (1, torch.int8, torch.qint8), torch.int32: (16, 285, torch.quint4x2),
             torch.float8_e5m2: (23, 291, torch.float8_e5m2), torch.float8_e4m3fn: (24, 292, torch.float8_e4m3fn)}


@named_refusals("npu_anti_quant")
def npu_anti_quant(x, scale, *, offset=None, dst_dtype=None, src_dtype=None):
    op = "npu_anti_quant"
    if x.dtype in _ANTI_SRC and src_dtype is not None and src_dtype not in _ANTI_SRC[x.dtype]:
        fail(op, f"src_dtype={src_dtype} does not match x's dtype {x.dtype} (CANN requires them to agree; an int32 x "
                 "carries int4, src_dtype torch.quint4x2)")
    if x.dtype == torch.int32:
        if x.dim() == 0:
            fail(op, "an int32 x (int4 packed 8 per int32) cannot be a scalar")
        x = unpack_int4(x, keep_dim=True)
    out = scalar_dtype(op, "dst_dtype", dst_dtype, torch.float16)
    if out not in _HALF:
        fail(op, f"dst_dtype={out}: CANN's AscendAntiQuant writes float16 or bfloat16 only")
    return ge_op("AscendAntiQuantV2")(x, scale, offset, dst_type=ge_number(out), sqrt_mode=False)


@named_refusals("npu_trans_quant_param")
def npu_trans_quant_param(scale, offset=None, round_mode=0):
    return ge_op("TransQuantParamV2")(scale, offset, round_mode=0 if round_mode is None else round_mode)


_ROUND_MODES = {0: "rint", 1: "round", 2: "floor", 3: "ceil", 4: "trunc"}


@named_refusals("npu_dequant_swiglu_quant")
def npu_dequant_swiglu_quant(x, *, weight_scale=None, activation_scale=None, bias=None, quant_scale=None,
                             quant_offset=None, group_index=None, activate_left=False, quant_mode=0, dst_type=None,
                             round_mode=None, activate_dim=None, swiglu_mode=0, clamp_limit=7.0, glu_alpha=1.702,
                             glu_bias=1.0):
    out = int_out("npu_dequant_swiglu_quant", "dst_type", dst_type)
    round_mode = int(round_mode or 0)
    y, scale = ge_op("DequantSwigluQuant")(
        x, weight_scale, activation_scale, bias, quant_scale, quant_offset, group_index, activate_left=activate_left,
        quant_mode="dynamic" if quant_mode == 1 else "static", dst_type=ge_number(out),
        round_mode=_ROUND_MODES.get(round_mode, str(round_mode)),
        activate_dim=-1 if activate_dim is None else activate_dim,
        swiglu_mode=swiglu_mode, clamp_limit=clamp_limit, glu_alpha=glu_alpha, glu_bias=glu_bias)
    return y, scale


@named_refusals("npu_add_rms_norm_dynamic_quant")
def npu_add_rms_norm_dynamic_quant(x1, x2, gamma, *, smooth_scale1=None, smooth_scale2=None, beta=None,
                                   epsilon=1e-6, output_mask=None, y_dtype=None):
    op = "npu_add_rms_norm_dynamic_quant"
    out = torch.int4 if y_dtype == 285 else int_out(op, "y_dtype", y_dtype, int4=True)
    if out not in (torch.int8, torch.int4):
        fail(op, "y1/y2 are int8 or int4 (torch.quint4x2) only")
    y1, y2, x, scale1, scale2 = ge_op("AddRmsNormDynamicQuant")(
        x1, x2, gamma, smooth_scale1, smooth_scale2, beta, epsilon=epsilon,
        output_mask=list(output_mask) if output_mask is not None else [], dst_type=ge_number(out))
    if out == torch.int4:   # the converter's Bitcast of each valid output; an invalid one is an empty int32 Const
        y1, y2 = (packed_int4(y) if y.numel() else torch.empty(0, dtype=torch.int32) for y in (y1, y2))
    return y1, y2, x, scale1, scale2


@named_refusals("npu_add_rms_norm_quant")
def npu_add_rms_norm_quant(x1, x2, gamma, scales1, zero_points1=None, beta=None, scales2=None, zero_points2=None, *,
                           axis=-1, epsilon=1e-6, div_mode=True, dst_type=None):
    out = int_out("npu_add_rms_norm_quant", "dst_type", dst_type)
    return ge_op("AddRmsNormQuant")(x1, x2, gamma, scales1, scales2, zero_points1, zero_points2, beta, axis=axis,
                                    epsilon=epsilon, div_mode=div_mode, dst_type=ge_number(out))


KERNELS = {
    "npu_anti_quant": npu_anti_quant,
    "npu_trans_quant_param": npu_trans_quant_param,
    "npu_dequant_swiglu_quant": npu_dequant_swiglu_quant,
    "npu_add_rms_norm_dynamic_quant": npu_add_rms_norm_dynamic_quant,
    "npu_add_rms_norm_quant": npu_add_rms_norm_quant,
}

"""torch_npu's quantisation ops as adapters over the GE kernels their TorchAir converters lower them to.

On an NPU these eager ops call the same CANN kernels their GE types run in graph mode, so each maps its
torch_npu arguments onto the GE op's inputs and attrs (``interpreter/kernels/quant/dynamic_quant.py``,
``matmul/quant_matmul.py``: semantics, rounding and refusals documented there and in docs/torch-npu-ops.md),
packs the output as torch_npu returns it and names the op in every refusal (``formats.named_refusals``: a case
the simulator does not emulate as NotImplementedError, any other as ValueError):

* ``npu_dynamic_quant`` -> DynamicQuant (pertoken, dst_type_max 0) or DynamicQuantV2 (is_symmetrical), as the
  converter ``custom/npu_dynamic_quant.py`` chooses; ``npu_dynamic_quant_asymmetric`` -> DynamicQuantV2. A
  torch.quint4x2 output is DT_INT4, packed 8 per int32 as the converter's Bitcast packs it (``formats.packed_int4``).
* ``npu_quantize`` -> AscendQuantV2 (div_mode False: round_mode "round", axis min(axis, -1), quint4x2 packed as
  above) or Quantize (div_mode True: scales / zero_points unsqueezed to x's rank along ``axis``), as
  ``custom/quantized.py``.
* ``npu_quant_matmul`` -> QuantBatchMatmulV3 (``custom/quantmatmul.py``); a float32 scale with float16 output and no
  pertoken_scale is first packed by TransQuantParamV2, as torch_npu's eager op does; the fp8/fp4/MX arguments
  (x1_dtype ... y_scale, QuantBatchMatmulV4's) and int4 packed in int32 are refused.
* ``npu_weight_quant_batchmatmul`` -> WeightQuantBatchMatmulV2 (transpose false); weight_dtype (a Bitcast to
  int4/fp8/MX) is refused.
"""
from __future__ import annotations

import torch

from ..interpreter.calls import ge_op
from .checks import named_refusals
from .formats import fail, ge_number, int_out, packed_int4, scalar_dtype

_INT4 = torch.int4


def _dynamic_out(op, dst_type):
    out = int_out(op, "dst_type", dst_type, int4=True)
    if out not in (torch.int8, _INT4):
        fail(op, f"dst_type={out} is not an output of this op (int8, quint4x2)")
    return out


def _packed(y, out):
    return packed_int4(y) if out == _INT4 else y


@named_refusals("npu_dynamic_quant")
def npu_dynamic_quant(input, *, smooth_scales=None, group_index=None, dst_type=None,  # schema name
                      quant_mode="pertoken", dst_type_max=0.0):
    out = _dynamic_out("npu_dynamic_quant", dst_type)
    if quant_mode == "pertoken" and not dst_type_max:
        y, scale = ge_op("DynamicQuant")(input, smooth_scales, group_index, dst_type=ge_number(out))
    else:
        y, scale, _ = ge_op("DynamicQuantV2")(input, smooth_scales, group_index, dst_type=ge_number(out),
                                              is_symmetrical=True, quant_mode=quant_mode,
                                              dst_type_max=float(dst_type_max))
    return _packed(y, out), scale


@named_refusals("npu_dynamic_quant_asymmetric")
def npu_dynamic_quant_asymmetric(input, *, smooth_scales=None, group_index=None,  # schema name
                                 dst_type=None, quant_mode="pertoken", dst_type_max=0.0):
    out = _dynamic_out("npu_dynamic_quant_asymmetric", dst_type)
    y, scale, offset = ge_op("DynamicQuantV2")(input, smooth_scales, group_index, dst_type=ge_number(out),
                                               is_symmetrical=False, quant_mode=quant_mode,
                                               dst_type_max=float(dst_type_max or 0.0))
    return _packed(y, out), scale, offset


_QUANTIZE_DTYPES = {torch.int8: "torch.qint8", torch.uint8: "torch.quint8", torch.int32: "torch.qint32"}


@named_refusals("npu_quantize")
def npu_quantize(self, scales, zero_points, dtype, axis=1, div_mode=True):
    op = "npu_quantize"
    out = int_out(op, "dtype", dtype, int4=not div_mode)
    if not div_mode:
        if out not in (torch.int8, _INT4):
            fail(op, f"dtype={out} with div_mode=False: torch_npu takes torch.qint8 (or quint4x2)")
        y = ge_op("AscendQuantV2")(self, scales, zero_points, sqrt_mode=False, round_mode="round",
                                   dst_type=ge_number(out), axis=min(axis, -1))
        return _packed(y, out)
    if scales.dim() != 1 or (zero_points is not None and zero_points.dim() != 1):
        fail(op, "scales and zero_points must be 1-D (TorchAir's converter)")
    if not -self.dim() <= axis < self.dim():
        fail(op, f"axis {axis} is out of range for an input of {self.dim()} dims")
    shape = [1] * self.dim()
    shape[axis] = -1
    zero_points = None if zero_points is None else zero_points.reshape(shape)
    return ge_op("Quantize")(self, scales.reshape(shape), zero_points, dtype=_QUANTIZE_DTYPES[out],
                             axis=axis % self.dim())


@named_refusals("npu_quant_matmul")
def npu_quant_matmul(x1, x2, scale, *, offset=None, pertoken_scale=None, bias=None, output_dtype=None,
                     x1_dtype=None, x2_dtype=None, pertoken_scale_dtype=None, scale_dtype=None, group_sizes=None,
                     y_scale=None):
    op = "npu_quant_matmul"
    for name, value in (("x1_dtype", x1_dtype), ("x2_dtype", x2_dtype), ("pertoken_scale_dtype", pertoken_scale_dtype),
                        ("scale_dtype", scale_dtype), ("group_sizes", group_sizes), ("y_scale", y_scale)):
        if value is not None:
            fail(op, f"{name} (fp8/fp4/MX or grouped quantisation) is not emulated by the CPU simulator",
                 NotImplementedError)
    if torch.int32 in (x1.dtype, x2.dtype):
        fail(op, "int4 packed in int32 inputs are not simulated; x1 and x2 must be int8", NotImplementedError)
    out = scalar_dtype(op, "output_dtype", output_dtype, torch.int8)
    if out == torch.float16 and pertoken_scale is None and scale.dtype == torch.float32:
        scale = ge_op("TransQuantParamV2")(scale, None)   # torch_npu's eager op: npu_trans_quant_param first
    return ge_op("QuantBatchMatmulV3")(x1, x2, scale, offset, bias, pertoken_scale, dtype=ge_number(out))


@named_refusals("npu_weight_quant_batchmatmul")
def npu_weight_quant_batchmatmul(x, weight, antiquant_scale, antiquant_offset=None, quant_scale=None,
                                 quant_offset=None, bias=None, antiquant_group_size=0, inner_precise=0,
                                 weight_dtype=None):
    if weight_dtype is not None:
        fail("npu_weight_quant_batchmatmul", f"weight_dtype={weight_dtype} (a Bitcast of the weight to int4/fp8/MX) "
             "is not emulated; only int8 weights are simulated", NotImplementedError)
    return ge_op("WeightQuantBatchMatmulV2")(x, weight, antiquant_scale, antiquant_offset, quant_scale, quant_offset,
                                             bias, antiquant_group_size=antiquant_group_size)


KERNELS: dict = {
    "npu_dynamic_quant": npu_dynamic_quant,
    "npu_dynamic_quant_asymmetric": npu_dynamic_quant_asymmetric,
    "npu_quantize": npu_quantize,
    "npu_quant_matmul": npu_quant_matmul,
    "npu_weight_quant_batchmatmul": npu_weight_quant_batchmatmul,
}

"""Quantised matmuls (CANN ops-nn ``matmul/``, where CANN files them): QuantBatchMatmulV3 and
WeightQuantBatchMatmulV2.

Written from the ops' CANN definitions (ops-nn READMEs, the A2/A3 kernels' arithmetic), not from
op_plugin's torch_npu reference kernels, so a compiled graph is checked against CANN's semantics:

* QuantBatchMatmulV3 accumulates int8 x int8 in int32 exactly, then applies the README's order of
  bias, scale and per-token scale in float32 and rounds once to the output dtype; an int64 scale is
  the FP19 TransQuantParam packs (top 19 bits of the float32), CANN's dtype combinations are enforced;
* WeightQuantBatchMatmulV2 dequantises the int8/int4 weight, ``(weight + antiquant_offset) *
  antiquant_scale`` (per tensor, channel or group), and multiplies in float32.

int8/int32 matmul outputs (rounded in the cube's fixpipe, undocumented) are refused.
WeightQuantBatchMatmulV2 takes its prototype from ops-nn's ``op_graph`` ``*_proto.h``: the pinned TorchAir's
docstring misspells two of its attrs (``ATRR``).
"""
from __future__ import annotations

import torch

from ....._ge.reg_op import parse_reg_ops
from ...registry import ge_kernel, refuse
from ..common import attr_dtype

_HALF = (torch.float16, torch.bfloat16)
_GE_INT8, _GE_INT4 = 2, 29

# ops-nn matmul/weight_quant_batch_matmul_v2/op_graph/weight_quant_batch_matmul_v2_proto.h, as CANN writes them.
_PROTOTYPES = parse_reg_ops('''
"""REG_OP(WeightQuantBatchMatmulV2)
    .INPUT(x, TensorType({DT_FLOAT16, DT_BF16}))
    .INPUT(weight, TensorType({DT_INT8, DT_INT4, DT_INT32, DT_FLOAT8_E4M3FN, DT_HIFLOAT8, DT_FLOAT4_E2M1}))
    .INPUT(antiquant_scale, TensorType({DT_FLOAT16, DT_BF16, DT_UINT64, DT_INT64, DT_FLOAT8_E8M0}))
    .OPTIONAL_INPUT(antiquant_offset, TensorType({DT_FLOAT16, DT_BF16, DT_INT32}))
    .OPTIONAL_INPUT(quant_scale, TensorType({DT_FLOAT, DT_UINT64}))
    .OPTIONAL_INPUT(quant_offset, TensorType({DT_FLOAT}))
    .OPTIONAL_INPUT(bias, TensorType({DT_FLOAT16, DT_FLOAT, DT_BF16}))
    .OUTPUT(y, TensorType({DT_FLOAT16, DT_BF16, DT_INT8}))
    .ATTR(transpose_x, Bool, false)
    .ATTR(transpose_weight, Bool, false)
    .ATTR(antiquant_group_size, Int, 0)
    .ATTR(dtype, Int, -1)
    .ATTR(inner_precise, Int, 0)
    .OP_END_FACTORY_REG(WeightQuantBatchMatmulV2)
"""
''', {"DT_INT8": _GE_INT8})
_INNER_PRECISE = "chooses the NPU's high-precision or high-performance kernel; the CPU computes in float32 either way"


def _scale(scale, out, pertoken_scale, bias, offset):
    """The scale as float32, for CANN's A2/A3 combinations (ops-nn aclnnQuantMatmulV4.md): float16 output
    with an int64/uint64 scale and no pertoken_scale reads its FP19 (bits 13-31, as TransQuantParam packs
    it; bit 46 is its flag), or a float32 scale with pertoken_scale; bfloat16 output a float32/bfloat16 scale."""
    if offset is not None:
        refuse("offset goes with int8 outputs only (not simulated)")
    if bias is not None and bias.dtype not in (torch.int32, torch.float32, out):
        refuse(f"a {bias.dtype} bias with {out} output is not one of CANN's combinations")
    if scale.dtype in (torch.int64, torch.uint64):
        bits = scale.to(torch.int64) if scale.dtype != torch.int64 else scale
        if out != torch.float16 or pertoken_scale is not None or (bias is not None and bias.dtype != torch.int32):
            refuse("an int64 scale goes with float16 output, no pertoken_scale and an int32 bias or none (a uint64 "
                   "one too)")
        if bool(((bits & ~(0xFFFFFFFF | (1 << 46))) != 0).any()):
            refuse("an int64 scale with offset bits (37-45) or other high bits: an int8 requantisation, not simulated")
        return (bits & 0xFFFFE000).to(torch.int32).view(torch.float32)
    if out == torch.float16 and (scale.dtype != torch.float32 or pertoken_scale is None):
        refuse("float16 output takes an int64 scale (npu_trans_quant_param), or a float32 scale with pertoken_scale: "
               "a float scale without pertoken_scale is not a graph-mode combination (torch_npu's docs)")
    return scale.float()


@ge_kernel("QuantBatchMatmulV3",
           accepts={"x1": (torch.int8,), "x2": (torch.int8,), "pertoken_scale": (torch.float32,)})
def quant_batch_matmul_v3(x1, x2, scale, offset, bias, pertoken_scale, *, dtype, transpose_x1, transpose_x2):
    """ops-nn QuantBatchMatmulV3 README (A2/A3): acc = x1 @ x2 in int32 (+ int32 bias);
    out = acc * scale [* pertoken_scale] (+ float bias), rounded once to float16/bfloat16 (scales: _scale)."""
    out = attr_dtype("dtype", dtype)
    if out not in _HALF:
        refuse(f"dtype={dtype} (output_dtype {out}): only float16/bfloat16 outputs are simulated (int8 "
               "requantisation and int32 outputs round in the cube's fixpipe, whose rounding CANN does not document)")
    a = x1.transpose(-1, -2) if transpose_x1 else x1
    b = x2.transpose(-1, -2) if transpose_x2 else x2
    if a.dim() < 2 or b.dim() < 2 or a.shape[-1] != b.shape[-2]:
        refuse(f"x1 {list(a.shape)} and x2 {list(b.shape)} do not multiply (x1's k must be x2's second-last dim)")
    n = b.shape[-1]
    if scale.dim() != 1 or scale.shape[0] not in (1, n):
        refuse(f"scale of shape {tuple(scale.shape)} is not (1,) or ({n},)")
    if pertoken_scale is not None and pertoken_scale.shape != a.shape[-2:-1]:
        refuse(f"pertoken_scale must be of shape ({a.shape[-2]},); got {tuple(pertoken_scale.shape)}")
    acc = torch.matmul(a.to(torch.int64), b.to(torch.int64))
    int_bias = bias is not None and bias.dtype == torch.int32
    if int_bias:
        acc = acc + bias.to(torch.int64)
    if bool((acc.abs() > 2**31 - 1).any()):
        refuse("the int32 accumulator overflows")
    result = acc.to(torch.float32) * _scale(scale, out, pertoken_scale, bias, offset)
    if pertoken_scale is not None:
        result = result * pertoken_scale.float().unsqueeze(-1)
    if bias is not None and not int_bias:
        result = result + bias.float()
    return result.to(out)


@ge_kernel("WeightQuantBatchMatmulV2", prototype=_PROTOTYPES["WeightQuantBatchMatmulV2"],
           accepts={"x": _HALF, "weight": (torch.int8,), "antiquant_offset": _HALF + (torch.int32,)},
           layout_only={"inner_precise": _INNER_PRECISE})
def weight_quant_batch_matmul_v2(x, weight, antiquant_scale, antiquant_offset, quant_scale, quant_offset, bias, *,
                                 transpose_x, transpose_weight, antiquant_group_size, dtype):
    """y = x @ ((weight + antiquant_offset) * antiquant_scale) + bias: the weight dequantised as ops-nn's
    A2/A3 kernel does (weight_quant_batch_matmul_v2_common.h: float16 x in float16 arithmetic, each step
    rounded; bfloat16 x in float32, cast with CAST_RINT), the product accumulated in float32 and rounded
    once (per-tensor, per-channel (n,)/(1, n), per-group (ceil(k / g), n) parameters)."""
    if quant_scale is not None or quant_offset is not None or dtype not in (-1, None):
        refuse("quant_scale/quant_offset (an int8 output) are not simulated")
    if antiquant_scale.dtype != x.dtype:
        refuse(f"antiquant_scale of dtype {antiquant_scale.dtype}: only x's dtype is simulated (not int64/e8m0)")
    if x.dim() != 2 or weight.dim() != 2:
        refuse(f"x {tuple(x.shape)} and weight {tuple(weight.shape)} must be 2-D (M, K) and (K, N), as the op's "
               "Meta gives (M, N)")
    a = x.transpose(-1, -2) if transpose_x else x
    w = weight.transpose(-1, -2) if transpose_weight else weight
    k, n = w.shape[-2], w.shape[-1]
    if a.shape[-1] != k:
        refuse(f"x {list(a.shape)} and weight {list(w.shape)} do not multiply")
    wide = w.float()
    if antiquant_offset is not None:
        wide = wide + _antiquant(antiquant_offset, k, n, antiquant_group_size)
        if x.dtype == torch.float16:
            wide = wide.half().float()   # the kernel adds the offset in float16 (bfloat16: in float32)
    wide = wide * _antiquant(antiquant_scale, k, n, antiquant_group_size)
    result = torch.matmul(a.float(), wide.to(x.dtype).float())
    if bias is not None:
        result = result + bias.float()
    return result.to(x.dtype)


def _antiquant(param, k, n, group_size):
    if group_size:
        groups = (k + group_size - 1) // group_size
        if tuple(param.shape) != (groups, n):
            refuse(f"a per-group parameter of shape {list(param.shape)} is not [{groups}, {n}]")
        return param.float().repeat_interleave(group_size, dim=0)[:k]
    if param.numel() not in (1, n) or (param.numel() == n and param.shape[-1] != n):
        refuse(f"an antiquant parameter of shape {list(param.shape)} is not per-tensor or per-channel ({n})")
    return param.float().reshape(1, -1)

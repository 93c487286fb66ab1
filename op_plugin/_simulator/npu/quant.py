"""CPU reference kernels of torch_npu's quantisation ops: dynamic quant, quantize, quant matmul,
weight-quant matmul (see docs/torch-npu-ops.md, "Quantisation", for every rounding/saturation choice).

Semantics from torch_npu's ``_op_plugin_docs.py`` and hicann ops-nn (``quant/dynamic_quant*``,
``quant/ascend_quant_v2``, ``quant/quantize``, ``matmul/quant_batch_matmul_v3``,
``matmul/weight_quant_batch_matmul_v2`` READMEs and kernels). Everything is computed in float32 as
the vector units do; integer matmuls accumulate in int32 (int64 here, exact for the sizes CANN takes).

* Rounding to integers is round-half-to-even (``torch.round``): the A2/A3 kernels of DynamicQuant,
  AscendQuantV2 ("round") and Quantize cast float32 to int32 with ``RoundMode::CAST_RINT``.
* int8 outputs saturate to [-128, 127] (uint8 to [0, 255], int32 to its range).
* int4 outputs (``torch.quint4x2``) of the dynamic quantisers are packed 8 per int32 (``formats.pack_int4``);
  elsewhere int4, and fp8, hifloat8 and MX outputs are refused (fp8 outputs: npu_quant_max, quant_lowbit.py).
"""
from __future__ import annotations

import torch

from .formats import pack_int4

_FLOAT16S = (torch.float16, torch.bfloat16)
_FLOATS = (torch.float16, torch.bfloat16, torch.float32)
# torch's ScalarType numbers (what an `int dtype` argument carries) for the dtypes these ops name.
_SCALAR_TYPES = {0: torch.uint8, 1: torch.int8, 3: torch.int32, 5: torch.float16, 6: torch.float32,
                 12: torch.qint8, 13: torch.quint8, 14: torch.qint32, 15: torch.bfloat16, 16: torch.quint4x2,
                 23: torch.float8_e5m2, 24: torch.float8_e4m3fn}
# torch_npu's own dtype numbers (ints on a CPU host; docs/torch-npu-ops.md).
_NPU_DTYPES = {285: "int4", 290: "hifloat8", 291: "float8_e5m2", 292: "float8_e4m3fn", 296: "float4_e2m1fn_x2",
               297: "float4_e1m2fn_x2", 293: "float8_e8m0fnu"}
_INT_RANGES = {torch.int8: (-128, 127), torch.uint8: (0, 255), torch.int32: (-2**31, 2**31 - 1)}


def _fail(op, message, kind=ValueError):
    raise kind(f"npu::{op}: {message}")


def scalar_dtype(op, what, value, default):
    """An `int dtype` argument (a torch.dtype or its ScalarType number) as a torch.dtype."""
    if value is None:
        return default
    if isinstance(value, torch.dtype):
        return value
    if int(value) in _NPU_DTYPES:
        _fail(op, f"{what}={value} (torch_npu.{_NPU_DTYPES[int(value)]}) is a format the CPU simulator does not "
                  "emulate; use int8", NotImplementedError)
    if int(value) not in _SCALAR_TYPES:
        _fail(op, f"{what}={value} is not a dtype this op takes")
    return _SCALAR_TYPES[int(value)]


def _int_out(op, what, dtype):
    """The integer dtype a quantised output is stored in; refuses formats not emulated."""
    plain = {torch.qint8: torch.int8, torch.quint8: torch.uint8, torch.qint32: torch.int32}.get(dtype, dtype)
    if plain == torch.quint4x2:
        _fail(op, f"{what}=torch.quint4x2 (8 int4 values packed into an int32): the CPU simulator does not emulate "
                  "int4 packing; use torch.int8", NotImplementedError)
    if plain in (torch.float8_e5m2, torch.float8_e4m3fn):
        _fail(op, f"{what}={plain} (fp8 output, Ascend 950 only) is not emulated by the CPU simulator",
              NotImplementedError)
    if plain not in _INT_RANGES:
        _fail(op, f"{what}={dtype} is not an integer output dtype of this op")
    return plain


def saturate(values: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Integer-valued float32 `values` clamped to `dtype`'s range and stored as `dtype`."""
    low, high = _INT_RANGES[dtype]
    return values.double().clamp(low, high).to(dtype)   # in float64: int32's bounds are not float32 values


def _check_x(op, x):
    if x.dtype not in _FLOAT16S:
        _fail(op, f"x has dtype {x.dtype}; torch_npu takes float16 or bfloat16", TypeError)
    if x.dim() < 2:
        _fail(op, f"x must have more than one dim (got shape {tuple(x.shape)})")


def _smoothed(op, x, smooth_scales, group_index):
    """x in float32, times smooth_scales (one row of it per group of tokens with group_index)."""
    wide = x.float()
    if smooth_scales is None:
        if group_index is not None:
            _fail(op, "group_index is given without smooth_scales")
        return wide
    if smooth_scales.dtype != x.dtype:
        _fail(op, f"smooth_scales has dtype {smooth_scales.dtype}, x {x.dtype}: they must match", TypeError)
    if group_index is None:
        if smooth_scales.shape != x.shape[-1:]:
            _fail(op, f"smooth_scales of shape {tuple(smooth_scales.shape)} is not ({x.shape[-1]},)")
        return wide * smooth_scales.float()
    rows = wide.reshape(-1, x.shape[-1])
    ends = [int(v) for v in group_index.reshape(-1).tolist()]
    if smooth_scales.dim() != 2 or smooth_scales.shape[1] != x.shape[-1] or smooth_scales.shape[0] != len(ends):
        _fail(op, f"smooth_scales of shape {tuple(smooth_scales.shape)} with {len(ends)} groups is not "
                  f"({len(ends)}, {x.shape[-1]})")
    rising = all(a <= b for a, b in zip([0, *ends[:-1]], ends, strict=True))
    if not rising or (ends and ends[-1] != rows.shape[0]):
        _fail(op, f"group_index {ends} must rise from 0 to the token count {rows.shape[0]} (CANN leaves any other "
                  "value undefined)")
    out, start = torch.empty_like(rows), 0
    for group, end in enumerate(ends):
        out[start:end] = rows[start:end] * smooth_scales[group].float()
        start = end
    return out.reshape(wide.shape)


def _reduce_dims(op, x, quant_mode):
    if quant_mode == "pertoken":
        return (-1,)
    if quant_mode == "pertensor":
        return tuple(range(x.dim()))
    _fail(op, f"quant_mode={quant_mode!r} is not 'pertoken' or 'pertensor'")


# int8 / int4 (torch.quint4x2, packed 8 per int32) dynamic quantisation constants of the A2/A3 kernels
# (dynamic_quant_base.h): symmetric C, asymmetric range R and offset O, the saturation bounds.
_DYNAMIC = {"int8": dict(C=127.0, R=255.0, O=127.0, low=-128, high=127),
            "int4": dict(C=7.0, R=15.0, O=7.0, low=-8, high=7)}


def _dynamic_common(op, x, smooth_scales, group_index, dst_type, quant_mode, dst_type_max):
    _check_x(op, x)
    if dst_type in (16, torch.quint4x2):
        kind = "int4"
        if x.shape[-1] % 8:
            _fail(op, f"int4 output (quint4x2) needs x's last dim to be a multiple of 8, got {tuple(x.shape)}")
    else:
        out = _int_out(op, "dst_type", scalar_dtype(op, "dst_type", dst_type, torch.int8))
        if out != torch.int8:
            _fail(op, f"dst_type={out} is not an output of this op (int8, quint4x2)")
        kind = "int8"
    if dst_type_max:
        _fail(op, f"dst_type_max={dst_type_max} applies to fp8/hifloat8 outputs only (not emulated)",
              NotImplementedError)
    if quant_mode == "pertensor" and group_index is not None:
        _fail(op, "group_index with quant_mode='pertensor' is not defined")
    return _smoothed(op, x, smooth_scales, group_index), _reduce_dims(op, x, quant_mode), kind


def _levels_out(levels, kind):
    """Integer-valued float32 levels saturated to the output: int8, or int4 packed 8 per int32."""
    bounds = _DYNAMIC[kind]
    clamped = levels.clamp(bounds["low"], bounds["high"]).to(torch.int8)
    return clamped if kind == "int8" else pack_int4(clamped)


def npu_dynamic_quant(input, *, smooth_scales=None, group_index=None, dst_type=None,  # noqa: A002 (schema name)
                      quant_mode="pertoken", dst_type_max=0.0):
    """Symmetric, per token (or tensor): f = C / max|x·s| (C 127 int8, 7 int4), y = rint(x·s · f), scale = 1 / f
    (the A2/A3 default kernel, dynamic_quant.h; its other tilings write max · float32(1/C), within an ulp)."""
    op = "npu_dynamic_quant"
    wide, dims, kind = _dynamic_common(op, input, smooth_scales, group_index, dst_type, quant_mode, dst_type_max)
    absmax = wide.abs().amax(dim=dims, keepdim=True)
    if bool((absmax == 0).any()):
        _fail(op, "a token (row) of zeros: CANN computes C / 0 and 0 * inf for it, which its docs leave "
                  "undefined; the simulator refuses it")
    factor = torch.tensor(_DYNAMIC[kind]["C"]) / absmax   # a 0-d tensor: torch turns `float / tensor` into a
    y = _levels_out(torch.round(wide * factor), kind)      # reciprocal product, not IEEE division
    scale = torch.tensor(1.0) / factor
    return y, (scale.squeeze(-1) if quant_mode == "pertoken" else scale.reshape(1))


def npu_dynamic_quant_asymmetric(input, *, smooth_scales=None, group_index=None,  # noqa: A002 (schema name)
                                 dst_type=None, quant_mode="pertoken", dst_type_max=0.0):
    """Asymmetric: scale = max((max - min) / R, 1e-12), offset = O - max / scale, y = rint(x·s · (1 / scale) +
    offset), saturated (int8: R 255, O 127; int4: R 15, O 7, packed 8 per int32)."""
    op = "npu_dynamic_quant_asymmetric"
    wide, dims, kind = _dynamic_common(op, input, smooth_scales, group_index, dst_type, quant_mode, dst_type_max)
    high, low = wide.amax(dim=dims, keepdim=True), wide.amin(dim=dims, keepdim=True)
    scale = torch.clamp_min((high - low) / _DYNAMIC[kind]["R"], 1e-12)
    offset = _DYNAMIC[kind]["O"] - high / scale
    y = _levels_out(torch.round(wide * (torch.tensor(1.0) / scale) + offset), kind)
    if quant_mode == "pertoken":
        return y, scale.squeeze(-1), offset.squeeze(-1)
    return y, scale.reshape(1), offset.reshape(1)


def _per_axis(op, what, tensor, x, axis):
    """A 1-D (or x-ranked) scale/offset laid along x's dim `axis`, broadcastable against x."""
    if tensor.dim() == 1:
        if tensor.shape[0] not in (1, x.shape[axis]):
            _fail(op, f"{what} of {tensor.shape[0]} values does not fit dim {axis} of x ({x.shape[axis]})")
        shape = [1] * x.dim()
        shape[axis] = tensor.shape[0]
        return tensor.reshape(shape)
    if tensor.dim() != x.dim() or any(s != 1 for d, s in enumerate(tensor.shape) if d != axis % x.dim()):
        _fail(op, f"{what} of shape {tuple(tensor.shape)} is not 1-D nor 1 everywhere but dim {axis} of x")
    return tensor


def npu_quantize(self, scales, zero_points, dtype, axis=1, div_mode=True):
    """div_mode: y = rint(x / scales + zero_points) (CANN Quantize); else y = rint(x * scales +
    zero_points) (AscendQuantV2, axis -1 or -2); saturated to the output dtype (torch.quint4x2, div_mode=False
    only: to [-8, 7], packed 8 per int32)."""
    op = "npu_quantize"
    if self.dtype not in _FLOATS:
        _fail(op, f"input has dtype {self.dtype}; torch_npu takes float32, float16, bfloat16", TypeError)
    int4 = dtype in (16, torch.quint4x2)
    if int4 and (div_mode or self.dim() == 0 or self.shape[-1] % 8):
        _fail(op, "dtype=torch.quint4x2 takes div_mode=False and an input whose last dim is a multiple of 8 "
                  f"(torch_npu's doc); got div_mode={div_mode}, shape {tuple(self.shape)}")
    out = torch.int8 if int4 else _int_out(op, "dtype", scalar_dtype(op, "dtype", dtype, torch.int8))
    if not div_mode:
        if out != torch.int8:
            _fail(op, f"dtype={out} with div_mode=False: torch_npu takes torch.qint8 (or quint4x2)")
        axis = -2 if axis == -2 else -1   # torch_npu: axis -2 is the second-last dim, any other the last
        if self.dim() < -axis:
            _fail(op, f"axis {axis} needs an input of at least {-axis} dims")
    elif not -self.dim() <= axis < self.dim():
        _fail(op, f"axis {axis} is out of range for an input of {self.dim()} dims")
    wide = self.float()
    scale = _per_axis(op, "scales", scales, self, axis).float()
    if div_mode and bool((scale == 0).any()):
        _fail(op, "a scale of 0 with div_mode=True: x / 0 is not defined by CANN (its docs require non-zero scales)")
    result = wide / scale if div_mode else wide * scale
    if zero_points is not None:
        result = result + _per_axis(op, "zero_points", zero_points, self, axis).float()
    if int4:
        return pack_int4(torch.round(result).clamp(-8, 7).to(torch.int8))
    return saturate(torch.round(result), out)


_FP19_MASK = 0xFFFFE000   # npu_trans_quant_param keeps a float32 scale's top 19 bits (sign, exponent, 10 mantissa)
_QUANT_FLAG = 1 << 46     # ...and sets bit 46; bits 37-45 carry an int9 offset (int8 outputs only)


def _fp19(bits):
    """The FP19 scale the fixpipe reads, from int64 (or float32 bit) patterns, as float32."""
    return (bits & _FP19_MASK).to(torch.int32).view(torch.float32)


def _scale_as_float(op, scale, out, pertoken_scale, bias, offset):
    """QuantBatchMatmul's scale as float32, for CANN's A2/A3 combinations (aclnnQuantMatmulV4.md):
    float16 output takes an int64 scale without pertoken_scale (FP19, as npu_trans_quant_param packs it;
    torch_npu's eager op packs a float32 scale so itself, truncating) or a float32 scale with pertoken_scale;
    bfloat16 output takes a float32/bfloat16 scale. No offset for float outputs."""
    if offset is not None:
        _fail(op, "offset goes with int8 outputs only in CANN's combinations (not simulated)", NotImplementedError)
    if bias is not None and bias.dtype not in (torch.int32, torch.float32, out):
        _fail(op, f"a {bias.dtype} bias with {out} output is not one of CANN's combinations")
    if scale.dtype == torch.int64:
        if out != torch.float16 or pertoken_scale is not None or (bias is not None and bias.dtype != torch.int32):
            _fail(op, "an int64 scale goes with float16 output, no pertoken_scale and an int32 bias or none (CANN)")
        if bool(((scale & ~(0xFFFFFFFF | _QUANT_FLAG)) != 0).any()):
            _fail(op, "an int64 scale with offset bits (37-45) or other high bits: an int8 requantisation, not "
                      "simulated", NotImplementedError)
        return _fp19(scale)
    if scale.dtype not in (torch.float32, torch.bfloat16):
        _fail(op, f"scale has dtype {scale.dtype}; torch_npu takes float32, bfloat16 or int64", TypeError)
    if out == torch.float16 and scale.dtype != torch.float32:
        _fail(op, "float16 output takes a float32 (or int64) scale")
    if out == torch.float16 and pertoken_scale is None:
        if bias is not None and bias.dtype != torch.int32:
            _fail(op, "float16 output without pertoken_scale takes an int32 bias or none (CANN)")
        return _fp19(scale.view(torch.int32).to(torch.int64))   # torch_npu: npu_trans_quant_param first
    return scale.float()


def npu_quant_matmul(x1, x2, scale, *, offset=None, pertoken_scale=None, bias=None, output_dtype=None,
                     x1_dtype=None, x2_dtype=None, pertoken_scale_dtype=None, scale_dtype=None, group_sizes=None,
                     y_scale=None):
    """int8 x int8, int32 accumulate; then (CANN QuantBatchMatmulV3) acc (+ int32 bias) * scale
    [* pertoken_scale] (+ float bias), rounded once to float16/bfloat16 (scale handling: _scale_as_float)."""
    op = "npu_quant_matmul"
    for name, value in (("x1_dtype", x1_dtype), ("x2_dtype", x2_dtype), ("pertoken_scale_dtype", pertoken_scale_dtype),
                        ("scale_dtype", scale_dtype), ("group_sizes", group_sizes), ("y_scale", y_scale)):
        if value is not None:
            _fail(op, f"{name} (fp8/fp4/MX or grouped quantisation) is not emulated by the CPU simulator",
                  NotImplementedError)
    if x1.dtype != torch.int8 or x2.dtype != torch.int8:
        kind = "int4 packed in int32" if torch.int32 in (x1.dtype, x2.dtype) else f"{x1.dtype} x {x2.dtype}"
        _fail(op, f"{kind} inputs are not simulated; x1 and x2 must be int8", NotImplementedError)
    out = scalar_dtype(op, "output_dtype", output_dtype, torch.int8)
    if out not in _FLOAT16S:
        _fail(op, f"output_dtype={out}: only float16 and bfloat16 outputs are simulated (the int8 requantisation "
                  "and int32 outputs round in the cube's fixpipe, which CANN does not document)", NotImplementedError)
    n = x2.shape[-1]
    if scale.dim() != 1 or scale.shape[0] not in (1, n):
        _fail(op, f"scale of shape {tuple(scale.shape)} is not (1,) or ({n},)")
    if x1.dim() < 2 or x2.dim() < 2 or x1.shape[-1] != x2.shape[-2]:
        _fail(op, f"x1 {tuple(x1.shape)} and x2 {tuple(x2.shape)} do not multiply (x1's k must be x2's "
                  "second-last dim)")
    acc = torch.matmul(x1.to(torch.int64), x2.to(torch.int64))   # exact: CANN's int32 accumulation
    float_bias = bias is not None and bias.dtype != torch.int32
    if bias is not None and not float_bias:
        acc = acc + bias.to(torch.int64)
    if bool((acc.abs() > 2**31 - 1).any()):
        _fail(op, "the int32 accumulation overflows (CANN's int32 accumulator would wrap)")
    result = acc.to(torch.float32) * _scale_as_float(op, scale, out, pertoken_scale, bias, offset)
    if pertoken_scale is not None:
        if pertoken_scale.dtype != torch.float32 or pertoken_scale.shape != x1.shape[-2:-1]:
            _fail(op, f"pertoken_scale must be float32 of shape ({x1.shape[-2]},); got "
                      f"{pertoken_scale.dtype} {tuple(pertoken_scale.shape)}")
        result = result * pertoken_scale.unsqueeze(-1)
    if float_bias:
        result = result + bias.float()
    return result.to(out)


def npu_weight_quant_batchmatmul(x, weight, antiquant_scale, antiquant_offset=None, quant_scale=None,
                                 quant_offset=None, bias=None, antiquant_group_size=0, inner_precise=0,
                                 weight_dtype=None):
    """y = x @ ((weight + antiquant_offset) * antiquant_scale) + bias (CANN WeightQuantBatchMatmulV2),
    the weight dequantised as the A2/A3 kernel does (float16 step by step, bfloat16 in float32 then
    rounded with CAST_RINT), the matmul accumulated in float32 and rounded once."""
    op = "npu_weight_quant_batchmatmul"
    if x.dtype not in _FLOAT16S:
        _fail(op, f"x has dtype {x.dtype}; torch_npu takes float16 or bfloat16", TypeError)
    if weight.dtype != torch.int8 or weight_dtype is not None:
        _fail(op, f"weight of dtype {weight.dtype} (weight_dtype {weight_dtype}): only int8 weights are simulated "
                  "(int4 packed in int32 and fp8/MX weights are not)", NotImplementedError)
    if quant_scale is not None or quant_offset is not None:
        _fail(op, "quant_scale/quant_offset (an int8 output) are not simulated", NotImplementedError)
    if antiquant_scale.dtype != x.dtype:
        _fail(op, f"antiquant_scale has dtype {antiquant_scale.dtype}: only x's dtype ({x.dtype}) is simulated "
                  "(int64 scales are not)", NotImplementedError)
    if x.dim() != 2 or weight.dim() != 2:
        _fail(op, f"x {tuple(x.shape)} and weight {tuple(weight.shape)} must be 2-D (M, K) and (K, N), as the op's "
                  "Meta gives (M, N)")
    k, n = weight.shape[-2], weight.shape[-1]
    if x.shape[-1] != k:
        _fail(op, f"x {tuple(x.shape)} and weight {tuple(weight.shape)} do not multiply")
    # float16: dequantised in float16, each step rounded; bfloat16: in float32, rounded once (the A2/A3 kernel)
    step = (lambda t: t.half().float()) if x.dtype == torch.float16 else (lambda t: t)
    wide = weight.float()
    if antiquant_offset is not None:
        wide = step(wide + _antiquant_param(op, "antiquant_offset", antiquant_offset, k, n, antiquant_group_size))
    wide = wide * _antiquant_param(op, "antiquant_scale", antiquant_scale, k, n, antiquant_group_size)
    result = torch.matmul(x.float(), wide.to(x.dtype).float())
    if bias is not None:
        result = result + bias.float()
    return result.to(x.dtype)


def _antiquant_param(op, what, tensor, k, n, group_size):
    """A per-tensor (1,), per-channel (n,)/(1, n) or per-group (ceil(k / g), n) parameter as a (k, n) float32."""
    wide = tensor.float()
    if group_size:
        groups = -(-k // group_size)
        if tuple(tensor.shape) != (groups, n):
            _fail(op, f"{what} of shape {tuple(tensor.shape)} is not ({groups}, {n}) for group size {group_size}")
        return wide.repeat_interleave(group_size, dim=0)[:k]
    if tensor.numel() == 1:
        return wide.reshape(1, 1)
    if tensor.shape[-1] != n or tensor.numel() != n:
        _fail(op, f"{what} of shape {tuple(tensor.shape)} is not (1,), ({n},) or (1, {n})")
    return wide.reshape(1, n)


from .quant_fused import KERNELS as _FUSED_KERNELS  # noqa: E402  (it uses the helpers above)

KERNELS: dict = {
    **_FUSED_KERNELS,
    "npu_dynamic_quant": npu_dynamic_quant,
    "npu_dynamic_quant_asymmetric": npu_dynamic_quant_asymmetric,
    "npu_quantize": npu_quantize,
    "npu_quant_matmul": npu_quant_matmul,
    "npu_weight_quant_batchmatmul": npu_weight_quant_batchmatmul,
}

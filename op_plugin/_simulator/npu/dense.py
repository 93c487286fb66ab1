"""CPU reference kernels of torch_npu's dense ops: GELU, dtype cast, linear, transpose-batchmatmul; and small
ops of no other family: add-RMS-norm-cast, group-norm-SiLU, prefetch.

Semantics from torch_npu's docs (the wheel's ``_op_plugin_docs.py``), its Meta functions, and CANN's
operator docs (ops-nn ``TransposeBatchMatMul``); 16-bit floats are computed in float32 and rounded once:

* ``npu_gelu(self, approximate)``: ``x * Phi(x)`` ("none", erf form) or the tanh form ("tanh").
* ``npu_dtype_cast(self, dtype, input_dtype)`` / ``_npu_dtype_cast(self, dtype)``: a value cast (floats to
  integers truncate toward zero, as CANN's Cast). ``dtype`` is torch's ScalarType number (torch_npu's
  ``TORCH_DTYPE_ENUM_VALUE_TO_SCALAR_TYPE_MAP``); torch_npu's own formats (int4 285, hifloat8 290,
  float8 291/292, float4 296/297), float8 and quantized types and a reinterpreting ``input_dtype`` are
  refused: their rounding is not simulated.
* ``npu_linear(input, weight, bias)``: ``input @ weight.T + bias`` on 2-D float input and weight (the
  integer forms are refused: TorchAir's converter refuses int8 and no accumulate rule is documented).
* ``npu_transpose_batchmatmul(input, weight, perm_x1, perm_x2, perm_y)``: ``x1 = input.permute(perm_x1)``
  ``[B, M, K]``, ``x2 = weight.permute(perm_x2)`` ``[B, K, N]``, ``y = (x1 @ x2).permute(perm_y)`` ``[M, B, N]``
  (perm_x1 [0, 1, 2] or [1, 0, 2], perm_x2 [0, 1, 2] or [0, 2, 1], perm_y [1, 0, 2], as the Meta checks).
  Refused: ``scale`` (an int8 output quantised by npu_trans_quant_param's packed scales; the rounding is
  not documented), ``batch_split_factor > 1`` (CANN's docs give only the output's shape, ``[factor, M,
  B*N/factor]`` in the English doc and the wheel's Meta, ``[M, factor, B*N/factor]`` in the Chinese README:
  which element goes where is not stated) and ``bias``
  (the Meta refuses it).
* ``npu_format_cast(self, acl_format)``: a copy of ``self``. A format (ND, NZ, ...) is how an NPU lays a
  tensor out in memory; the logical values do not change, and a CPU host has one layout. Refused:
  ``customize_dtype`` / ``input_dtype`` (a storage dtype other than the tensor's). The wheel has no Python
  Meta for it (torch_npu's is C++): ``META`` gives the same shape and dtype.
* ``npu_top_k_top_p(logits, p, k)`` (CANN ApplyTopKTopPWithSorted after a stable ascending sort, ops-nn
  ``index/apply_top_k_top_p_with_sorted``): per row, values below the k-th largest become -inf; then, on
  the softmax of what is left, the values whose ascending cumulative probability is <= 1 - p become -inf
  (the largest always stays); the result in the original order. p or k may be None (that filter is
  skipped), not both.
* ``npu_add_rms_norm_cast(x1, x2, gamma, epsilon)`` (ops-nn aclnnAddRmsNormCast): npu_add_rms_norm's
  ``(y, rstd, x)`` and ``float32(y)`` first (the doc's ``y1Out = float(y2Out)``, the widening of rounded y).
* ``npu_add_rms_norm_v2_functional(x1, x2, gamma, epsilon)``: the functional form of the in-place
  npu_add_rms_norm_v2 (no torch_npu doc; TorchAir's converter defines it): AddRmsNorm on copies of x1 and x2,
  returning ``(rstd, y, x)``, y and x being what npu_add_rms_norm_v2 writes into x1 and x2.
* ``npu_group_norm_silu(input, weight, bias, group, eps)`` (ops-nn GroupNormSilu, torch_npu's docs):
  ``silu(group_norm(input) * weight + bias)`` in float32, rounded once, with the per-(N, group) mean and
  rstd = 1 / sqrt(population variance + eps) (in weight's dtype when weight and bias are given, as the Meta).
* ``npu_masked_softmax_with_rel_pos_bias(x, atten_mask, relative_pos_bias, scale_value, inner_precision_mode)``
  (ops-nn MaskedSoftmaxWithRelPosBias README, Swin's window attention): ``softmax(scale_value * x + atten_mask +
  relative_pos_bias)`` over the last dim in float32 with the README's shapes: x ``(B*W, N, S1, S2)`` or ``(B, W,
  N, S1, S2)``, atten_mask ``(W, S1, S2)`` (or its 4/5-D forms), relative_pos_bias ``(N, S1, S2)`` (likewise).
* ``npu_ffn(x, weight1, weight2, activation, ...)`` (ops-transformer FFN, torch_npu's docs): ``activation(x W1 +
  b1) W2 + b2``, non-quantised and without experts; float16 with inner_precise 1 rounds ``x W1 + b1`` to float16
  first (the kernel's high-performance path), else it stays float32; the activation (relu, silu, gelu in its tanh
  form, fastgelu as AscendC's FasterGelu) is rounded to x's dtype before the second matmul. Experts, GLU
  activations and quantisation are refused.
* ``npu_prefetch(self, dependency, max_size, offset)``: a prefetch into the NPU's L2 cache: no output and no
  effect on any value, so nothing is done beyond checking max_size > 0 and offset >= 0.
"""
from __future__ import annotations

import torch

from ..._base.numerics import opmath
from .formats import FP8_BY_NUMBER, FP8_LARGEST

_FLOATS = (torch.float16, torch.bfloat16, torch.float32)
# torch's ScalarType numbers that npu_dtype_cast takes as plain casts (torch_npu's map, minus the formats
# whose rounding is not simulated: quantized, float8, complex32, bits, and torch_npu's own 28x/29x).
_PLAIN_DTYPES = {0: torch.uint8, 1: torch.int8, 2: torch.int16, 3: torch.int32, 4: torch.int64, 5: torch.float16,
                 6: torch.float32, 7: torch.float64, 9: torch.complex64, 10: torch.complex128, 11: torch.bool,
                 15: torch.bfloat16}


def _check_float(op, **tensors):
    for name, tensor in tensors.items():
        if tensor.dtype not in _FLOATS:
            raise TypeError(f"npu::{op}: {name} has dtype {tensor.dtype}; it takes float16, bfloat16 or float32")


def npu_gelu(self, *, approximate="none"):
    _check_float("npu_gelu", self=self)
    if approximate not in ("none", "tanh"):
        raise ValueError(f"npu::npu_gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    return torch.nn.functional.gelu(opmath(self), approximate=approximate).to(self.dtype)


def plain_dtype(op, what, number):
    """torch's ScalarType number `number` as a dtype npu_dtype_cast can produce here, else a refusal."""
    if isinstance(number, torch.dtype):
        return number
    if number not in _PLAIN_DTYPES:
        raise NotImplementedError(f"npu::{op}: {what}={number} is a format whose cast is not simulated "
                                  "(torch_npu's int4/hifloat8/float8/float4, quantized or bit types)")
    return _PLAIN_DTYPES[number]


def npu_dtype_cast(self, dtype, input_dtype=None):
    op = "npu_dtype_cast"
    if input_dtype is not None and plain_dtype(op, "input_dtype", input_dtype) != self.dtype:
        raise NotImplementedError(f"npu::{op}: input_dtype={input_dtype} reinterprets {self.dtype} data; not simulated")
    fp8 = FP8_BY_NUMBER.get(dtype) if isinstance(dtype, int) else None
    if fp8 is not None:   # CANN's Cast rounds half to even; beyond the range the core's saturation mode decides
        wide = self.double()
        if self.numel() and (not bool(wide.isfinite().all()) or float(wide.abs().max()) > FP8_LARGEST[fp8]):
            raise NotImplementedError(f"npu::{op}: a cast to {fp8} of inf, NaN or a value beyond {FP8_LARGEST[fp8]}: "
                                      "CANN's result depends on the core's saturation mode (not documented for Cast)")
        return self.to(fp8)
    return self.to(plain_dtype(op, "dtype", dtype), copy=True)


def _npu_dtype_cast(self, dtype):
    return self.to(dtype, copy=True)


def npu_linear(input, weight, bias=None):
    _check_float("npu_linear", input=input, weight=weight)
    if input.dim() != 2 or weight.dim() != 2 or input.shape[1] != weight.shape[1]:
        raise ValueError(f"npu::npu_linear: input [M, K] and weight [N, K] expected, got {tuple(input.shape)} "
                         f"and {tuple(weight.shape)}")
    out = opmath(input).float() @ opmath(weight).float().t()
    if bias is not None:
        out = out + opmath(bias).float()
    return out.to(input.dtype)


def _perm(op, what, value, default, allowed):
    perm = list(value) if value else default
    if perm not in allowed:
        raise ValueError(f"npu::{op}: {what}={perm} is not one of {allowed}")
    return perm


def npu_transpose_batchmatmul(input, weight, *, bias=None, scale=None, perm_x1=None, perm_x2=None,
                              perm_y=None, batch_split_factor=1):
    op = "npu_transpose_batchmatmul"
    _check_float(op, input=input, weight=weight)
    if scale is not None:
        raise NotImplementedError(f"npu::{op}: scale (an int8 output) is not simulated: CANN does not document "
                                  "how the packed scale is applied and rounded")
    if bias is not None:
        raise ValueError(f"npu::{op}: bias is not supported by TransposeBatchMatMul (torch_npu's Meta refuses it)")
    if batch_split_factor not in (None, 1):
        raise NotImplementedError(f"npu::{op}: batch_split_factor={batch_split_factor} is not simulated: CANN's docs "
                                  "give the output's shape only, not which element goes where")
    if input.dim() != 3 or weight.dim() != 3:
        raise ValueError(f"npu::{op}: input and weight must be 3-D")
    x1 = input.permute(_perm(op, "perm_x1", perm_x1, [0, 1, 2], [[0, 1, 2], [1, 0, 2]]))
    x2 = weight.permute(_perm(op, "perm_x2", perm_x2, [0, 1, 2], [[0, 1, 2], [0, 2, 1]]))
    perm_out = _perm(op, "perm_y", perm_y, [1, 0, 2], [[1, 0, 2]])
    if x1.shape[0] != x2.shape[0] or x1.shape[2] != x2.shape[1]:
        raise ValueError(f"npu::{op}: permuted input {tuple(x1.shape)} and weight {tuple(x2.shape)} are not "
                         "[B, M, K] and [B, K, N]")
    out = torch.bmm(opmath(x1).float(), opmath(x2).float()).permute(perm_out)
    return out.to(input.dtype).contiguous()


def npu_format_cast(self, acl_format, *, customize_dtype=None, input_dtype=None):
    if customize_dtype is not None or input_dtype is not None:
        raise NotImplementedError("npu::npu_format_cast: customize_dtype/input_dtype (a storage dtype other than the "
                                  "tensor's) are not simulated")
    return self.clone()


def npu_format_cast_meta(self, acl_format, *, customize_dtype=None, input_dtype=None):
    return torch.empty_like(self)


def npu_top_k_top_p(logits, p=None, k=None):
    op = "npu_top_k_top_p"
    _check_float(op, logits=logits)
    if p is None and k is None:
        raise ValueError(f"npu::{op}: p and k cannot both be None")
    if logits.dim() != 2:
        raise ValueError(f"npu::{op}: logits must be 2-D [batch, vocab], got {tuple(logits.shape)}")
    batch, vocab = logits.shape
    values, indices = torch.sort(opmath(logits).float(), dim=-1, stable=True)  # ascending
    if k is not None:
        if k.dtype != torch.int32 or tuple(k.shape) != (batch,) or bool(((k < 1) | (k > vocab)).any()):
            raise ValueError(f"npu::{op}: k must be int32 [{batch}] with values in [1, {vocab}]")
        kth = values.gather(1, (vocab - k.long()).unsqueeze(1))
        values = values.masked_fill(values < kth, float("-inf"))
    if p is not None:
        if p.dtype != logits.dtype or tuple(p.shape) != (batch,):
            raise ValueError(f"npu::{op}: p must have logits' dtype and shape [{batch}]")
        cumulative = torch.softmax(values, dim=-1).cumsum(dim=-1)
        drop = cumulative <= (1 - opmath(p).float()).unsqueeze(1)
        drop[:, -1] = False  # the largest value always stays
        values = values.masked_fill(drop, float("-inf"))
    return torch.empty_like(values).scatter_(1, indices, values).to(logits.dtype)


def npu_add_rms_norm_cast(x1, x2, gamma, epsilon=1e-6):
    from .reference import npu_add_rms_norm

    if x1.dtype not in (torch.float16, torch.bfloat16):
        raise TypeError(f"npu::npu_add_rms_norm_cast: x1 has dtype {x1.dtype}; CANN takes float16 or bfloat16")
    y, rstd, x = npu_add_rms_norm(x1, x2, gamma, epsilon)
    return y.float(), y, rstd, x


def npu_add_rms_norm_v2_functional(x1, x2, gamma, epsilon=1e-6):
    from .reference import npu_add_rms_norm

    y, rstd, x = npu_add_rms_norm(x1, x2, gamma, epsilon)
    return rstd, y, x


def npu_group_norm_silu(input, weight, bias, group, eps=1e-5):  # noqa: A002  (schema name)
    op = "npu_group_norm_silu"
    if input.dim() < 2 or group <= 0 or input.shape[1] % group:
        raise ValueError(f"npu::{op}: input {tuple(input.shape)} must be (N, C, *) with C divisible by group={group}")
    for name, tensor in (("input", input), ("weight", weight), ("bias", bias)):
        if tensor is not None and tensor.dtype not in (torch.float16, torch.bfloat16, torch.float32):
            raise TypeError(f"npu::{op}: {name} has dtype {tensor.dtype}; it takes float16, bfloat16 or float32")
        if tensor is not None and name != "input" and tuple(tensor.shape) != (input.shape[1],):
            raise ValueError(f"npu::{op}: {name} {tuple(tensor.shape)} must be (C,) = ({input.shape[1]},)")
    wide = input.float()
    normed = torch.nn.functional.group_norm(wide, group, None if weight is None else weight.float(),
                                            None if bias is None else bias.float(), eps)
    variance, mean = torch.var_mean(wide.reshape(input.shape[0], group, -1), dim=-1, unbiased=False)
    stats = weight.dtype if weight is not None and bias is not None else input.dtype
    return (torch.nn.functional.silu(normed).to(input.dtype), mean.to(stats),
            torch.rsqrt(variance + eps).to(stats))


def npu_masked_softmax_with_rel_pos_bias(x, atten_mask, relative_pos_bias, scale_value=1.0, inner_precision_mode=0):
    op = "npu_masked_softmax_with_rel_pos_bias"
    if x.dim() not in (4, 5):
        raise ValueError(f"npu::{op}: x {tuple(x.shape)} must be (B*W, N, S1, S2) or (B, W, N, S1, S2)")
    *_, n, s1, s2 = x.shape
    windows = 1 if atten_mask is None else atten_mask.numel() // (s1 * s2)
    bad_mask = atten_mask is not None and (tuple(atten_mask.shape[-2:]) != (s1, s2) or x.numel() % atten_mask.numel())
    if relative_pos_bias.numel() != n * s1 * s2 or bad_mask:
        raise ValueError(f"npu::{op}: relative_pos_bias {tuple(relative_pos_bias.shape)} must hold (N, S1, S2) = "
                         f"{(n, s1, s2)} and atten_mask end in (S1, S2) with W dividing x's windows")
    batch = x.numel() // (windows * n * s1 * s2)
    view = (batch, windows, n, s1, s2)
    logits = torch.mul(x.float().reshape(view), scale_value) + relative_pos_bias.float().reshape(n, s1, s2)
    if atten_mask is not None:
        logits = logits + atten_mask.float().reshape(windows, 1, s1, s2)
    return torch.nn.functional.softmax(logits, dim=-1).reshape(x.shape).to(x.dtype)


_FFN_ACTIVATIONS = {
    "relu": torch.nn.functional.relu,
    "silu": torch.nn.functional.silu,
    "gelu": lambda h: torch.nn.functional.gelu(h, approximate="tanh"),
    "fastgelu": lambda h: torch.sigmoid(1.702 * h) * h,   # = FasterGelu's x / (1 + e^{-1.702|x|}) e^{0.851(x - |x|)}
}


def npu_ffn(x, weight1, weight2, activation, *, expert_tokens=None, expert_tokens_index=None, bias1=None, bias2=None,
            scale=None, offset=None, deq_scale1=None, deq_scale2=None, antiquant_scale1=None, antiquant_scale2=None,
            antiquant_offset1=None, antiquant_offset2=None, inner_precise=None, output_dtype=None):
    op = "npu_ffn"
    quant = (scale, offset, deq_scale1, deq_scale2, antiquant_scale1, antiquant_scale2, antiquant_offset1,
             antiquant_offset2)
    if expert_tokens is not None or expert_tokens_index is not None:
        raise NotImplementedError(f"npu::{op}: expert_tokens: the expert-grouped FFN is not simulated")
    if any(t is not None for t in quant) or output_dtype is not None or x.dtype not in (torch.float16, torch.bfloat16):
        raise NotImplementedError(f"npu::{op}: only the non-quantised float16/bfloat16 FFN is simulated")
    if activation not in _FFN_ACTIVATIONS:
        raise NotImplementedError(f"npu::{op}: activation {activation!r}: only {sorted(_FFN_ACTIVATIONS)} are "
                                  "simulated")
    if inner_precise not in (None, 0, 1):
        raise ValueError(f"npu::{op}: inner_precise {inner_precise} is not 0 (high precision) or 1 (high performance)")
    chained = x.shape[-1] == weight1.shape[0] and weight1.shape[1] == weight2.shape[0]
    if weight1.dim() != 2 or weight2.dim() != 2 or not chained:
        raise ValueError(f"npu::{op}: x {tuple(x.shape)}, weight1 {tuple(weight1.shape)}, weight2 "
                         f"{tuple(weight2.shape)} must chain as (M, K1), (K1, N1), (N1, N2)")
    h = x.float() @ weight1.float() + (0 if bias1 is None else bias1.float())
    if x.dtype == torch.float16 and inner_precise == 1:
        h = h.half().float()
    h = _FFN_ACTIVATIONS[activation](h).to(x.dtype).float()
    return (h @ weight2.float() + (0 if bias2 is None else bias2.float())).to(x.dtype)


def npu_prefetch(self, dependency, max_size, offset=0):
    if max_size <= 0 or offset < 0:
        raise ValueError(f"npu::npu_prefetch: max_size {max_size} must be > 0 and offset {offset} >= 0")


KERNELS = {
    "npu_add_rms_norm_cast": npu_add_rms_norm_cast,
    "npu_add_rms_norm_v2_functional": npu_add_rms_norm_v2_functional,
    "npu_group_norm_silu": npu_group_norm_silu,
    "npu_prefetch": npu_prefetch,
    "npu_ffn": npu_ffn,
    "npu_masked_softmax_with_rel_pos_bias": npu_masked_softmax_with_rel_pos_bias,
    "npu_format_cast": npu_format_cast,
    "npu_top_k_top_p": npu_top_k_top_p,
    "npu_gelu": npu_gelu,
    "npu_dtype_cast": npu_dtype_cast,
    "_npu_dtype_cast": _npu_dtype_cast,
    "npu_linear": npu_linear,
    "npu_transpose_batchmatmul": npu_transpose_batchmatmul,
}

# Meta functions for ops the wheel gives none in Python (ops.py registers them where the wheel has none).
META = {"npu_format_cast": npu_format_cast_meta}

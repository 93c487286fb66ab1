"""CPU kernels of torch_npu's dense ops: GELU, dtype cast, linear, transpose-batchmatmul; and small ops of no
other family: add-RMS-norm-cast, group-norm-SiLU, windowed softmax, FFN, format cast, top-k/top-p, prefetch.

On an NPU an eager op runs the CANN kernel its GE type runs in a graph, so the ops TorchAir lowers to one GE
node are adapters over that GE kernel (``ge_op(type)``; semantics and refusals documented with the kernel), mapping
torch_npu's arguments onto the GE op's inputs and attrs and naming the op in every refusal:

* ``npu_gelu(self, approximate)`` -> GeluV2 (``interpreter/kernels/activation/pointwise.py``).
* ``npu_dtype_cast(self, dtype, input_dtype)`` / ``_npu_dtype_cast(self, dtype)`` -> Cast
  (``kernels/math/unary.py``; floats to integers truncate toward zero). ``dtype`` is torch's ScalarType number
  (torch_npu's ``TORCH_DTYPE_ENUM_VALUE_TO_SCALAR_TYPE_MAP``) or a dtype; torch_npu's own formats (int4 285,
  hifloat8 290, float4 296/297), quantized and bit types and a reinterpreting ``input_dtype`` are refused here
  (the Bitcast forms of TorchAir's converter); float8 (23/24, 291/292) is Cast's, within the format's range.
* ``npu_linear(input, weight, bias)`` -> MatMul with transpose_x2 (``kernels/matmul/matmul.py``), float input
  and weight (the integer forms are refused, as TorchAir's converter refuses int8).
* ``npu_transpose_batchmatmul(input, weight, perm_x1, perm_x2, perm_y)`` -> TransposeBatchMatMul: perm_x1
  [0, 1, 2] or [1, 0, 2], perm_x2 [0, 1, 2] or [0, 2, 1], perm_y [1, 0, 2] (the wheel's Meta checks these before
  the kernel runs); scale, bias and batch_split_factor > 1 are the kernel's refusals.
* ``npu_add_rms_norm_cast(x1, x2, gamma, epsilon)`` -> AddRmsNormCast (``kernels/norm/rms_norm.py``).
* ``npu_add_rms_norm_v2_functional(x1, x2, gamma, epsilon)`` -> AddRmsNorm, outputs reordered ``(rstd, y, x)``
  as TorchAir's converter does (no torch_npu doc).
* ``npu_group_norm_silu(input, weight, bias, group, eps)`` -> GroupNormSilu (``kernels/norm/group_norm.py``).
* ``npu_masked_softmax_with_rel_pos_bias(...)`` -> MaskedSoftmaxWithRelPosBias (``kernels/activation/softmax.py``).
* ``npu_ffn(x, weight1, weight2, activation, ...)`` -> FFN (``kernels/ffn/ffn.py``); expert_tokens_index is
  FFN's expert_tokens with tokens_index_flag, both at once refused (TorchAir's converter).
* ``npu_prefetch(self, dependency, max_size, offset)`` -> Cmo (type 6, prefetch): no output, no effect on values.

No GE counterpart, so their own kernels (semantics from torch_npu's docs and CANN's):
* ``npu_format_cast(self, acl_format)``: a copy of ``self``. A format (ND, NZ, ...) is how an NPU lays a
  tensor out in memory; the logical values do not change, and a CPU host has one layout. Refused:
  ``customize_dtype`` / ``input_dtype`` (a storage dtype other than the tensor's). The wheel has no Python
  Meta for it (torch_npu's is C++): ``META`` gives the same shape and dtype.
* ``npu_top_k_top_p(logits, p, k)`` (CANN ApplyTopKTopPWithSorted after a stable ascending sort, ops-nn
  ``index/apply_top_k_top_p_with_sorted``): per row, values below the k-th largest become -inf; then, on
  the softmax of what is left, the values whose ascending cumulative probability is <= 1 - p become -inf
  (the largest always stays); the result in the original order. p or k may be None (that filter is
  skipped), not both.
"""
from __future__ import annotations

import torch

from ..._base.numerics import opmath
from ..._ge.values import TORCH_TO_GE
from ..interpreter.calls import ge_op
from ..interpreter.errors import KernelError
from .checks import named_refusals
from .formats import FP8_BY_NUMBER

_FLOATS = (torch.float16, torch.bfloat16, torch.float32)
# torch's ScalarType numbers that npu_dtype_cast takes as plain casts (torch_npu's map, minus the formats
# whose rounding is not simulated: quantized, complex32, bits, and torch_npu's own 28x/29x but float8).
_PLAIN_DTYPES = {0: torch.uint8, 1: torch.int8, 2: torch.int16, 3: torch.int32, 4: torch.int64, 5: torch.float16,
                 6: torch.float32, 7: torch.float64, 9: torch.complex64, 10: torch.complex128, 11: torch.bool,
                 15: torch.bfloat16}


def _check_float(op, **tensors):
    for name, tensor in tensors.items():
        if tensor.dtype not in _FLOATS:
            raise TypeError(f"npu::{op}: {name} has dtype {tensor.dtype}; it takes float16, bfloat16 or float32")


@named_refusals("npu_gelu")
def npu_gelu(self, *, approximate="none"):
    return ge_op("GeluV2")(self, approximate=approximate)


def plain_dtype(op, what, number):
    """torch's ScalarType number `number` as a dtype npu_dtype_cast can produce here, else a refusal."""
    if isinstance(number, torch.dtype):
        return number
    if number not in _PLAIN_DTYPES:
        raise NotImplementedError(f"npu::{op}: {what}={number} is a format whose cast is not simulated "
                                  "(torch_npu's int4/hifloat8/float4, quantized or bit types)")
    return _PLAIN_DTYPES[number]


def cast(x, dtype):
    """x cast to `dtype` by the Cast GE kernel, always a new tensor (Cast of x to its own dtype is x itself)."""
    if dtype not in TORCH_TO_GE:
        raise KernelError(f"a cast to {dtype} has no GE dtype")
    out = ge_op("Cast")(x, dst_type=TORCH_TO_GE[dtype])
    return out.clone() if out is x else out


@named_refusals("npu_dtype_cast")
def npu_dtype_cast(self, dtype, input_dtype=None):
    op = "npu_dtype_cast"
    if input_dtype is not None and plain_dtype(op, "input_dtype", input_dtype) != self.dtype:
        raise NotImplementedError(f"npu::{op}: input_dtype={input_dtype} reinterprets {self.dtype} data; not simulated")
    fp8 = FP8_BY_NUMBER.get(dtype) if isinstance(dtype, int) else None
    return cast(self, fp8 if fp8 is not None else plain_dtype(op, "dtype", dtype))


@named_refusals("_npu_dtype_cast")
def _npu_dtype_cast(self, dtype):
    return cast(self, dtype)


@named_refusals("npu_linear")
def npu_linear(input, weight, bias=None):  # schema name
    _check_float("npu_linear", input=input, weight=weight)
    return ge_op("MatMul")(input, weight, bias, transpose_x1=False, transpose_x2=True)


def _perm(op, what, value, default, allowed):
    perm = list(value) if value else default
    if perm not in allowed:
        raise ValueError(f"npu::{op}: {what}={perm} is not one of {allowed}")
    return perm


@named_refusals("npu_transpose_batchmatmul")
def npu_transpose_batchmatmul(input, weight, *, bias=None, scale=None, perm_x1=None, perm_x2=None,
                              perm_y=None, batch_split_factor=1):
    op = "npu_transpose_batchmatmul"
    return ge_op("TransposeBatchMatMul")(
        input, weight, bias, scale, perm_x1=_perm(op, "perm_x1", perm_x1, [0, 1, 2], [[0, 1, 2], [1, 0, 2]]),
        perm_x2=_perm(op, "perm_x2", perm_x2, [0, 1, 2], [[0, 1, 2], [0, 2, 1]]),
        perm_y=_perm(op, "perm_y", perm_y, [1, 0, 2], [[1, 0, 2]]),
        batch_split_factor=1 if batch_split_factor is None else batch_split_factor)


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


@named_refusals("npu_add_rms_norm_cast")
def npu_add_rms_norm_cast(x1, x2, gamma, epsilon=1e-6):
    return ge_op("AddRmsNormCast")(x1, x2, gamma, epsilon=epsilon)


@named_refusals("npu_add_rms_norm_v2_functional")
def npu_add_rms_norm_v2_functional(x1, x2, gamma, epsilon=1e-6):
    y, rstd, x = ge_op("AddRmsNorm")(x1, x2, gamma, epsilon=epsilon)
    return rstd, y, x


@named_refusals("npu_group_norm_silu")
def npu_group_norm_silu(input, weight, bias, group, eps=1e-5):  # schema name
    return ge_op("GroupNormSilu")(input, weight, bias, num_groups=group, eps=eps)


@named_refusals("npu_masked_softmax_with_rel_pos_bias")
def npu_masked_softmax_with_rel_pos_bias(x, atten_mask, relative_pos_bias, scale_value=1.0, inner_precision_mode=0):
    return ge_op("MaskedSoftmaxWithRelPosBias")(x, atten_mask, relative_pos_bias, scale_value=scale_value,
                                                inner_precision_mode=inner_precision_mode)


# npu_ffn's output_dtype as FFN's attr (TorchAir's converter: -1 when None)
_FFN_OUTPUT_DTYPES = {None: -1, torch.float16: 0, torch.bfloat16: 1}


@named_refusals("npu_ffn")
def npu_ffn(x, weight1, weight2, activation, *, expert_tokens=None, expert_tokens_index=None, bias1=None, bias2=None,
            scale=None, offset=None, deq_scale1=None, deq_scale2=None, antiquant_scale1=None, antiquant_scale2=None,
            antiquant_offset1=None, antiquant_offset2=None, inner_precise=None, output_dtype=None):
    op = "npu_ffn"
    if expert_tokens is not None and expert_tokens_index is not None:
        raise ValueError(f"npu::{op}: expert_tokens and expert_tokens_index cannot both be given")
    if inner_precise not in (None, 0, 1):
        raise ValueError(f"npu::{op}: inner_precise {inner_precise} is not 0 (high precision) or 1 (high performance)")
    if output_dtype not in _FFN_OUTPUT_DTYPES:
        raise ValueError(f"npu::{op}: output_dtype {output_dtype} is not float16 or bfloat16")
    tokens = expert_tokens if expert_tokens_index is None else expert_tokens_index
    tokens = None if tokens is None else torch.tensor(list(tokens), dtype=torch.int64)
    return ge_op("FFN")(x, weight1, weight2, tokens, bias1, bias2, scale, offset, deq_scale1, deq_scale2,
                        antiquant_scale1, antiquant_scale2, antiquant_offset1, antiquant_offset2,
                        activation=activation, inner_precise=inner_precise or 0,
                        output_dtype=_FFN_OUTPUT_DTYPES[output_dtype],
                        tokens_index_flag=expert_tokens_index is not None)


@named_refusals("npu_prefetch")
def npu_prefetch(self, dependency, max_size, offset=0):
    ge_op("Cmo")(self, max_size=max_size, type=6, offset=offset)


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

"""CPU kernels of torch_npu's backward ops, and the autograd formulas torch_npu registers for its forward ops
(its C++ ``NpuRmsNormBackward0`` ... nodes, generated from op-plugin's derivatives.yaml).

On an NPU a backward op runs the CANN kernel its GE type runs in a graph, so each is an adapter over that GE
kernel (``ge_op(type)``; semantics and refusals documented with the kernel) that maps the arguments and names the
op in every refusal:

* ``npu_rms_norm_backward(dy, self, gamma, rstd) -> (dx, dgamma)`` -> RmsNormGrad (``interpreter/kernels/norm/
  rms_norm.py``; aclnnRmsNormGrad): dx in self's dtype, dgamma float32.
* ``npu_swiglu_backward(grad_output, self, dim)`` -> SwiGluGrad (``kernels/activation/swiglu.py``).
* ``npu_rotary_mul_backward(grad, self, r1, r2, rotary_mode)`` -> RotaryPositionEmbeddingGrad (``kernels/
  posembedding/rope.py``, the gradient of every mode: "half", "interleave", "quarter", "interleave-half"), r1/r2
  as cos/sin. TorchAir lowers the half mode off Ascend 950 to RotaryMulGrad (4-D, D a multiple of 64), the same
  values up to float32 rounding.
* ``npu_gelu_backward(grad_output, self, approximate)`` -> GeluGradV2 (``kernels/activation/pointwise.py``).
* ``npu_dtype_cast_backward(grad, dtype, ...)`` / ``_npu_dtype_cast_backward`` -> Cast (TorchAir's converter).
* ``npu_linear_backward(grad, input, weight) -> (grad @ weight, grad^T @ input)``: TorchAir has no converter
  for it; its two products are the MatMul GE kernel's (npu_linear's own GE type), as aclnn's matmuls.
* ``_npu_rms_norm_backward_quant(dy, x, rstd, gamma, scale_x, *, offset_x, div_mode, quant_mode, dst_type)``:
  the RMS-norm gradient with dx quantised to int8 from float32, ``rint(dx / scale_x + offset_x)`` (``* scale_x``
  without div_mode), saturated; dgamma float32 (aclnnRmsNormGradQuant, computed by the RmsNormGradQuant GE
  kernel, ``interpreter/kernels/norm/rms_norm.py``). hifloat8 dx (dst_type 290) has no CPU dtype: refused.

Autograd (``AUTOGRAD``, registered by ops.py for the Autograd key): ``npu_rms_norm`` (self, gamma; rstd
not differentiable), ``npu_swiglu``, ``npu_rotary_mul`` (self, r1, r2; a ``rotate`` matrix is refused:
torch_npu's formula does not take it), ``npu_gelu``, ``npu_linear`` (input, weight; bias: the gradient
summed to its shape), ``npu_dtype_cast`` / ``_npu_dtype_cast`` (grad cast back to the input's dtype by
npu_dtype_cast_backward), ``npu_fusion_attention`` (query, key, value: ``npu_fusion_attention_grad`` with the
forward's softmax_max / softmax_sum / softmax_out / output and seed / offset / numels, as torch_npu's formula;
the grad kernel is in ``attention.py``). Each formula calls the backward op above through the dispatcher, so a
gradient runs the same GE kernel a compiled backward graph runs. Forward outputs that are not tensors (the fusion
attention's ints) are skipped.
"""
from __future__ import annotations

import torch

from ..interpreter.calls import ge_op
from .checks import named_refusals, rank, same_shape
from .dense import cast, plain_dtype


@named_refusals("npu_rms_norm_backward")
def npu_rms_norm_backward(dy, self, gamma, rstd):
    return ge_op("RmsNormGrad")(dy, self, rstd, gamma)


@named_refusals("npu_swiglu_backward")
def npu_swiglu_backward(grad_output, self, dim=-1):
    return ge_op("SwiGluGrad")(grad_output, self, dim=dim)


# rotary_mode as RotaryPositionEmbeddingGrad's mode attr (TorchAir's converter's table)
_ROTARY_MODES = {"half": 0, "interleave": 1, "quarter": 2, "interleave-half": 3}


@named_refusals("npu_rotary_mul_backward")
def npu_rotary_mul_backward(grad, self, r1, r2, rotary_mode="half"):
    if rotary_mode not in _ROTARY_MODES:
        raise ValueError(f"npu::npu_rotary_mul_backward: rotary_mode {rotary_mode!r} is not 'half', 'interleave', "
                         "'quarter' or 'interleave-half'")
    return ge_op("RotaryPositionEmbeddingGrad")(grad, r1, r2, self, mode=_ROTARY_MODES[rotary_mode])


@named_refusals("npu_gelu_backward")
def npu_gelu_backward(grad_output, self, *, approximate="none"):
    same_shape("npu_gelu_backward", self=self, grad_output=grad_output)
    return ge_op("GeluGradV2")(grad_output, self, approximate=approximate)


@named_refusals("npu_linear_backward")
def npu_linear_backward(grad, input, weight):  # schema name
    op = "npu_linear_backward"
    for name, tensor in (("grad", grad), ("input", input), ("weight", weight)):
        rank(op, name, tensor, 2)
    if grad.shape[0] != input.shape[0] or grad.shape[1] != weight.shape[0] or input.shape[1] != weight.shape[1]:
        raise ValueError(f"npu::{op}: grad {tuple(grad.shape)}, input {tuple(input.shape)}, weight "
                         f"{tuple(weight.shape)} are not (M, N), (M, K), (N, K)")
    matmul = ge_op("MatMul")
    d_input = matmul(grad, weight, None, transpose_x1=False, transpose_x2=False)
    d_weight = matmul(grad, input, None, transpose_x1=True, transpose_x2=False)
    return d_input, d_weight


@named_refusals("npu_dtype_cast_backward")
def npu_dtype_cast_backward(grad, dtype, grad_dtype=None, input_dtype=None):
    op = "npu_dtype_cast_backward"
    if grad_dtype is not None or input_dtype is not None:
        raise NotImplementedError(f"npu::{op}: grad_dtype/input_dtype (torch_npu's own formats) are not simulated")
    return cast(grad, plain_dtype(op, "dtype", dtype))


@named_refusals("_npu_dtype_cast_backward")
def _npu_dtype_cast_backward(grad, dtype):
    return cast(grad, dtype)


_TORCH_INT8, _TORCH_NPU_HIFLOAT8, _GE_INT8 = 1, 290, 2   # torch's int8; torch_npu's hifloat8; ge::DT_INT8


@named_refusals("_npu_rms_norm_backward_quant")
def _npu_rms_norm_backward_quant(dy, x, rstd, gamma, scale_x, *, offset_x=None, div_mode=True, quant_mode="static",
                                 dst_type=1):
    """An adapter over ge_op("RmsNormGradQuant"), as TorchAir's converter lowers it (the GE kernel's refusals)."""
    if dst_type == _TORCH_NPU_HIFLOAT8:
        raise NotImplementedError("npu::_npu_rms_norm_backward_quant: dst_type=290 (hifloat8) has no CPU dtype; only "
                                  "int8 dx is simulated")
    if dst_type not in (None, _TORCH_INT8):
        raise ValueError(f"npu::_npu_rms_norm_backward_quant: dst_type={dst_type}: dx is int8 (1) or hifloat8 (290) "
                         "(aclnnRmsNormGradQuant)")
    return ge_op("RmsNormGradQuant")(dy, x, rstd, gamma, scale_x, offset_x, div_mode=True if div_mode is None else
                                     div_mode, quant_mode=quant_mode, dst_type=_GE_INT8)


KERNELS = {
    "_npu_rms_norm_backward_quant": _npu_rms_norm_backward_quant,
    "npu_rms_norm_backward": npu_rms_norm_backward,
    "npu_swiglu_backward": npu_swiglu_backward,
    "npu_rotary_mul_backward": npu_rotary_mul_backward,
    "npu_gelu_backward": npu_gelu_backward,
    "npu_linear_backward": npu_linear_backward,
    "npu_dtype_cast_backward": npu_dtype_cast_backward,
    "_npu_dtype_cast_backward": _npu_dtype_cast_backward,
}


def _sum_to(t, shape):
    lead = t.dim() - len(shape)
    t = t.sum(dim=list(range(lead))) if lead else t
    dims = [i for i, n in enumerate(shape) if n == 1 and t.shape[i] != 1]
    return t.sum(dim=dims, keepdim=True) if dims else t


# ---- autograd: torch_npu's formulas, calling the backward ops above through the dispatcher ----

_NPU = torch.ops.npu


def _rms_norm(ctx, grads, inputs, outputs, kwargs):
    x, gamma = inputs[0], inputs[1]
    return _NPU.npu_rms_norm_backward(grads[0], x, gamma, outputs[1])


def _swiglu(ctx, grads, inputs, outputs, kwargs):
    dim = inputs[1] if len(inputs) > 1 else kwargs.get("dim", -1)
    return (_NPU.npu_swiglu_backward(grads[0], inputs[0], dim),)


def _rotary_mul(ctx, grads, inputs, outputs, kwargs):
    mode = inputs[3] if len(inputs) > 3 else kwargs.get("rotary_mode", "half")
    return _NPU.npu_rotary_mul_backward(grads[0], inputs[0], inputs[1], inputs[2], mode)


def _gelu(ctx, grads, inputs, outputs, kwargs):
    return (_NPU.npu_gelu_backward(grads[0], inputs[0], approximate=kwargs.get("approximate", "none")),)


def _linear(ctx, grads, inputs, outputs, kwargs):
    d_input, d_weight = _NPU.npu_linear_backward(grads[0], inputs[0], inputs[1])
    bias = inputs[2] if len(inputs) > 2 else kwargs.get("bias")
    return d_input, d_weight, (_sum_to(grads[0], bias.shape) if bias is not None else None)


def _dtype_cast(ctx, grads, inputs, outputs, kwargs):
    return (_NPU._npu_dtype_cast_backward(grads[0], inputs[0].dtype),)


# npu_fusion_attention's arguments in schema order (all positional), as its formula reads them.
_FUSION_ATTENTION_ARGS = ("query", "key", "value", "head_num", "input_layout", "pse", "padding_mask", "atten_mask",
                          "scale", "keep_prob", "pre_tockens", "next_tockens", "inner_precise", "prefix",
                          "actual_seq_qlen", "actual_seq_kvlen", "sparse_mode", "gen_mask_parallel", "sync",
                          "softmax_layout", "sink", "dropout_mask", "seed", "offset")


def _fusion_attention(ctx, grads, inputs, outputs, kwargs):
    """torch_npu's formula: npu_fusion_attention_grad with the forward's softmax_max/sum/out and output."""
    given = {**dict(zip(_FUSION_ATTENTION_ARGS, inputs, strict=False)), **kwargs}  # trailing defaults left off
    passed = {name: given[name] for name in ("pse", "padding_mask", "atten_mask", "keep_prob", "pre_tockens",
                                             "next_tockens", "inner_precise", "prefix", "actual_seq_qlen",
                                             "actual_seq_kvlen", "sparse_mode", "gen_mask_parallel", "sync",
                                             "softmax_layout", "sink") if name in given}
    if "scale" in given:
        passed["scale_value"] = given["scale"]
    dq, dk, dv, *_ = _NPU.npu_fusion_attention_grad(
        given["query"], given["key"], given["value"], grads[0], given["head_num"], given["input_layout"],
        softmax_max=outputs[1], softmax_sum=outputs[2], softmax_in=outputs[3], attention_in=outputs[0],
        seed=outputs[4], offset=outputs[5], numels=outputs[6], **passed)
    return dq, dk, dv


# op -> (formula, differentiable outputs, a refusal check on (args, kwargs) or None)
FORMULAS = {
    "npu_rms_norm": (_rms_norm, (0,), None),
    "npu_swiglu": (_swiglu, (0,), None),
    "npu_rotary_mul": (_rotary_mul, (0,), lambda args, kwargs: (len(args) > 4 and args[4] is not None)
                       or kwargs.get("rotate") is not None),
    "npu_gelu": (_gelu, (0,), None),
    "npu_linear": (_linear, (0,), None),
    "npu_dtype_cast": (_dtype_cast, (0,), None),
    "_npu_dtype_cast": (_dtype_cast, (0,), None),
    "npu_fusion_attention": (_fusion_attention, (0,), None),
}


def autograd_kernel(name: str):
    """An Autograd-key kernel applying torch_npu's formula for op `name` (see FORMULAS)."""
    formula, differentiable, refuse = FORMULAS[name]
    op = getattr(_NPU, name).default

    class Node(torch.autograd.Function):
        @staticmethod
        def forward(ctx, keyset, kwargs, *args):
            with torch._C._AutoDispatchBelowAutograd():
                out = op.redispatch(keyset & torch._C._after_autograd_keyset, *args, **kwargs)
            outputs = out if isinstance(out, tuple) else (out,)
            ctx.inputs, ctx.kwargs, ctx.outputs = args, kwargs, outputs
            ctx.mark_non_differentiable(*[o for i, o in enumerate(outputs)
                                          if i not in differentiable and isinstance(o, torch.Tensor)])
            return out

        @staticmethod
        def backward(ctx, *grads):
            grads = [g if g is not None or not isinstance(o, torch.Tensor) else torch.zeros_like(o)
                     for g, o in zip(grads, ctx.outputs, strict=True)]
            results = formula(ctx, grads, ctx.inputs, ctx.outputs, ctx.kwargs)
            padded = (list(results) + [None] * len(ctx.inputs))[:len(ctx.inputs)]
            return (None, None, *[r if isinstance(a, torch.Tensor) else None
                                  for r, a in zip(padded, ctx.inputs, strict=True)])

    def kernel(keyset, *args, **kwargs):
        tensors = [t for t in torch.utils._pytree.tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)]
        if not (torch.is_grad_enabled() and any(t.requires_grad for t in tensors)):
            with torch._C._AutoDispatchBelowAutograd():
                return op.redispatch(keyset & torch._C._after_autograd_keyset, *args, **kwargs)
        if refuse is not None and refuse(args, kwargs):
            raise NotImplementedError(f"npu::{name}: no backward for this call on the CPU simulator (torch_npu's "
                                      "formula does not cover it, docs/torch-npu-ops.md)")
        if any(isinstance(v, torch.Tensor) and v.requires_grad for v in kwargs.values()):
            raise NotImplementedError(f"npu::{name}: pass tensors that require grad positionally")
        return Node.apply(keyset, kwargs, *args)

    return kernel


AUTOGRAD = {name: autograd_kernel for name in FORMULAS}

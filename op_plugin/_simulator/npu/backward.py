"""CPU reference kernels of torch_npu's backward ops, and the autograd formulas torch_npu registers for
its forward ops (its C++ ``NpuRmsNormBackward0`` ... nodes, generated from op-plugin's derivatives.yaml).

Backward ops (float32 inside for 16-bit inputs, rounded once):

* ``npu_rms_norm_backward(dy, self, gamma, rstd) -> (dx, dgamma)``: with ``g = dy * gamma`` and ``xr = x *
  rstd``, ``dx = rstd * (g - xr * mean(g * xr))`` over the normalized (last ``gamma.dim()``) dims,
  ``dgamma = sum(dy * xr)`` over the others, float32 (the wheel's Meta; CANN RmsNormGrad).
* ``npu_swiglu_backward(grad_output, self, dim)``: ``A, B`` the halves of x; ``dA = g * B * s * (1 + A * (1 - s))``,
  ``dB = g * A * s`` with ``s = sigmoid(A)``, concatenated along ``dim``.
* ``npu_rotary_mul_backward(grad, self, r1, r2, rotary_mode)``: ``dx = g * r1 + R^T(g * r2)`` with R the
  mode's rotation ("half", "interleave", "quarter"; "interleave-half" through the de-interleave first),
  ``dr1 = sum(g * x)``, ``dr2 = sum(g * R(x))`` reduced to r1/r2's broadcast shapes.
* ``npu_gelu_backward(grad_output, self, approximate)``: ``g * GELU'(x)`` (erf or tanh form).
* ``npu_linear_backward(grad, input, weight) -> (grad @ weight, grad^T @ input)``.
* ``npu_dtype_cast_backward(grad, dtype, ...)`` / ``_npu_dtype_cast_backward``: ``grad`` cast to ``dtype``.
* ``_npu_rms_norm_backward_quant(dy, x, rstd, gamma, scale_x, *, offset_x, div_mode, quant_mode, dst_type)``:
  the RMS-norm gradient with dx quantised to int8 from float32, ``rint(dx / scale_x + offset_x)`` (``* scale_x``
  without div_mode), saturated; dgamma float32 (aclnnRmsNormGradQuant, computed by the RmsNormGradQuant GE
  kernel, ``interpreter/kernels/norm/rms_norm.py``). hifloat8 dx (dst_type 290) has no CPU dtype: refused.

Autograd (``AUTOGRAD``, registered by ops.py for the Autograd key): ``npu_rms_norm`` (self, gamma; rstd
not differentiable), ``npu_swiglu``, ``npu_rotary_mul`` (self, r1, r2; a ``rotate`` matrix is refused:
torch_npu's formula does not take it), ``npu_gelu``, ``npu_linear`` (input, weight; bias: the gradient
summed to its shape), ``npu_dtype_cast`` / ``_npu_dtype_cast`` (grad cast back to the input's dtype),
``npu_fusion_attention`` (query, key, value: ``npu_fusion_attention_grad`` with the forward's softmax_max /
softmax_sum / softmax_out / output and seed / offset / numels, as torch_npu's formula; the grad kernel is in
``attention.py``). Forward outputs that are not tensors (the fusion attention's ints) are skipped.
"""
from __future__ import annotations

import math

import torch

from ..._base.numerics import opmath
from ..interpreter.kernels.norm import rms_norm as norm_rms_grad
from .checks import named_refusals, rank, same_shape
from .dense import plain_dtype


def npu_rms_norm_backward(dy, self, gamma, rstd):
    op = "npu_rms_norm_backward"
    same_shape(op, self=self, dy=dy)
    if gamma.dim() > self.dim() or tuple(self.shape[self.dim() - gamma.dim():]) != tuple(gamma.shape):
        raise ValueError(f"npu::{op}: gamma of shape {tuple(gamma.shape)} is not the trailing shape of self "
                         f"{tuple(self.shape)}")
    want_rstd = tuple(self.shape[:self.dim() - gamma.dim()]) + (1,) * gamma.dim()
    if rstd.numel() != max(1, torch.Size(want_rstd).numel()) or rstd.dim() > self.dim():
        raise ValueError(f"npu::{op}: rstd of shape {tuple(rstd.shape)} is not npu_rms_norm's rstd {want_rstd}")
    rstd = rstd.reshape(want_rstd)
    dims = list(range(self.dim() - gamma.dim(), self.dim()))
    lead = list(range(self.dim() - gamma.dim()))
    x, g = opmath(self).float(), opmath(dy).float() * opmath(gamma).float()
    normalized = x * rstd.float()
    dx = rstd.float() * (g - normalized * (g * normalized).mean(dim=dims, keepdim=True))
    dgamma = (opmath(dy).float() * normalized).sum(dim=lead) if lead else opmath(dy).float() * normalized
    return dx.to(self.dtype), dgamma.float()


def npu_swiglu_backward(grad_output, self, dim=-1):
    if self.dim() == 0 or self.shape[dim] % 2:
        raise ValueError(f"npu::npu_swiglu_backward: dim {dim} of self {tuple(self.shape)} must have an even size")
    a, b = opmath(self).float().chunk(2, dim=dim)
    if tuple(grad_output.shape) != tuple(a.shape):
        raise ValueError(f"npu::npu_swiglu_backward: grad_output {tuple(grad_output.shape)} must have the shape of "
                         f"half of self, {tuple(a.shape)} (SwiGlu's output)")
    g = opmath(grad_output).float()
    s = torch.sigmoid(a)
    return torch.cat((g * b * s * (1 + a * (1 - s)), g * a * s), dim=dim).to(self.dtype)


def _rotation(x, mode, transpose=False):
    """R(x) for the mode's rotation, or R^T(x) (the adjoint the gradient needs)."""
    sign = -1.0 if transpose else 1.0
    if mode in ("half", "interleave-half"):
        first, second = x.chunk(2, dim=-1)
        return torch.cat((-sign * second, sign * first), dim=-1)
    if mode == "interleave":
        return torch.stack((-sign * x[..., 1::2], sign * x[..., ::2]), dim=-1).flatten(-2)
    if mode == "quarter":
        q0, q1, q2, q3 = x.chunk(4, dim=-1)
        return torch.cat((-sign * q1, sign * q0, -sign * q3, sign * q2), dim=-1)
    raise ValueError(f"npu::npu_rotary_mul_backward: rotary_mode {mode!r} is not 'half', 'interleave', 'quarter' "
                     "or 'interleave-half'")


def _deinterleave(x, transpose=False):
    """P(x) = cat(x[::2], x[1::2]) (interleave-half's first step), or P^T(x) (interleave back)."""
    if transpose:
        first, second = x.chunk(2, dim=-1)
        return torch.stack((first, second), dim=-1).flatten(-2)
    return torch.cat((x[..., ::2], x[..., 1::2]), dim=-1)


def _sum_to(t, shape):
    lead = t.dim() - len(shape)
    t = t.sum(dim=list(range(lead))) if lead else t
    dims = [i for i, n in enumerate(shape) if n == 1 and t.shape[i] != 1]
    return t.sum(dim=dims, keepdim=True) if dims else t


def npu_rotary_mul_backward(grad, self, r1, r2, rotary_mode="half"):
    """y = A(x) * r1 + R(A(x)) * r2 with A the identity, or the de-interleave for "interleave-half"; so
    dx = A^T(g * r1 + R^T(g * r2)), dr1 = sum(g * A(x)), dr2 = sum(g * R(A(x)))."""
    op = "npu_rotary_mul_backward"
    same_shape(op, self=self, grad=grad)
    same_shape(op, r1=r1, r2=r2)
    if r1.dim() != self.dim() or torch.broadcast_shapes(self.shape, r1.shape) != self.shape:
        raise ValueError(f"npu::{op}: r1/r2 of shape {tuple(r1.shape)} do not broadcast to self's {tuple(self.shape)}")
    x, g = opmath(self).float(), opmath(grad).float()
    interleaved = rotary_mode == "interleave-half"
    ax = _deinterleave(x) if interleaved else x
    d_ax = g * opmath(r1).float() + _rotation(g * opmath(r2).float(), rotary_mode, transpose=True)
    dx = _deinterleave(d_ax, transpose=True) if interleaved else d_ax
    dr1 = _sum_to(g * ax, r1.shape)
    dr2 = _sum_to(g * _rotation(ax, rotary_mode), r2.shape)
    return dx.to(self.dtype), dr1.to(self.dtype), dr2.to(self.dtype)


def npu_gelu_backward(grad_output, self, *, approximate="none"):
    same_shape("npu_gelu_backward", self=self, grad_output=grad_output)
    x, g = opmath(self).float(), opmath(grad_output).float()
    if approximate == "none":
        local = 0.5 * (1 + torch.erf(x / math.sqrt(2))) + x * torch.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)
    elif approximate == "tanh":
        k = math.sqrt(2 / math.pi)
        t = torch.tanh(k * (x + 0.044715 * x ** 3))
        local = 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * k * (1 + 3 * 0.044715 * x * x)
    else:
        raise ValueError(f"npu::npu_gelu_backward: approximate must be 'none' or 'tanh', got {approximate!r}")
    return (g * local).to(self.dtype)


def npu_linear_backward(grad, input, weight):
    op = "npu_linear_backward"
    for name, tensor in (("grad", grad), ("input", input), ("weight", weight)):
        rank(op, name, tensor, 2)
    if grad.shape[0] != input.shape[0] or grad.shape[1] != weight.shape[0] or input.shape[1] != weight.shape[1]:
        raise ValueError(f"npu::{op}: grad {tuple(grad.shape)}, input {tuple(input.shape)}, weight "
                         f"{tuple(weight.shape)} are not (M, N), (M, K), (N, K)")
    g = opmath(grad).float()
    return ((g @ opmath(weight).float()).to(input.dtype), (g.t() @ opmath(input).float()).to(weight.dtype))


def npu_dtype_cast_backward(grad, dtype, grad_dtype=None, input_dtype=None):
    op = "npu_dtype_cast_backward"
    if grad_dtype is not None or input_dtype is not None:
        raise NotImplementedError(f"npu::{op}: grad_dtype/input_dtype (torch_npu's own formats) are not simulated")
    return grad.to(plain_dtype(op, "dtype", dtype), copy=True)


def _npu_dtype_cast_backward(grad, dtype):
    return grad.to(dtype, copy=True)


_TORCH_INT8, _TORCH_NPU_HIFLOAT8 = 1, 290   # torch's ScalarType number of int8; torch_npu's hifloat8


@named_refusals("_npu_rms_norm_backward_quant")
def _npu_rms_norm_backward_quant(dy, x, rstd, gamma, scale_x, *, offset_x=None, div_mode=True, quant_mode="static",
                                 dst_type=1):
    op = "_npu_rms_norm_backward_quant"
    if dst_type == _TORCH_NPU_HIFLOAT8:
        raise NotImplementedError(f"npu::{op}: dst_type=290 (hifloat8) has no CPU dtype; only int8 dx is simulated")
    if dst_type not in (None, _TORCH_INT8):
        raise ValueError(f"npu::{op}: dst_type={dst_type}: dx is int8 (1) or hifloat8 (290) (aclnnRmsNormGradQuant)")
    if quant_mode != "static":
        raise ValueError(f"npu::{op}: quant_mode={quant_mode!r}: CANN documents only \"static\"")
    if dy.dtype not in (torch.float16, torch.bfloat16, torch.float32) or rstd.dtype != torch.float32:
        raise ValueError(f"npu::{op}: dy/x must be float16, bfloat16 or float32 and rstd float32")
    if offset_x is not None and offset_x.dtype != torch.int32:
        raise ValueError(f"npu::{op}: offset_x must be int32, got {offset_x.dtype}")
    same_shape(op, dy=dy, x=x)
    return norm_rms_grad.quantised_grad(dy, x, rstd, gamma, scale_x, offset_x, True if div_mode is None else div_mode)


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
    return (grads[0].to(inputs[0].dtype),)


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

"""Reference kernels and backward formulas of yaml/matmul_ops.yaml."""
from __future__ import annotations

import torch
import torch.nn.functional as F

from op_plugin._base.numerics import opmath
# User code writes @op_plugin.reference; the shipped pieces load while op_plugin itself is being
# imported, so they take the decorators from their module rather than from the half-made package.
from op_plugin._registry.decorators import backward, reference, setup_context


# --- npu_custom_linear --------------------------------------------------------------------------

@reference("npu_custom_linear")
def custom_linear(x, weight, bias=None):
    if x.shape[-1] != weight.shape[-1]:
        raise ValueError(f"npu_custom_linear: x has {x.shape[-1]} features but weight expects {weight.shape[-1]}")
    y = F.linear(opmath(x), opmath(weight), None if bias is None else opmath(bias))
    return y.to(x.dtype)


@setup_context("npu_custom_linear")
def _linear_setup(ctx, inputs, output):
    x, weight, bias = inputs
    ctx.save_for_backward(x, weight)
    ctx.has_bias = bias is not None


@backward("npu_custom_linear")
def _linear_backward(ctx, grad):
    x, weight = ctx.saved_tensors
    grad_x = grad @ weight
    grad_w = grad.reshape(-1, grad.shape[-1]).t() @ x.reshape(-1, x.shape[-1])
    grad_b = grad.reshape(-1, grad.shape[-1]).sum(0) if ctx.has_bias else None
    return grad_x, grad_w, grad_b


# --- npu_custom_matmul --------------------------------------------------------------------------

@reference("npu_custom_matmul")
def custom_matmul(a, b):
    if a.dim() != 2 or b.dim() != 2:
        raise ValueError(f"npu_custom_matmul takes 2-D tensors, got {a.dim()}-D and {b.dim()}-D")
    return (opmath(a) @ opmath(b)).to(a.dtype)


@setup_context("npu_custom_matmul")
def _matmul_setup(ctx, inputs, output):
    ctx.save_for_backward(*inputs)


@backward("npu_custom_matmul")
def _matmul_backward(ctx, grad):
    a, b = ctx.saved_tensors
    return grad @ b.t(), a.t() @ grad


# --- npu_swiglu_mlp -----------------------------------------------------------------------------

@reference("npu_swiglu_mlp")
def swiglu_mlp(x, gate_weight, up_weight):
    # Rounded to x.dtype after each step, as its GE lowering (two matmuls, Swish, Mul) does, so
    # eager and graph mode give the same half-precision numbers.
    xf = opmath(x)
    gate = (xf @ opmath(gate_weight)).to(x.dtype)
    up = (xf @ opmath(up_weight)).to(x.dtype)
    return (opmath(F.silu(opmath(gate)).to(x.dtype)) * opmath(up)).to(x.dtype)


@setup_context("npu_swiglu_mlp")
def _swiglu_setup(ctx, inputs, output):
    ctx.save_for_backward(*inputs)


@backward("npu_swiglu_mlp")
def _swiglu_backward(ctx, grad):
    x, gate_weight, up_weight = ctx.saved_tensors
    gate = x @ gate_weight
    up = x @ up_weight
    sig = torch.sigmoid(gate)
    silu = gate * sig
    grad_up = grad * silu
    grad_gate = grad * up * (sig * (1 + gate * (1 - sig)))
    flat = lambda t: t.reshape(-1, t.shape[-1])  # noqa: E731
    grad_x = grad_gate @ gate_weight.t() + grad_up @ up_weight.t()
    return grad_x, flat(x).t() @ flat(grad_gate), flat(x).t() @ flat(grad_up)

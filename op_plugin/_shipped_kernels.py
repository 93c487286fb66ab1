"""Reference kernels and backward formulas of the shipped ops (yaml/*.yaml).

These are the eager implementations used on every device and by the CPU simulator for the custom
GE ops. Half-precision inputs are computed in float32 and cast back, as the NPU kernels do.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from ._decorators import backward, reference, setup_context

_HALF = (torch.float16, torch.bfloat16)


def _acc(t: torch.Tensor) -> torch.Tensor:
    return t.float() if t.dtype in _HALF else t


# --- npu_custom_linear --------------------------------------------------------------------------

@reference("npu_custom_linear")
def custom_linear(x, weight, bias=None):
    if x.shape[-1] != weight.shape[-1]:
        raise ValueError(f"npu_custom_linear: x has {x.shape[-1]} features but weight expects {weight.shape[-1]}")
    y = F.linear(_acc(x), _acc(weight), None if bias is None else _acc(bias))
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
    return (_acc(a) @ _acc(b)).to(a.dtype)


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
    xf = _acc(x)
    gate = (xf @ _acc(gate_weight)).to(x.dtype)
    up = (xf @ _acc(up_weight)).to(x.dtype)
    return (_acc(F.silu(_acc(gate)).to(x.dtype)) * _acc(up)).to(x.dtype)


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


# --- npu_vector_add -----------------------------------------------------------------------------

@reference("npu_vector_add")
def vector_add(x1, x2):
    if x1.shape != x2.shape:
        raise ValueError(f"npu_vector_add needs equal shapes, got {tuple(x1.shape)} and {tuple(x2.shape)}")
    return x1 + x2


@backward("npu_vector_add")
def _vector_add_backward(ctx, grad):
    return grad, grad


# --- npu_custom_sum_list ------------------------------------------------------------------------

@reference("npu_custom_sum_list")
def sum_list(tensors):
    first = tensors[0]
    for t in tensors[1:]:
        if t.shape != first.shape or t.dtype != first.dtype:
            raise ValueError("npu_custom_sum_list needs tensors of one shape and dtype")
    total = _acc(first).clone()
    for t in tensors[1:]:
        total = total + _acc(t)
    return total.to(first.dtype)


@setup_context("npu_custom_sum_list")
def _sum_list_setup(ctx, inputs, output):
    ctx.count = len(inputs[0])


@backward("npu_custom_sum_list")
def _sum_list_backward(ctx, grad):
    return [grad] * ctx.count,


# --- npu_custom_rms_norm / npu_custom_add_rms_norm ----------------------------------------------

@reference("npu_custom_rms_norm")
def rms_norm(x, gamma, epsilon=1e-6):
    xf = _acc(x)
    rstd = torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + epsilon)
    y = (xf * rstd * _acc(gamma)).to(x.dtype)
    return y, rstd.float()


@setup_context("npu_custom_rms_norm")
def _rms_norm_setup(ctx, inputs, output):
    x, gamma, _ = inputs
    ctx.save_for_backward(x, gamma, output[1])


def _rms_norm_grads(x, gamma, rstd, grad_y):
    xf, gf, gy = _acc(x), _acc(gamma), _acc(grad_y)
    normed = xf * rstd
    grad_gamma = (gy * normed).reshape(-1, x.shape[-1]).sum(0)
    g = gy * gf
    grad_x = rstd * (g - normed * (g * normed).mean(-1, keepdim=True))
    return grad_x.to(x.dtype), grad_gamma.to(gamma.dtype)


@backward("npu_custom_rms_norm")
def _rms_norm_backward(ctx, grad_y, grad_rstd):
    x, gamma, rstd = ctx.saved_tensors
    grad_x, grad_gamma = _rms_norm_grads(x, gamma, rstd, grad_y)
    return grad_x, grad_gamma, None


@reference("npu_custom_add_rms_norm")
def add_rms_norm(x1, x2, gamma, epsilon=1e-6):
    x = (_acc(x1) + _acc(x2)).to(x1.dtype)
    y, rstd = rms_norm(x, gamma, epsilon)
    return y, rstd, x


@setup_context("npu_custom_add_rms_norm")
def _add_rms_norm_setup(ctx, inputs, output):
    ctx.save_for_backward(output[2], inputs[2], output[1])


@backward("npu_custom_add_rms_norm")
def _add_rms_norm_backward(ctx, grad_y, grad_rstd, grad_x_sum):
    x, gamma, rstd = ctx.saved_tensors
    grad_x, grad_gamma = _rms_norm_grads(x, gamma, rstd, grad_y)
    grad_x = grad_x + grad_x_sum
    return grad_x, grad_x, grad_gamma, None


# --- npu_custom_rotary_mul ----------------------------------------------------------------------

def _rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


@reference("npu_custom_rotary_mul")
def rotary_mul(x, r1, r2):
    if x.shape[-1] % 2:
        raise ValueError(f"npu_custom_rotary_mul needs an even last dim, got {x.shape[-1]}")
    xf = _acc(x)
    return (xf * _acc(r1) + _rotate_half(xf) * _acc(r2)).to(x.dtype)


@setup_context("npu_custom_rotary_mul")
def _rotary_setup(ctx, inputs, output):
    ctx.save_for_backward(*inputs)


def _sum_to(grad, shape):
    """Reduce a broadcast gradient back to `shape`."""
    while grad.dim() > len(shape):
        grad = grad.sum(0)
    dims = [i for i, size in enumerate(shape) if size == 1 and grad.shape[i] != 1]
    return grad.sum(dims, keepdim=True) if dims else grad


@backward("npu_custom_rotary_mul")
def _rotary_backward(ctx, grad):
    x, r1, r2 = ctx.saved_tensors
    # d/dx of rotate_half(x) * r2 is the transpose of rotate_half: (g1, g2) -> (g2, -g1).
    g1, g2 = (grad * r2).chunk(2, dim=-1)
    grad_x = grad * r1 + torch.cat((g2, -g1), dim=-1)
    return grad_x, _sum_to(grad * x, r1.shape), _sum_to(grad * _rotate_half(x), r2.shape)


# --- npu_custom_scaled_softmax ------------------------------------------------------------------

def _causal_mask(x):
    rows, cols = x.shape[-2], x.shape[-1]
    return torch.ones(rows, cols, dtype=torch.bool, device=x.device).triu(1)


@reference("npu_custom_scaled_softmax")
def scaled_softmax(x, scale=1.0, dims=(-1,), causal=False):
    logits = _acc(x) * scale
    if causal:
        logits = logits.masked_fill(_causal_mask(x), float("-inf"))
    dims = list(dims)
    return torch.exp(logits - torch.logsumexp(logits, dims, keepdim=True)).to(x.dtype)


@setup_context("npu_custom_scaled_softmax")
def _softmax_setup(ctx, inputs, output):
    ctx.save_for_backward(output)
    ctx.scale = inputs[1]
    ctx.dims = list(inputs[2])


@backward("npu_custom_scaled_softmax")
def _softmax_backward(ctx, grad):
    y, = ctx.saved_tensors
    grad_x = y * (grad - (grad * y).sum(ctx.dims, keepdim=True)) * ctx.scale
    return grad_x, None, None, None


# --- npu_custom_kv_cache_update_ ----------------------------------------------------------------

@reference("npu_custom_kv_cache_update_")
def kv_cache_update_(cache, update, positions, dim=1, reduce="update"):
    if reduce == "update":
        return cache.index_copy_(dim, positions.long(), update.to(cache.dtype))
    if reduce == "add":
        return cache.index_add_(dim, positions.long(), update.to(cache.dtype))
    raise ValueError(f"npu_custom_kv_cache_update_: reduce must be 'update' or 'add', got {reduce!r}")

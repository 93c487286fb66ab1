"""Reference kernels and backward formulas of yaml/attention_ops.yaml."""
from __future__ import annotations

import torch

from op_plugin._base.numerics import opmath
# User code writes @op_plugin.reference; the shipped pieces load while op_plugin itself is being
# imported, so they take the decorators from their module rather than from the half-made package.
from op_plugin._registry.decorators import backward, reference, setup_context


# --- npu_custom_rotary_mul ----------------------------------------------------------------------

def _rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


@reference("npu_custom_rotary_mul")
def rotary_mul(x, r1, r2):
    if x.shape[-1] % 2:
        raise ValueError(f"npu_custom_rotary_mul needs an even last dim, got {x.shape[-1]}")
    xf = opmath(x)
    return (xf * opmath(r1) + _rotate_half(xf) * opmath(r2)).to(x.dtype)


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
    logits = opmath(x) * scale
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

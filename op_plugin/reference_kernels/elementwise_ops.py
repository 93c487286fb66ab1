"""Reference kernels and backward formulas of yaml/elementwise_ops.yaml."""
from __future__ import annotations


from op_plugin._base.numerics import opmath
# User code writes @op_plugin.reference; the shipped pieces load while op_plugin itself is being
# imported, so they take the decorators from their module rather than from the half-made package.
from op_plugin._registry.decorators import backward, reference, setup_context


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
    total = opmath(first).clone()
    for t in tensors[1:]:
        total = total + opmath(t)
    return total.to(first.dtype)


@setup_context("npu_custom_sum_list")
def _sum_list_setup(ctx, inputs, output):
    ctx.count = len(inputs[0])


@backward("npu_custom_sum_list")
def _sum_list_backward(ctx, grad):
    return [grad] * ctx.count,


# --- npu_custom_mse_loss ------------------------------------------------------------------------
# Its YAML entry has no `outputs:`; the Meta function is meta/mse_loss.py.

@reference("npu_custom_mse_loss")
def mse_loss(x, target, reduction="mean"):
    if x.shape != target.shape:
        raise ValueError(f"npu_custom_mse_loss: target {tuple(target.shape)} must have x's shape {tuple(x.shape)}")
    squared = (opmath(x) - opmath(target)) ** 2
    if reduction == "mean":
        squared = squared.mean()
    elif reduction == "sum":
        squared = squared.sum()
    elif reduction != "none":
        raise ValueError(f"npu_custom_mse_loss: reduction must be 'none', 'mean' or 'sum', got {reduction!r}")
    return squared.to(x.dtype)


@setup_context("npu_custom_mse_loss")
def _mse_loss_setup(ctx, inputs, output):
    x, target, reduction = inputs
    ctx.save_for_backward(x, target)
    ctx.reduction = reduction


@backward("npu_custom_mse_loss")
def _mse_loss_backward(ctx, grad):
    x, target = ctx.saved_tensors
    diff = x - target
    grad_x = 2 * diff * grad
    if ctx.reduction == "mean":
        grad_x = grad_x / diff.numel()
    return grad_x, -grad_x, None

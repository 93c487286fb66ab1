"""Reference kernels and backward formulas of yaml/norm_ops.yaml."""
from __future__ import annotations

import torch

from op_plugin._base.numerics import opmath
# User code writes @op_plugin.reference; the shipped pieces load while op_plugin itself is being
# imported, so they take the decorators from their module rather than from the half-made package.
from op_plugin._registry.decorators import backward, reference, setup_context


# --- npu_custom_rms_norm / npu_custom_add_rms_norm ----------------------------------------------

@reference("npu_custom_rms_norm")
def rms_norm(x, gamma, epsilon=1e-6):
    xf = opmath(x)
    rstd = torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + epsilon)
    y = (xf * rstd * opmath(gamma)).to(x.dtype)
    return y, rstd.float()


@setup_context("npu_custom_rms_norm")
def _rms_norm_setup(ctx, inputs, output):
    x, gamma, _ = inputs
    ctx.save_for_backward(x, gamma, output[1])


def _rms_norm_grads(x, gamma, rstd, grad_y, grad_rstd):
    xf, gf, gy = opmath(x), opmath(gamma), opmath(grad_y)
    normed = xf * rstd
    grad_gamma = (gy * normed).reshape(-1, x.shape[-1]).sum(0)
    g = gy * gf
    grad_x = rstd * (g - normed * (g * normed).mean(-1, keepdim=True))
    if grad_rstd is not None:
        # rstd = (mean(x^2) + eps)^(-1/2), so d rstd / d x = -rstd^3 * x / N
        grad_x = grad_x - grad_rstd.float() * rstd.pow(3) * xf / x.shape[-1]
    return grad_x.to(x.dtype), grad_gamma.to(gamma.dtype)


@backward("npu_custom_rms_norm")
def _rms_norm_backward(ctx, grad_y, grad_rstd):
    x, gamma, rstd = ctx.saved_tensors
    grad_x, grad_gamma = _rms_norm_grads(x, gamma, rstd, grad_y, grad_rstd)
    return grad_x, grad_gamma, None


@reference("npu_custom_add_rms_norm")
def add_rms_norm(x1, x2, gamma, epsilon=1e-6):
    """As the GE AddRmsNorm it maps onto computes on Ascend910B (CANN's A2 kernel and golden): `x * rstd` is
    rounded to the 16-bit input dtype before gamma (RmsNorm keeps it in float32), so eager equals the graph."""
    x = (opmath(x1) + opmath(x2)).to(x1.dtype)
    xf = opmath(x)
    rstd = torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + epsilon)
    normed = xf * rstd
    if x.dtype in (torch.float16, torch.bfloat16):
        normed = normed.to(x.dtype).float()
    return (normed * opmath(gamma)).to(x.dtype), rstd.float(), x


@setup_context("npu_custom_add_rms_norm")
def _add_rms_norm_setup(ctx, inputs, output):
    ctx.save_for_backward(output[2], inputs[2], output[1])


@backward("npu_custom_add_rms_norm")
def _add_rms_norm_backward(ctx, grad_y, grad_rstd, grad_x_sum):
    x, gamma, rstd = ctx.saved_tensors
    grad_x, grad_gamma = _rms_norm_grads(x, gamma, rstd, grad_y, grad_rstd)
    grad_x = grad_x + grad_x_sum
    return grad_x, grad_x, grad_gamma, None

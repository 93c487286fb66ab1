"""Normalisation GE ops: SoftmaxV2/LogSoftmaxV2, LayerNorm/V3/V4, RmsNorm, BNInfer.

Statistics of 16-bit float inputs are computed in float32, as the NPU kernels do.
"""
from __future__ import annotations

import torch

from .common import check_dtype, fail, input_layout, int_list, opmath
from .registry import builtin_kernel


def _softmax_like(fn):
    def kernel(inputs, attrs, node):
        x = inputs[0]
        axes = attrs.get("axes", [-1])
        if len(axes) != 1:
            raise ValueError(f"{node.type} over several axes {axes} is not supported by the simulator")
        out_dtype = torch.float32 if attrs.get("half_to_float", False) else x.dtype
        return [fn(opmath(x), dim=axes[0]).to(out_dtype)]

    return kernel


builtin_kernel("SoftmaxV2")(_softmax_like(torch.softmax))
builtin_kernel("LogSoftmaxV2")(_softmax_like(torch.log_softmax))


def _normalise(x, dims, epsilon):
    """Mean, rstd (kept dims) and normalised x over ``dims``, all in float32 for 16-bit inputs."""
    wide = opmath(x)
    mean = wide.mean(dim=dims, keepdim=True)
    variance = ((wide - mean) ** 2).mean(dim=dims, keepdim=True)
    rstd = torch.rsqrt(variance + epsilon)
    return (wide - mean) * rstd, mean, variance, rstd


def _affine(normed, gamma, beta):
    if gamma is not None:
        normed = normed * opmath(gamma)
    if beta is not None:
        normed = normed + opmath(beta)
    return normed


@builtin_kernel("LayerNormV4")
def _layer_norm_v4(inputs, attrs, node):
    x, normalized_shape = inputs[0], int_list(inputs[1])
    gamma = inputs[2] if len(inputs) > 2 else None
    beta = inputs[3] if len(inputs) > 3 else None
    dims = list(range(x.dim() - len(normalized_shape), x.dim()))
    normed, mean, _variance, rstd = _normalise(x, dims, attrs.get("epsilon", 1e-5))
    y = _affine(normed, gamma, beta)
    # mean/rstd in x's dtype, as aten.native_layer_norm's meta (and so the graph) declares them
    return [y.to(x.dtype), mean.to(x.dtype), rstd.to(x.dtype)]


def _layer_norm_v1_v3(returns_rstd):
    def kernel(inputs, attrs, node):
        x, gamma, beta = inputs
        begin_norm_axis = attrs.get("begin_norm_axis", 0) % x.dim()
        begin_params_axis = attrs.get("begin_params_axis", 0) % x.dim()
        if begin_params_axis != begin_norm_axis:
            raise ValueError(f"{node.type}: begin_params_axis != begin_norm_axis is not supported by the simulator")
        dims = list(range(begin_norm_axis, x.dim()))
        normed, mean, variance, rstd = _normalise(x, dims, attrs.get("epsilon", 1e-7))
        y = _affine(normed, gamma, beta)
        second = rstd if returns_rstd else variance
        return [y.to(x.dtype), mean.to(x.dtype), second.to(x.dtype)]

    return kernel


builtin_kernel("LayerNorm")(_layer_norm_v1_v3(returns_rstd=False))
builtin_kernel("LayerNormV3")(_layer_norm_v1_v3(returns_rstd=True))


@builtin_kernel("RmsNorm")
def rms_norm(inputs, attrs, node):
    x, gamma = inputs
    dims = list(range(x.dim() - gamma.dim(), x.dim()))
    wide = opmath(x)
    rstd = torch.rsqrt(wide.pow(2).mean(dim=dims, keepdim=True) + attrs.get("epsilon", 1e-6))
    return [(wide * rstd * opmath(gamma)).to(x.dtype), rstd.float()]


@builtin_kernel("BNInfer")
def _bn_infer(inputs, attrs, node):
    """y = (x - mean) / sqrt(variance + epsilon) * scale + offset, per channel (inference batch norm)."""
    x, scale, offset, mean, variance = inputs
    check_dtype(node, "x", x, (torch.float16, torch.float32))
    for name, tensor in (("scale", scale), ("offset", offset), ("mean", mean), ("variance", variance)):
        # The prototype lists float32; TorchAir hands over the module's own dtype (float16 for a
        # .half() model), so any float dtype is accepted and widened.
        if not tensor.dtype.is_floating_point or tensor.dim() != 1:
            fail(node, f"{name} must be a 1-D float tensor, got {tensor.dtype} {list(tensor.shape)}")
    layout = input_layout(node, 0, "NCHW")
    if layout not in ("NCHW", "NHWC"):
        fail(node, f"x layout {layout!r} is not supported (NCHW or NHWC)")
    if x.dim() < 2:
        fail(node, f"x must have a channel dim, got shape {list(x.shape)}")
    channel = 1 if layout == "NCHW" else x.dim() - 1
    shape = [1] * x.dim()
    shape[channel] = x.shape[channel]
    if any(t.shape[0] != x.shape[channel] for t in (scale, offset, mean, variance)):
        fail(node, f"per-channel inputs must have {x.shape[channel]} entries")
    epsilon = attrs["epsilon"]
    rstd = torch.rsqrt(variance.float() + epsilon)
    y = (opmath(x) - mean.float().reshape(shape)) * (rstd * scale.float()).reshape(shape) + offset.float().reshape(shape)
    return [y.to(x.dtype)]

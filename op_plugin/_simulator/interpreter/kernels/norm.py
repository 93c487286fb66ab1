"""Normalisation GE ops: SoftmaxV2/LogSoftmaxV2, LayerNorm/V3/V4, RmsNorm, BNInfer, BatchNormV3,
GroupNorm/GroupNormV2.

Statistics of 16-bit float inputs are computed in float32, as the NPU kernels do.
"""
from __future__ import annotations

import torch

from .common import check_dtype, fail, input_layout, int_list, opmath
from ..registry import builtin_kernel


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
    # The one aten op eager calls (aten.native_layer_norm lowers to LayerNormV4), on float32 for
    # 16-bit inputs as the NPU kernel computes its statistics.
    y, mean, rstd = torch.native_layer_norm(opmath(x), normalized_shape, None if gamma is None else opmath(gamma),
                                            None if beta is None else opmath(beta), attrs.get("epsilon", 1e-5))
    # mean/rstd in x's dtype, as aten.native_layer_norm's meta (and so the graph) declares them
    return [y.to(x.dtype), mean.to(x.dtype), rstd.to(x.dtype)]


def _layer_norm_v1_v3(returns_rstd, default_epsilon):
    def kernel(inputs, attrs, node):
        x, gamma, beta = inputs
        begin_norm_axis = attrs.get("begin_norm_axis", 0) % x.dim()
        begin_params_axis = attrs.get("begin_params_axis", 0) % x.dim()
        if begin_params_axis != begin_norm_axis:
            raise ValueError(f"{node.type}: begin_params_axis != begin_norm_axis is not supported by the simulator")
        dims = list(range(begin_norm_axis, x.dim()))
        normed, mean, variance, rstd = _normalise(x, dims, attrs.get("epsilon", default_epsilon))
        y = _affine(normed, gamma, beta)
        second = rstd if returns_rstd else variance
        return [y.to(x.dtype), mean.to(x.dtype), second.to(x.dtype)]

    return kernel


# the prototypes' epsilon defaults differ: 1e-7 for LayerNorm, 1e-5 for LayerNormV3
builtin_kernel("LayerNorm")(_layer_norm_v1_v3(returns_rstd=False, default_epsilon=1e-7))
builtin_kernel("LayerNormV3")(_layer_norm_v1_v3(returns_rstd=True, default_epsilon=1e-5))


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
    if channel == 1:  # the call eager makes (aten.batch_norm, inference), in float32
        y = torch.nn.functional.batch_norm(opmath(x), mean.float(), variance.float(), scale.float(), offset.float(),
                                           False, 0.0, epsilon)
        return [y.to(x.dtype)]
    rstd = torch.rsqrt(variance.float() + epsilon)
    y = (opmath(x) - mean.float().reshape(shape)) * (rstd * scale.float()).reshape(shape) + offset.float().reshape(shape)
    return [y.to(x.dtype)]


_BN_FLOATS = (torch.float32, torch.float16, torch.bfloat16)
# What BatchNormV3's save_rstd holds (CANN ops-nn norm/batch_norm_v3 README): the batch variance on
# Atlas A2/A3 and training parts, the reciprocal std only on Ascend 950 (arch35). TorchAir's
# is_arch35() is false without torch_npu, and its backward converters then feed save_rstd to
# BNTrainingUpdateGrad/BNTrainingReduceGrad as the variance, so the simulator is a non-arch35 part.
SAVE_RSTD_HOLDS_VARIANCE = True


def _channel_axis(node, x, first_layouts, last_layouts):
    layout = input_layout(node, 0, first_layouts[0])
    if layout in first_layouts:
        return 1
    if layout in last_layouts:
        return x.dim() - 1
    fail(node, f"x layout {layout!r} is not supported ({', '.join(first_layouts + last_layouts)})")


@builtin_kernel("BatchNormV3")
def _batch_norm_v3(inputs, attrs, node):
    """Batch norm over every axis but the channel one (NCHW/NCDHW: axis 1; NHWC/NDHWC: last).

    Training: y = (x - mean) * rsqrt(var + epsilon) * weight + bias with the batch mean and biased
    variance; running_mean/var <- (1 - momentum) * running + momentum * batch statistic (the variance
    unbiased, n / (n - 1)); save_mean = batch mean; save_rstd = see SAVE_RSTD_HOLDS_VARIANCE.
    Inference (is_training=false): the running statistics normalise x and pass through unchanged;
    CANN defines save_mean/save_rstd for training only, here they report the statistics used
    (running_mean, and running_var under the same convention as training).
    """
    x, weight, bias, running_mean, running_var = inputs
    check_dtype(node, "x", x, _BN_FLOATS)
    for name, tensor in (("weight", weight), ("bias", bias), ("running_mean", running_mean),
                         ("running_var", running_var)):
        check_dtype(node, name, tensor, _BN_FLOATS)
    if x.dim() < 2:
        fail(node, f"x must have a channel axis, got shape {list(x.shape)}")
    channel = _channel_axis(node, x, ("NCHW", "NCDHW"), ("NHWC", "NDHWC"))
    channels = x.shape[channel]
    for name, tensor in (("weight", weight), ("bias", bias), ("running_mean", running_mean),
                         ("running_var", running_var)):
        if list(tensor.shape) != [channels]:
            fail(node, f"{name} must have shape [{channels}], got {list(tensor.shape)}")
    epsilon, momentum = attrs.get("epsilon", 1e-5), attrs.get("momentum", 0.1)
    shape = [1] * x.dim()
    shape[channel] = channels
    reduce_dims = [d for d in range(x.dim()) if d != channel]
    wide = opmath(x).float()
    if attrs.get("is_training", True):
        count = x.numel() // max(channels, 1)
        mean = wide.mean(dim=reduce_dims)
        variance = ((wide - mean.reshape(shape)) ** 2).mean(dim=reduce_dims)
        unbiased = variance * (count / (count - 1)) if count > 1 else torch.full_like(variance, float("nan"))
        new_mean = (1 - momentum) * running_mean.float() + momentum * mean
        new_var = (1 - momentum) * running_var.float() + momentum * unbiased
    else:
        mean, variance = running_mean.float(), running_var.float()
        new_mean, new_var = mean, variance
    rstd = torch.rsqrt(variance + epsilon)
    y = (wide - mean.reshape(shape)) * (rstd * weight.float()).reshape(shape) + bias.float().reshape(shape)
    save_rstd = variance if SAVE_RSTD_HOLDS_VARIANCE else rstd
    return [y.to(x.dtype), new_mean.to(running_mean.dtype), new_var.to(running_var.dtype),
            mean.float(), save_rstd.float()]


def _group_norm(second_output, default_eps, dtypes):
    def kernel(inputs, attrs, node):
        """x read as (N, C, *): C in num_groups groups, statistics per sample and group (population
        variance); mean and the third output have shape (N, num_groups)."""
        x, gamma, beta = inputs
        for name, tensor in (("x", x), ("gamma", gamma), ("beta", beta)):
            check_dtype(node, name, tensor, dtypes)
        if x.dim() < 2:
            fail(node, f"x must be (N, C, *), got shape {list(x.shape)}")
        groups = attrs["num_groups"]
        n, c = x.shape[0], x.shape[1]
        if groups <= 0 or c % groups:
            fail(node, f"num_groups {groups} must divide the {c} channels")
        if list(gamma.shape) != [c] or list(beta.shape) != [c]:
            fail(node, f"gamma and beta must have shape [{c}]")
        wide = opmath(x).float()
        grouped = wide.reshape(n, groups, -1)
        mean = grouped.mean(dim=-1)
        variance = ((grouped - mean.unsqueeze(-1)) ** 2).mean(dim=-1)
        rstd = torch.rsqrt(variance + attrs.get("eps", default_eps))
        normed = ((grouped - mean.unsqueeze(-1)) * rstd.unsqueeze(-1)).reshape(wide.shape)
        affine = [1] * wide.dim()
        affine[1] = c
        y = normed * gamma.float().reshape(affine) + beta.float().reshape(affine)
        second = variance if second_output == "variance" else rstd
        return [y.to(x.dtype), mean.to(x.dtype), second.to(x.dtype)]

    return kernel


# ops-nn norm/group_norm(_v2) READMEs: data_format and is_training exist for interface compatibility
# only and take no part in the computation; x is always (N, C, *).
_GROUP_NORM_UNREAD = {"data_format": "CANN: interface compatibility only, x is read as (N, C, *)",
                      "is_training": "CANN: interface compatibility only, statistics come from x in both modes"}
# GroupNorm's third output is the variance, GroupNormV2's the reciprocal std
builtin_kernel("GroupNorm", unread_attrs=_GROUP_NORM_UNREAD)(
    _group_norm("variance", 1e-4, (torch.float16, torch.float32)))
builtin_kernel("GroupNormV2", unread_attrs=_GROUP_NORM_UNREAD)(_group_norm("rstd", 1e-5, _BN_FLOATS))

"""Backward GE ops of softmax and the normalisations: SoftmaxGrad, LogSoftmaxGrad, LayerNormGradV3,
BNTrainingUpdateGrad, BN3DTrainingUpdateGrad, BNTrainingReduceGrad, BNInferGrad, BatchNormGradV3,
GroupNormGrad, SyncBatchNormBackwardReduce, SyncBatchNormBackwardElemt.

Formulas from CANN's operator definitions (REG_OP docs; hicann ops-nn ``norm/*`` READMEs); TorchAir's
converters are ``ge_converter/aten/native_batch_norm_backward.py`` and friends.

What the batch-norm statistics mean matters, because the grads consume what the forward produced:

* ``BNTrainingUpdateGrad`` / ``BNTrainingReduceGrad`` / ``BNInferGrad`` take ``batch_variance``, the
  variance, and compute ``rsqrt(batch_variance + epsilon)`` themselves. TorchAir (off arch35, which is
  what runs here: ``is_arch35()`` is false without torch_npu) feeds them BatchNormV3's ``save_rstd``
  output, which CANN's BatchNormV3 README says holds the variance on Atlas A2/A3/training parts (the
  reciprocal std only on Ascend 950). The forward BatchNormV3 kernel must follow that convention.
* ``BatchNormGradV3`` (emitted only on arch35) takes ``save_rstd`` as the reciprocal std.

Statistics of 16-bit inputs are computed in float32 and rounded once, as the NPU kernels do.
"""
from __future__ import annotations

import torch

from .common import check_dtype, fail, input_layout, opmath, same_dtype
from ..registry import builtin_kernel

_FLOATS = (torch.float16, torch.float32, torch.bfloat16)
_F16_F32 = (torch.float16, torch.float32)


# ---- layer norm -----------------------------------------------------------------------------------

@builtin_kernel("LayerNormGradV3")
def _layer_norm_grad_v3(inputs, attrs, node):
    """Gradients of y = (x - mean) * rstd * gamma (+ beta) over the trailing gamma.dim() dims of x.

    mean/rstd hold x's leading dims (with or without kept 1-dims); pd_gamma/pd_beta sum over the leading
    dims and have gamma's shape and dtype.
    """
    dy, x, rstd, mean, gamma = inputs
    for name, tensor in (("dy", dy), ("x", x), ("rstd", rstd), ("mean", mean), ("gamma", gamma)):
        check_dtype(node, name, tensor, _FLOATS)
    same_dtype(node.type, [dy, x])
    norm_rank = gamma.dim()
    if norm_rank > x.dim() or list(x.shape[x.dim() - norm_rank:]) != list(gamma.shape) or dy.shape != x.shape:
        fail(node, f"x {list(x.shape)}, dy {list(dy.shape)} and gamma {list(gamma.shape)} do not match "
                   "(gamma is x's trailing dims)")
    lead = x.dim() - norm_rank
    if rstd.numel() != mean.numel() or rstd.numel() != x.shape[:lead].numel():
        fail(node, f"mean {list(mean.shape)} / rstd {list(rstd.shape)} must hold one value per leading "
                   f"position of x {list(x.shape[:lead])}")
    stat_shape = list(x.shape[:lead]) + [1] * norm_rank
    wide_x, wide_dy = opmath(x).float(), opmath(dy).float()
    wide_rstd = rstd.float().reshape(stat_shape)
    x_hat = (wide_x - mean.float().reshape(stat_shape)) * wide_rstd
    scaled = wide_dy * gamma.float()
    norm_dims = list(range(lead, x.dim()))
    if norm_dims:
        pd_x = wide_rstd * (scaled - scaled.mean(dim=norm_dims, keepdim=True)
                            - x_hat * (scaled * x_hat).mean(dim=norm_dims, keepdim=True))
    else:  # no normalised dims: y = gamma * (x - mean) * rstd per element
        pd_x = wide_rstd * scaled
    lead_dims = list(range(lead))
    pd_gamma = (wide_dy * x_hat).sum(dim=lead_dims) if lead_dims else wide_dy * x_hat
    pd_beta = wide_dy.sum(dim=lead_dims) if lead_dims else wide_dy
    return [pd_x.to(x.dtype), pd_gamma.to(gamma.dtype), pd_beta.to(gamma.dtype)]


# ---- batch norm (per channel) -----------------------------------------------------------------------

def _channel_view(node, x, layouts, default):
    """(channel dim, shape that broadcasts a per-channel vector, reduce dims) for x in its GE layout."""
    layout = input_layout(node, 0, default)
    if layout not in layouts:
        fail(node, f"x layout {layout!r} is not supported ({', '.join(layouts)})")
    if x.dim() < 2:
        fail(node, f"x must have a channel dim, got shape {list(x.shape)}")
    channel = x.dim() - 1 if layout in ("NHWC", "NDHWC") else 1
    shape = [1] * x.dim()
    shape[channel] = x.shape[channel]
    return channel, shape, [d for d in range(x.dim()) if d != channel]


def _per_channel(node, name, tensor, channels, shape):
    check_dtype(node, name, tensor, _FLOATS)
    if tensor.numel() != channels:
        fail(node, f"{name} must have {channels} entries (one per channel), got shape {list(tensor.shape)}")
    return tensor.float().reshape(shape)


def _bn_update_grad(expected_rank):
    def kernel(inputs, attrs, node):
        """diff_scale = sum(grads * (x - batch_mean) * rsqrt(batch_variance + epsilon)), diff_offset = sum(grads),
        over every dim but the channel."""
        grads, x, batch_mean, batch_variance = inputs
        same_dtype(node.type, [grads, x])
        check_dtype(node, "x", x, _FLOATS)
        if x.dim() != expected_rank or grads.shape != x.shape:
            fail(node, f"x and grads must be {expected_rank}-D of one shape, got {list(x.shape)} and {list(grads.shape)}")
        layouts = ("NCHW", "NHWC") if expected_rank == 4 else ("NCDHW", "NDHWC")
        channel, shape, dims = _channel_view(node, x, layouts, layouts[0])
        mean = _per_channel(node, "batch_mean", batch_mean, x.shape[channel], shape)
        variance = _per_channel(node, "batch_variance", batch_variance, x.shape[channel], shape)
        wide_dy = opmath(grads).float()
        x_hat = (opmath(x).float() - mean) * torch.rsqrt(variance + attrs.get("epsilon", 0.0001))
        return [(wide_dy * x_hat).sum(dim=dims), wide_dy.sum(dim=dims)]

    return kernel


builtin_kernel("BNTrainingUpdateGrad")(_bn_update_grad(4))
builtin_kernel("BN3DTrainingUpdateGrad")(_bn_update_grad(5))


def _bn_grad_frame(node, grad_name, grad, x):
    """Checks shared by the batch-norm grads over a 4-D/5-D x: (channel dim, per-channel view shape,
    reduced dims, channel count) in x's layout."""
    same_dtype(node.type, [grad, x])
    check_dtype(node, "x", x, _FLOATS)
    if x.dim() not in (4, 5) or grad.shape != x.shape:
        fail(node, f"x and {grad_name} must be 4-D or 5-D of one shape, got {list(x.shape)} and {list(grad.shape)}")
    layouts = ("NCHW", "NHWC") if x.dim() == 4 else ("NCDHW", "NDHWC")
    channel, shape, dims = _channel_view(node, x, layouts, layouts[0])
    return channel, shape, dims, x.shape[channel]


@builtin_kernel("BNTrainingReduceGrad")
def _bn_training_reduce_grad(inputs, attrs, node):
    """y = scale * rstd * (grads - diff_offset / m - (x - batch_mean) * rstd * diff_scale / m),
    rstd = rsqrt(batch_variance + epsilon), m = elements per channel."""
    grads, x, diff_scale, diff_offset, scale, batch_mean, batch_variance = inputs
    channel, shape, dims, channels = _bn_grad_frame(node, "grads", grads, x)
    per = {name: _per_channel(node, name, t, channels, shape) for name, t in (
        ("diff_scale", diff_scale), ("diff_offset", diff_offset), ("scale", scale), ("batch_mean", batch_mean),
        ("batch_variance", batch_variance))}
    count = x.numel() // max(channels, 1)
    rstd = torch.rsqrt(per["batch_variance"] + attrs.get("epsilon", 0.0001))
    x_hat = (opmath(x).float() - per["batch_mean"]) * rstd
    dx = per["scale"] * rstd * (opmath(grads).float() - (per["diff_offset"] + x_hat * per["diff_scale"]) / max(count, 1))
    return [dx.to(x.dtype)]


@builtin_kernel("BNInferGrad")
def _bn_infer_grad(inputs, attrs, node):
    """x_backprop = grads * scale * rsqrt(batch_variance + epsilon) (inference batch norm: statistics are
    constants)."""
    grads, scale, batch_variance = inputs
    check_dtype(node, "grads", grads, _FLOATS)
    layouts = ("NCHW", "NHWC") if grads.dim() == 4 else ("NCDHW", "NDHWC")
    channel, shape, _dims = _channel_view(node, grads, layouts, layouts[0])
    scale = _per_channel(node, "scale", scale, grads.shape[channel], shape)
    variance = _per_channel(node, "batch_variance", batch_variance, grads.shape[channel], shape)
    out = opmath(grads).float() * scale * torch.rsqrt(variance + attrs.get("epsilon", 0.0001))
    return [out.to(grads.dtype)]


@builtin_kernel("BatchNormGradV3")
def _batch_norm_grad_v3(inputs, attrs, node):
    """dx, dweight, dbias of batch norm. Training: statistics are save_mean and save_rstd (the reciprocal
    std); inference: running_mean and rsqrt(running_var + epsilon), with dx = dy * weight * rstd."""
    dy, x, weight, running_mean, running_var, save_mean, save_rstd = inputs
    channel, shape, dims, channels = _bn_grad_frame(node, "dy", dy, x)
    gamma = _per_channel(node, "weight", weight, channels, shape)
    training = attrs.get("is_training", True)
    epsilon = attrs.get("epsilon", 1e-5)  # only the inference form uses it: save_rstd already includes it
    if training:
        mean = _per_channel(node, "save_mean", save_mean, channels, shape)
        rstd = _per_channel(node, "save_rstd", save_rstd, channels, shape)
    else:
        mean = _per_channel(node, "running_mean", running_mean, channels, shape)
        rstd = torch.rsqrt(_per_channel(node, "running_var", running_var, channels, shape) + epsilon)
    wide_dy = opmath(dy).float()
    x_hat = (opmath(x).float() - mean) * rstd
    dbias = wide_dy.sum(dim=dims)
    dweight = (wide_dy * x_hat).sum(dim=dims)
    if training:
        count = max(x.numel() // max(channels, 1), 1)
        dx = gamma * rstd * (wide_dy - (dbias.reshape(shape) + x_hat * dweight.reshape(shape)) / count)
    else:
        dx = wide_dy * gamma * rstd
    return [dx.to(x.dtype), dweight.to(weight.dtype), dbias.to(weight.dtype)]


# ---- group norm -----------------------------------------------------------------------------------

@builtin_kernel("GroupNormGrad", unread_attrs={
    "dx_is_require": "every output is computed; an output not required is simply unused",
    "dgamma_is_require": "every output is computed; an output not required is simply unused",
    "dbeta_is_require": "every output is computed; an output not required is simply unused"})
def _group_norm_grad(inputs, attrs, node):
    """Gradients of group norm over x [N, C, *] with mean/rstd [N, num_groups] (NCHW data_format)."""
    dy, mean, rstd, x, gamma = inputs
    for name, tensor in (("dy", dy), ("mean", mean), ("rstd", rstd), ("x", x), ("gamma", gamma)):
        check_dtype(node, name, tensor, _FLOATS)
    if attrs.get("data_format", "NCHW") != "NCHW":
        fail(node, f"data_format {attrs['data_format']!r} is not supported (NCHW)")
    groups = attrs["num_groups"]
    if x.dim() < 2 or dy.shape != x.shape or groups <= 0 or x.shape[1] % groups:
        fail(node, f"x {list(x.shape)} / dy {list(dy.shape)} need C divisible by num_groups={groups}")
    n, c = x.shape[0], x.shape[1]
    if mean.numel() != n * groups or rstd.numel() != n * groups or gamma.numel() != c:
        fail(node, f"mean/rstd need {n * groups} entries and gamma {c}")
    grouped = [n, groups, -1]
    wide_x = opmath(x).float().reshape(grouped)
    wide_dy = opmath(dy).float()
    g_rstd = rstd.float().reshape(n, groups, 1)
    x_hat = (wide_x - mean.float().reshape(n, groups, 1)) * g_rstd
    channel_shape = [1, c] + [1] * (x.dim() - 2)
    scaled = (wide_dy * gamma.float().reshape(channel_shape)).reshape(grouped)
    if n * c == 0 or x.numel() == 0:
        dx = torch.zeros_like(wide_x)
    else:
        dx = g_rstd * (scaled - scaled.mean(dim=2, keepdim=True) - x_hat * (scaled * x_hat).mean(dim=2, keepdim=True))
    reduce = [0] + list(range(2, x.dim()))
    dgamma = (wide_dy * x_hat.reshape(x.shape)).sum(dim=reduce)
    dbeta = wide_dy.sum(dim=reduce)
    return [dx.reshape(x.shape).to(x.dtype), dgamma.to(gamma.dtype), dbeta.to(gamma.dtype)]


# ---- sync batch norm (per-channel sums given) -----------------------------------------------------

@builtin_kernel("SyncBatchNormBackwardReduce")
def _sync_bn_backward_reduce(inputs, attrs, node):
    """sum_dy_xmu = sum_dy_dx_pad - mean * sum_dy (sum(dy * (x - mean)) from sum(dy * x)), y = sum_dy_xmu * invert_std."""
    sum_dy, sum_dy_dx, mean, invert_std = inputs
    same_dtype(node.type, [sum_dy, sum_dy_dx, mean, invert_std])
    check_dtype(node, "sum_dy", sum_dy, _F16_F32)
    if not (sum_dy.shape == sum_dy_dx.shape == mean.shape == invert_std.shape):
        fail(node, "sum_dy, sum_dy_dx_pad, mean and invert_std must have one shape")
    xmu = opmath(sum_dy_dx) - opmath(mean) * opmath(sum_dy)
    return [xmu.to(sum_dy.dtype), (xmu * opmath(invert_std)).to(sum_dy.dtype)]


@builtin_kernel("SyncBatchNormBackwardElemt")
def _sync_bn_backward_elemt(inputs, attrs, node):
    """grad_input = (grad_output - mean_dy - (save_input - mean) * invstd^2 * mean_dy_xmu) * invstd * weight;
    every input already has grad_output's shape (TorchAir expands them)."""
    tensors = dict(zip(("grad_output", "save_input", "mean", "invstd", "weight", "mean_dy", "mean_dy_xmu"), inputs))
    same_dtype(node.type, list(tensors.values()))
    check_dtype(node, "grad_output", tensors["grad_output"], _FLOATS)
    shape = tensors["grad_output"].shape
    for name, tensor in tensors.items():
        if tensor.shape != shape:
            fail(node, f"{name} has shape {list(tensor.shape)}, expected grad_output's {list(shape)}")
    w = {name: opmath(t) for name, t in tensors.items()}
    invstd = w["invstd"]
    grad = (w["grad_output"] - w["mean_dy"] - (w["save_input"] - w["mean"]) * invstd * invstd * w["mean_dy_xmu"])
    return [(grad * invstd * w["weight"]).to(tensors["grad_output"].dtype)]

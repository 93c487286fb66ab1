"""Per-channel batch-norm GE ops (hicann ops-nn ``norm/``), forward and backward: BNInfer,
BatchNormV3, BNTrainingUpdateGrad, BN3DTrainingUpdateGrad, BNTrainingReduceGrad, BNInferGrad,
BatchNormGradV3, SyncBatchNormBackwardReduce, SyncBatchNormBackwardElemt, SyncBatchNormGatherStats.

A module of their own beside `layer_norm.py`, `rms_norm.py`, `group_norm.py` (CANN files both under ``norm/``):
their statistics run
across the batch, per channel, and they find the channel axis in x's GE layout (NCHW/NCDHW: axis 1;
NHWC/NDHWC: the last one), which the per-sample norms never read.

Formulas from CANN's operator definitions (REG_OP docs; hicann ops-nn ``norm/*`` READMEs); TorchAir's
converters are ``ge_converter/aten/native_batch_norm_backward.py`` and friends.

What the batch-norm statistics mean matters, because the grads consume what the forward produced:

* ``BNTrainingUpdateGrad`` / ``BNTrainingReduceGrad`` / ``BNInferGrad`` take ``batch_variance``, the
  variance, and compute ``rsqrt(batch_variance + epsilon)`` themselves. TorchAir (off arch35, which is
  what runs here: ``is_arch35()`` is false without torch_npu) feeds them BatchNormV3's ``save_rstd``
  output, which CANN's BatchNormV3 README says holds the variance on Atlas A2/A3/training parts (the
  reciprocal std only on Ascend 950). The forward BatchNormV3 kernel follows that convention
  (`SAVE_RSTD_HOLDS_VARIANCE`).
* ``BatchNormGradV3`` (emitted only on arch35) takes ``save_rstd`` as the reciprocal std.

Statistics of 16-bit inputs are computed in float32 and rounded once, as the NPU kernels do.
"""
from __future__ import annotations

import torch
from ...registry import ge_kernel, refuse
from ..common import input_layout, opmath, require_dtype

_FLOATS = (torch.float16, torch.float32, torch.bfloat16)
_F16_F32 = (torch.float16, torch.float32)
_BN_FLOATS = (torch.float32, torch.float16, torch.bfloat16)
# What BatchNormV3's save_rstd holds (CANN ops-nn norm/batch_norm_v3 README): the batch variance on
# Atlas A2/A3 and training parts, the reciprocal std only on Ascend 950 (arch35). TorchAir's
# is_arch35() is false without torch_npu, and its backward converters then feed save_rstd to
# BNTrainingUpdateGrad/BNTrainingReduceGrad as the variance, so the simulator is a non-arch35 part.
SAVE_RSTD_HOLDS_VARIANCE = True


# ---- forward --------------------------------------------------------------------------------------

@ge_kernel("BNInfer", accepts={"x": _F16_F32}, prepared=True)
def bn_infer(x, scale, offset, mean, variance, *, epsilon, node):
    """y = (x - mean) / sqrt(variance + epsilon) * scale + offset, per channel (inference batch norm)."""
    for name, tensor in (("scale", scale), ("offset", offset), ("mean", mean), ("variance", variance)):
        # The prototype lists float32; TorchAir hands over the module's own dtype (float16 for a
        # .half() model), so any float dtype is accepted and widened.
        if not tensor.dtype.is_floating_point or tensor.dim() != 1:
            refuse(f"{name} must be a 1-D float tensor, got {tensor.dtype} {list(tensor.shape)}")
    layout = input_layout(node, 0, "NCHW")
    if layout not in ("NCHW", "NHWC"):
        refuse(f"x layout {layout!r} is not supported (NCHW or NHWC)")
    if x.dim() < 2:
        refuse(f"x must have a channel dim, got shape {list(x.shape)}")
    channel = 1 if layout == "NCHW" else x.dim() - 1
    shape = [1] * x.dim()
    shape[channel] = x.shape[channel]
    if any(t.shape[0] != x.shape[channel] for t in (scale, offset, mean, variance)):
        refuse(f"per-channel inputs must have {x.shape[channel]} entries")
    dtype = x.dtype
    if channel == 1:  # the call eager makes (aten.batch_norm, inference), in float32
        norm, enabled = torch.batch_norm, torch.backends.cudnn.enabled  # what F.batch_norm calls, after its checks
        if dtype == torch.float32 and all(t.dtype == torch.float32 for t in (scale, offset, mean, variance)):
            return lambda x, scale, offset, mean, variance: norm(x, scale, offset, mean, variance, False, 0.0,
                                                                 epsilon, enabled)

        def call(x, scale, offset, mean, variance):
            y = norm(opmath(x), _f32(scale), _f32(offset), _f32(mean), _f32(variance), False, 0.0, epsilon, enabled)
            return y if y.dtype == dtype else y.to(dtype)

        return call

    def channels_last(x, scale, offset, mean, variance):
        rstd = torch.rsqrt(variance.float() + epsilon)
        y = ((opmath(x) - mean.float().reshape(shape)) * (rstd * scale.float()).reshape(shape)
             + offset.float().reshape(shape))
        return y.to(dtype)

    return channels_last


def _f32(tensor: torch.Tensor) -> torch.Tensor:
    """`tensor.float()` without a dispatch when it is float32 already (a steady call's per-node cost)."""
    return tensor if tensor.dtype == torch.float32 else tensor.float()


def _channel_axis(node, x, first_layouts, last_layouts):
    layout = input_layout(node, 0, first_layouts[0])
    if layout in first_layouts:
        return 1
    if layout in last_layouts:
        return x.dim() - 1
    refuse(f"x layout {layout!r} is not supported ({', '.join(first_layouts + last_layouts)})")


@ge_kernel("BatchNormV3", accepts={name: _BN_FLOATS for name in ("x", "weight", "bias", "running_mean", "running_var")})
def batch_norm_v3(x, weight, bias, running_mean, running_var, *, epsilon, momentum, is_training, node):
    """Batch norm over every axis but the channel one (NCHW/NCDHW: axis 1; NHWC/NDHWC: last).

    Training: y = (x - mean) * rsqrt(var + epsilon) * weight + bias with the batch mean and biased
    variance; running_mean/var <- (1 - momentum) * running + momentum * batch statistic (the variance
    unbiased, n / (n - 1)); save_mean = batch mean; save_rstd = see SAVE_RSTD_HOLDS_VARIANCE.
    Inference (is_training=false): the running statistics normalise x and pass through unchanged;
    CANN defines save_mean/save_rstd for training only, here they report the statistics used
    (running_mean, and running_var under the same convention as training).
    """
    if x.dim() < 2:
        refuse(f"x must have a channel axis, got shape {list(x.shape)}")
    channel = _channel_axis(node, x, ("NCHW", "NCDHW"), ("NHWC", "NDHWC"))
    channels = x.shape[channel]
    for name, tensor in (("weight", weight), ("bias", bias), ("running_mean", running_mean),
                         ("running_var", running_var)):
        if list(tensor.shape) != [channels]:
            refuse(f"{name} must have shape [{channels}], got {list(tensor.shape)}")
    shape = [1] * x.dim()
    shape[channel] = channels
    reduce_dims = [d for d in range(x.dim()) if d != channel]
    wide = opmath(x).float()
    if is_training:
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
    return (y.to(x.dtype), new_mean.to(running_mean.dtype), new_var.to(running_var.dtype),
            mean.float(), save_rstd.float())


# ---- backward (statistics given per channel) ------------------------------------------------------

def _channel_view(node, x, layouts, default):
    """(channel dim, shape that broadcasts a per-channel vector, reduce dims) for x in its GE layout."""
    layout = input_layout(node, 0, default)
    if layout not in layouts:
        refuse(f"x layout {layout!r} is not supported ({', '.join(layouts)})")
    if x.dim() < 2:
        refuse(f"x must have a channel dim, got shape {list(x.shape)}")
    channel = x.dim() - 1 if layout in ("NHWC", "NDHWC") else 1
    shape = [1] * x.dim()
    shape[channel] = x.shape[channel]
    return channel, shape, [d for d in range(x.dim()) if d != channel]


def _per_channel(name, tensor, channels, shape):
    require_dtype(name, tensor, _FLOATS)
    if tensor.numel() != channels:
        refuse(f"{name} must have {channels} entries (one per channel), got shape {list(tensor.shape)}")
    return tensor.float().reshape(shape)


def _bn_update_grad(expected_rank):
    def bn_update_grad(grads, x, batch_mean, batch_variance, *, epsilon, node):
        """diff_scale = sum(grads * (x - batch_mean) * rsqrt(batch_variance + epsilon)), diff_offset = sum(grads),
        over every dim but the channel."""
        if x.dim() != expected_rank or grads.shape != x.shape:
            refuse(f"x and grads must be {expected_rank}-D of one shape, got {list(x.shape)} and {list(grads.shape)}")
        layouts = ("NCHW", "NHWC") if expected_rank == 4 else ("NCDHW", "NDHWC")
        channel, shape, dims = _channel_view(node, x, layouts, layouts[0])
        mean = _per_channel("batch_mean", batch_mean, x.shape[channel], shape)
        variance = _per_channel("batch_variance", batch_variance, x.shape[channel], shape)
        wide_dy = opmath(grads).float()
        x_hat = (opmath(x).float() - mean) * torch.rsqrt(variance + epsilon)
        return (wide_dy * x_hat).sum(dim=dims), wide_dy.sum(dim=dims)

    bn_update_grad.__name__ = "bn_training_update_grad" if expected_rank == 4 else "bn3d_training_update_grad"
    return bn_update_grad


bn_training_update_grad = ge_kernel("BNTrainingUpdateGrad", one_dtype=("grads", "x"), accepts={"x": _FLOATS})(
    _bn_update_grad(4))
bn3d_training_update_grad = ge_kernel("BN3DTrainingUpdateGrad", one_dtype=("grads", "x"), accepts={"x": _FLOATS})(
    _bn_update_grad(5))


def _bn_grad_frame(node, grad_name, grad, x):
    """Checks shared by the batch-norm grads over a 4-D/5-D x (their dtypes are the decorator's):
    (channel dim, per-channel view shape, reduced dims, channel count) in x's layout."""
    if x.dim() not in (4, 5) or grad.shape != x.shape:
        refuse(f"x and {grad_name} must be 4-D or 5-D of one shape, got {list(x.shape)} and {list(grad.shape)}")
    layouts = ("NCHW", "NHWC") if x.dim() == 4 else ("NCDHW", "NDHWC")
    channel, shape, dims = _channel_view(node, x, layouts, layouts[0])
    return channel, shape, dims, x.shape[channel]


@ge_kernel("BNTrainingReduceGrad", one_dtype=("grads", "x"), accepts={"x": _FLOATS})
def bn_training_reduce_grad(grads, x, diff_scale, diff_offset, scale, batch_mean, batch_variance, *, epsilon, node):
    """y = scale * rstd * (grads - diff_offset / m - (x - batch_mean) * rstd * diff_scale / m),
    rstd = rsqrt(batch_variance + epsilon), m = elements per channel."""
    _channel, shape, _dims, channels = _bn_grad_frame(node, "grads", grads, x)
    per = {name: _per_channel(name, t, channels, shape) for name, t in (
        ("diff_scale", diff_scale), ("diff_offset", diff_offset), ("scale", scale), ("batch_mean", batch_mean),
        ("batch_variance", batch_variance))}
    count = x.numel() // max(channels, 1)
    rstd = torch.rsqrt(per["batch_variance"] + epsilon)
    x_hat = (opmath(x).float() - per["batch_mean"]) * rstd
    dx = per["scale"] * rstd * (opmath(grads).float()
                                - (per["diff_offset"] + x_hat * per["diff_scale"]) / max(count, 1))
    return dx.to(x.dtype)


@ge_kernel("BNInferGrad", accepts={"grads": _FLOATS})
def bn_infer_grad(grads, scale, batch_variance, *, epsilon, node):
    """x_backprop = grads * scale * rsqrt(batch_variance + epsilon) (inference batch norm: statistics are
    constants)."""
    layouts = ("NCHW", "NHWC") if grads.dim() == 4 else ("NCDHW", "NDHWC")
    channel, shape, _dims = _channel_view(node, grads, layouts, layouts[0])
    scale = _per_channel("scale", scale, grads.shape[channel], shape)
    variance = _per_channel("batch_variance", batch_variance, grads.shape[channel], shape)
    out = opmath(grads).float() * scale * torch.rsqrt(variance + epsilon)
    return out.to(grads.dtype)


@ge_kernel("BatchNormGradV3", one_dtype=("dy", "x"), accepts={"x": _FLOATS})
def batch_norm_grad_v3(dy, x, weight, running_mean, running_var, save_mean, save_rstd, *, is_training, epsilon,
                       node):
    """dx, dweight, dbias of batch norm. Training: statistics are save_mean and save_rstd (the reciprocal
    std); inference: running_mean and rsqrt(running_var + epsilon), with dx = dy * weight * rstd.
    Only the inference form uses epsilon: save_rstd already includes it."""
    _channel, shape, dims, channels = _bn_grad_frame(node, "dy", dy, x)
    gamma = _per_channel("weight", weight, channels, shape)
    if is_training:
        mean = _per_channel("save_mean", save_mean, channels, shape)
        rstd = _per_channel("save_rstd", save_rstd, channels, shape)
    else:
        mean = _per_channel("running_mean", running_mean, channels, shape)
        rstd = torch.rsqrt(_per_channel("running_var", running_var, channels, shape) + epsilon)
    wide_dy = opmath(dy).float()
    x_hat = (opmath(x).float() - mean) * rstd
    dbias = wide_dy.sum(dim=dims)
    dweight = (wide_dy * x_hat).sum(dim=dims)
    if is_training:
        count = max(x.numel() // max(channels, 1), 1)
        dx = gamma * rstd * (wide_dy - (dbias.reshape(shape) + x_hat * dweight.reshape(shape)) / count)
    else:
        dx = wide_dy * gamma * rstd
    return dx.to(x.dtype), dweight.to(weight.dtype), dbias.to(weight.dtype)


# ---- sync batch norm (per-channel sums given) -----------------------------------------------------

@ge_kernel("SyncBatchNormBackwardReduce", one_dtype=("sum_dy", "sum_dy_dx_pad", "mean", "invert_std"),
           accepts={"sum_dy": _F16_F32}, widen=True)
def sync_batch_norm_backward_reduce(sum_dy, sum_dy_dx_pad, mean, invert_std):
    """sum_dy_xmu = sum_dy_dx_pad - mean * sum_dy (sum(dy * (x - mean)) from sum(dy * x)),
    y = sum_dy_xmu * invert_std."""
    if not (sum_dy.shape == sum_dy_dx_pad.shape == mean.shape == invert_std.shape):
        refuse("sum_dy, sum_dy_dx_pad, mean and invert_std must have one shape")
    xmu = sum_dy_dx_pad - mean * sum_dy
    return xmu, xmu * invert_std


_ELEMT_INPUTS = ("grad_output", "save_input", "mean", "invstd", "weight", "mean_dy", "mean_dy_xmu")


@ge_kernel("SyncBatchNormBackwardElemt", one_dtype=_ELEMT_INPUTS, accepts={"grad_output": _FLOATS}, widen=True)
def sync_batch_norm_backward_elemt(grad_output, save_input, mean, invstd, weight, mean_dy, mean_dy_xmu):
    """grad_input = (grad_output - mean_dy - (save_input - mean) * invstd^2 * mean_dy_xmu) * invstd * weight;
    every input already has grad_output's shape (TorchAir expands them)."""
    for name, tensor in zip(_ELEMT_INPUTS, (grad_output, save_input, mean, invstd, weight, mean_dy, mean_dy_xmu),
                            strict=True):
        if tensor.shape != grad_output.shape:
            refuse(f"{name} has shape {list(tensor.shape)}, expected grad_output's {list(grad_output.shape)}")
    grad = grad_output - mean_dy - (save_input - mean) * invstd * invstd * mean_dy_xmu
    return grad * invstd * weight


_GATHER_STATS = ("total_sum", "total_square_sum", "mean", "variance")


@ge_kernel("SyncBatchNormGatherStats", one_dtype=_GATHER_STATS, accepts={"total_sum": _F16_F32}, widen=True)
def sync_batch_norm_gather_stats(total_sum, total_square_sum, sample_count, mean, variance, *, momentum, eps):
    """The global statistics from every device's per-channel sums (aclnnSyncBatchNormGatherStats.md):
    n = sum(sample_count), batch_mean = sum(total_sum) / n, batch_var = sum(total_square_sum) / n -
    batch_mean^2, batch_invstd = 1 / sqrt(batch_var + eps); the running mean/variance move by momentum
    towards batch_mean and the unbiased batch_var * n / (n - 1). IEEE results (inf/NaN) for n of 0 or 1
    or a negative batch_var, as CANN's formula gives them: it defines no check."""
    require_dtype("sample_count", sample_count, (torch.int32,))
    if total_sum.dim() != 2 or total_square_sum.shape != total_sum.shape:
        refuse(f"total_sum {list(total_sum.shape)} and total_square_sum {list(total_square_sum.shape)} must be "
               "one (devices, channels) shape")
    devices, channels = total_sum.shape
    if devices == 0 or tuple(sample_count.shape) != (devices,):
        refuse(f"sample_count {list(sample_count.shape)} must be ({devices},), one count per device (> 0 devices)")
    if tuple(mean.shape) != (channels,) or tuple(variance.shape) != (channels,):
        refuse(f"mean {list(mean.shape)} and variance {list(variance.shape)} must be ({channels},)")
    # the arch35 kernel's order (sync_batch_norm_gather_stats_n_full_load.h): counts summed in int64, then
    # float32 products with 1 / n and n / (n - 1) * momentum
    count = sample_count.sum().to(torch.float32)
    inverse = 1.0 / count
    batch_mean = total_sum.sum(dim=0) * inverse
    batch_var = total_square_sum.sum(dim=0) * inverse - batch_mean * batch_mean
    batch_invstd = 1.0 / torch.sqrt(batch_var + eps)
    running_mean = mean * (1.0 - momentum) + batch_mean * momentum
    running_var = batch_var * (count / (count - 1.0) * momentum) + variance * (1.0 - momentum)
    return batch_mean, batch_invstd, running_mean, running_var

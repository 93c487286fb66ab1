"""Activation GE ops with attrs or NPU-specific forms: Gelu (CANN's tanh form), GeluV2, Swish,
LeakyRelu, Elu, LogSigmoid, PRelu (per-channel slope), HardSigmoid (alpha, beta), HardSwish, GLU (dim).

Where the NPU computes differently from eager PyTorch, the kernel follows the NPU: `Gelu` is the
tanh approximation (CANN's Gelu has no erf mode; TorchAir lowers `aten.gelu` with either
`approximate` to it).
"""
from __future__ import annotations

import torch

from ..registry import ge_kernel, refuse

_F16_F32 = (torch.float16, torch.float32)


@ge_kernel("Gelu", widen=True)
def gelu(x):
    """CANN's Gelu: the tanh approximation, computed in float32 for 16-bit inputs."""
    return torch.nn.functional.gelu(x, approximate="tanh")


@ge_kernel("GeluV2", widen=True)
def gelu_v2(x, *, approximate):
    if approximate not in ("none", "tanh"):
        refuse(f"approximate must be 'none' or 'tanh', got {approximate!r}")
    return torch.nn.functional.gelu(x, approximate=approximate)


@ge_kernel("Swish", widen=True)
def swish(x, *, scale):
    return x * torch.sigmoid(scale * x)


@ge_kernel("LeakyRelu")
def leaky_relu(x, *, negative_slope):
    return torch.nn.functional.leaky_relu(x, negative_slope)


@ge_kernel("Elu", widen=True)
def elu(x, *, alpha, scale, input_scale):
    return scale * torch.where(x > 0, x, alpha * torch.expm1(input_scale * x))


@ge_kernel("LogSigmoid", accepts={"x": _F16_F32}, widen=True)
def log_sigmoid(x):
    """y = log(1 / (1 + exp(-x))), computed stably as -softplus(-x)."""
    return torch.nn.functional.logsigmoid(x)


@ge_kernel("PRelu", accepts={"x": _F16_F32, "weight": _F16_F32}, widen=True)
def prelu(x, weight):
    """y = x where x > 0, else weight * x; weight has one slope, or one per channel (dim 1 of x,
    dim 0 of a 1-D x)."""
    channels = x.shape[1] if x.dim() >= 2 else (x.shape[0] if x.dim() == 1 else 1)
    if weight.numel() != 1:
        if weight.numel() != channels:
            refuse(f"weight has {weight.numel()} slopes but x {tuple(x.shape)} has {channels} channels")
        if x.dim() >= 2:
            weight = weight.reshape([channels] + [1] * (x.dim() - 2))
    return torch.where(x > 0, x, weight * x)


@ge_kernel("HardSigmoid", accepts={"input_x": (torch.float32, torch.float16, torch.int32)})
def hard_sigmoid(input_x, *, alpha, beta):
    """y = max(0, min(1, alpha * x + beta)); an int32 input gives a float32 result."""
    x = input_x
    wide, out_dtype = (x.float(), x.dtype) if x.dtype.is_floating_point else (x.to(torch.float32), torch.float32)
    return torch.clamp(alpha * wide + beta, 0.0, 1.0).to(out_dtype)


@ge_kernel("HardSwish", accepts={"x": _F16_F32}, widen=True)
def hard_swish(x):
    """y = x * relu6(x + 3) / 6."""
    return x * torch.clamp(x + 3.0, 0.0, 6.0) / 6.0


@ge_kernel("GLU", accepts={"x": (torch.float16, torch.bfloat16, torch.float32, torch.float64)}, widen=True)
def glu(x, *, dim):
    """Split x in two halves a, b along dim; y = a * sigmoid(b)."""
    if x.dim() == 0 or not -x.dim() <= dim < x.dim():
        refuse(f"dim {dim} is out of range for x of shape {tuple(x.shape)}")
    if x.shape[dim] % 2:
        refuse(f"dim {dim} of x {tuple(x.shape)} has odd size {x.shape[dim]}; GLU halves it")
    first, second = x.chunk(2, dim=dim)
    return first * torch.sigmoid(second)

"""Activation GE ops with attrs or NPU-specific forms: Gelu (CANN's tanh form), GeluV2, Swish,
LeakyRelu, Elu.

Where the NPU computes differently from eager PyTorch, the kernel follows the NPU: `Gelu` is the
tanh approximation (CANN's Gelu has no erf mode; TorchAir lowers `aten.gelu` with either
`approximate` to it).
"""
from __future__ import annotations

import torch

from .common import opmath
from .registry import builtin_kernel


@builtin_kernel("Gelu")
def _gelu(inputs, attrs, node):
    """CANN's Gelu: the tanh approximation, computed in float32 for 16-bit inputs."""
    x = inputs[0]
    return [torch.nn.functional.gelu(opmath(x), approximate="tanh").to(x.dtype)]


@builtin_kernel("GeluV2")
def _gelu_v2(inputs, attrs, node):
    x = inputs[0]
    approximate = attrs.get("approximate", "none")
    if approximate not in ("none", "tanh"):
        raise ValueError(f"GeluV2 approximate must be 'none' or 'tanh', got {approximate!r}")
    return [torch.nn.functional.gelu(opmath(x), approximate=approximate).to(x.dtype)]


@builtin_kernel("Swish")
def _swish(inputs, attrs, node):
    x = inputs[0]
    scale = attrs.get("scale", 1.0)
    wide = opmath(x)
    return [(wide * torch.sigmoid(scale * wide)).to(x.dtype)]


@builtin_kernel("LeakyRelu")
def _leaky_relu(inputs, attrs, node):
    return [torch.nn.functional.leaky_relu(inputs[0], attrs.get("negative_slope", 0.0))]


@builtin_kernel("Elu")
def _elu(inputs, attrs, node):
    x = inputs[0]
    alpha, scale, input_scale = attrs.get("alpha", 1.0), attrs.get("scale", 1.0), attrs.get("input_scale", 1.0)
    wide = opmath(x)
    return [(scale * torch.where(wide > 0, wide, alpha * torch.expm1(input_scale * wide))).to(x.dtype)]

"""A small convolutional classifier from plain PyTorch layers only.

    Conv2d -> BatchNorm2d -> ReLU -> MaxPool2d
    -> grouped, dilated Conv2d -> BatchNorm2d -> ReLU -> MaxPool2d(ceil_mode, padding)
    -> strided Conv2d (no bias) -> ReLU -> AdaptiveAvgPool2d -> flatten -> Linear

The second block exercises the convolution and pooling attrs (groups, dilation, padding, stride,
ceil_mode) that the GE lowering carries; BatchNorm runs with its running statistics (eval mode).
"""
from __future__ import annotations

import torch
from torch import nn


class SmallCnn(nn.Module):
    def __init__(self, in_channels: int = 3, classes: int = 10):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(in_channels, 8, kernel_size=3, padding=1),
            nn.BatchNorm2d(8),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(8, 16, kernel_size=3, padding=2, dilation=2, groups=2),
            nn.BatchNorm2d(16),
            nn.ReLU(),
            nn.MaxPool2d(3, stride=2, padding=1, ceil_mode=True),
            nn.Conv2d(16, 24, kernel_size=3, stride=2, padding=1, bias=False),
            nn.ReLU(),
            nn.AdaptiveAvgPool2d((2, 2)),
        )
        self.classifier = nn.Linear(24 * 2 * 2, classes)

    def forward(self, images):
        return self.classifier(torch.flatten(self.features(images), 1))


def randomise_batch_norm(model: nn.Module, seed: int = 0) -> nn.Module:
    """Non-trivial running statistics and affine parameters, so eval BatchNorm is not an identity."""
    generator = torch.Generator().manual_seed(seed)
    for module in model.modules():
        if isinstance(module, nn.BatchNorm2d):
            n = module.num_features
            module.running_mean.copy_(0.2 * torch.randn(n, generator=generator))
            module.running_var.copy_(0.5 + torch.rand(n, generator=generator))
            with torch.no_grad():
                module.weight.copy_(1 + 0.2 * torch.randn(n, generator=generator))
                module.bias.copy_(0.2 * torch.randn(n, generator=generator))
    return model


def example_inputs(batch: int = 2, size: int = 20, dtype=torch.float32, seed: int = 0):
    generator = torch.Generator().manual_seed(seed)
    return (torch.randn(batch, 3, size, size, generator=generator).to(dtype),)


def build(dtype=torch.float32):
    """(model, example_inputs) for `op-plugin inspect examples.small_cnn:build`."""
    torch.manual_seed(0)
    model = randomise_batch_norm(SmallCnn()).to(dtype).eval()
    return model, example_inputs(dtype=dtype)

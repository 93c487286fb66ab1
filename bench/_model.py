"""The benchmark model: op_plugin's DemoBlock (a decoder-style block of shipped ops) stacked N times."""
from __future__ import annotations

import torch
from torch import nn

from op_plugin._tools.demo.model import DemoBlock, example_inputs


class DecoderStack(nn.Module):
    """`layers` DemoBlocks in sequence (hidden 32, 2 heads, MLP 48, as in `op-plugin demo`)."""

    def __init__(self, layers: int):
        super().__init__()
        self.blocks = nn.ModuleList(DemoBlock() for _ in range(layers))

    def forward(self, x, cos, sin):
        for block in self.blocks:
            x = block(x, cos, sin)
        return x


def decoder_model(layers: int, seed: int = 0) -> DecoderStack:
    torch.manual_seed(seed)
    return DecoderStack(layers).eval()


def model_inputs(batch: int = 2, seq: int = 8, seed: int = 0):
    torch.manual_seed(seed)
    return example_inputs(batch, seq)

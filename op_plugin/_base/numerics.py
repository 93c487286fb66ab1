"""Numeric conventions shared by the reference kernels and the simulator's GE kernels."""
from __future__ import annotations

import torch

HALF_PRECISION = (torch.float16, torch.bfloat16)


def opmath(tensor: torch.Tensor) -> torch.Tensor:
    """16-bit floats widened to float32, as NPU vector and cube units compute them; others as they are."""
    return tensor.float() if tensor.dtype in HALF_PRECISION else tensor

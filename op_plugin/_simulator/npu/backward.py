"""CPU reference kernels of the backward ops torch_npu registers for its fused ops (training)."""
from __future__ import annotations

KERNELS: dict = {}

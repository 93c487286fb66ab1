"""CPU reference kernels of torch_npu's mixture-of-experts ops: gating, routing, grouped matmul."""
from __future__ import annotations

KERNELS: dict = {}

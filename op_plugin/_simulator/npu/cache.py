"""CPU reference kernels of torch_npu's KV-cache ops (paged-cache writes, fused norm/rope/cache)."""
from __future__ import annotations

KERNELS: dict = {}

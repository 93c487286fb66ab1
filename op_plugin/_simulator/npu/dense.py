"""CPU reference kernels of torch_npu's dense ops: gelu, dtype cast, linear, transpose-batchmatmul."""
from __future__ import annotations

KERNELS: dict = {}

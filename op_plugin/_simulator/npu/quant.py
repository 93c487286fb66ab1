"""CPU reference kernels of torch_npu's quantisation ops: dynamic quant, quantize, quant matmul."""
from __future__ import annotations

KERNELS: dict = {}

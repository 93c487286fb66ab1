"""CPU kernels of built-in GE op types, one module per concept, and the kernel table (`registry`).

elementwise, activation, matmul, norm, reduce, shape (shape, index and creation ops), conv_pool,
fused (CANN's fused Ascend ops). Each is written from the op's CANN definition, not from
op_plugin's reference kernels, so a YAML mapping onto a built-in type is checked against GE
semantics. Importing this package registers them all.
"""
from . import activation, conv_pool, elementwise, fused, matmul, norm, reduce, shape  # noqa: F401  (register)
from .registry import (
    GeKernel, builtin_kernel, builtin_kernels, builtin_op_types, lookup_kernel, register_ge_kernel,
    supported_op_types,
)

__all__ = ["GeKernel", "builtin_kernel", "builtin_kernels", "builtin_op_types", "lookup_kernel",
           "register_ge_kernel", "supported_op_types"]

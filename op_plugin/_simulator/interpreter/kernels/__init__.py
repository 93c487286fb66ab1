"""CPU kernels of CANN's built-in GE op types, filed as CANN files its ops: one subpackage per CANN op
class (activation, attention, conv, ffn, foreach, gmm, hccl, image, index, loss, math, matmul, mc2,
moe, norm, pooling, posembedding, quant, random, reduce, shape), one module per op family in it, an
op's forward and backward side by side. Each kernel is written from the op's CANN definition, not from
op_plugin's reference kernels, so a YAML mapping onto a built-in type is checked against GE semantics.
Helpers shared across modules are in `common` and, for the low-bit storage formats (MX, int4, fp8),
`formats`. Importing this package imports every module of every subpackage (a new family is a new
file), so their `@ge_kernel` decorators register.
"""
import importlib
import pkgutil

for _info in sorted(pkgutil.walk_packages(__path__, f"{__name__}."), key=lambda info: info.name):
    if not _info.name.rsplit(".", 1)[-1].startswith("_"):
        importlib.import_module(_info.name)

from ..registry import (  # noqa: E402  (after the kernel modules have registered)
    builtin_entries, builtin_kernels, builtin_op_types, ge_kernel, lookup_kernel,
    register_ge_kernel, supported_op_types,
)

__all__ = ["builtin_entries", "builtin_kernels", "builtin_op_types", "ge_kernel", "lookup_kernel",
           "register_ge_kernel", "supported_op_types"]

"""CPU kernels of CANN's built-in GE op types, one module per CANN op class (forward and backward
together, as CANN files them). Each is written from the op's CANN definition, not from op_plugin's
reference kernels, so a YAML mapping onto a built-in type is checked against GE semantics.
Importing this package imports every module in it (a new class is a new file), so their
`@ge_kernel` decorators register.
"""
import importlib
import pkgutil

for _module in sorted(info.name for info in pkgutil.iter_modules(__path__) if not info.name.startswith("_")):
    importlib.import_module(f"{__name__}.{_module}")

from ..registry import (  # noqa: E402  (after the kernel modules have registered)
    builtin_entries, builtin_kernels, builtin_op_types, ge_kernel, lookup_kernel,
    register_ge_kernel, supported_op_types,
)

__all__ = ["builtin_entries", "builtin_kernels", "builtin_op_types", "ge_kernel", "lookup_kernel",
           "register_ge_kernel", "supported_op_types"]

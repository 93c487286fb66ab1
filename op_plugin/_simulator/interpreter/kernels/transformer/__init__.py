"""Kernels of CANN's transformer ops (ops-transformer): attention, rope, moe (mixture of experts:
routing, grouped matmul). Importing this package imports every module in it."""
import importlib
import pkgutil

for _module in sorted(info.name for info in pkgutil.iter_modules(__path__) if not info.name.startswith("_")):
    importlib.import_module(f"{__name__}.{_module}")

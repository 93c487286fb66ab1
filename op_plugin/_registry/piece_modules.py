"""Packages of hand-written pieces (op_plugin/reference_kernels/, meta/, converters/) load every module
placed in them."""
from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterable
from types import ModuleType


def import_piece_modules(package: str, path: Iterable[str]) -> list[ModuleType]:
    """Import every module of `package` (its `__path__` is `path`) in name order, so that dropping a
    file into the folder is enough for its decorators to register. Names starting with `_` are
    helpers for the others and are not imported here."""
    names = sorted(info.name for info in pkgutil.iter_modules(list(path)) if not info.name.startswith("_"))
    return [importlib.import_module(f"{package}.{name}") for name in names]

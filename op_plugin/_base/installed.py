"""Whether an importable `torch_npu` is the installed torch-npu distribution, not a folder that shares its name.

op_plugin decides "Ascend host" (TorchAir from torch_npu, torch_npu's own ops and device) by torch_npu.
`importlib.util.find_spec("torch_npu")` alone also finds a folder named `torch_npu` in the working directory
(`python -c`, the REPL, pytest run from there) or beside the script (`sys.path[0]`), even an empty data folder
(a namespace package), and importing it runs its `__init__.py`. So op_plugin takes torch_npu for real only
when `find_spec` finds the file the installed torch-npu distribution ships (`importlib.metadata`); anything
else named torch_npu is ignored, as if torch_npu were absent, and is never imported by op_plugin. A regular
package or module named torch_npu that hides an installed torch-npu is refused by name
(`ShadowedTorchNpu`): importing torch_npu would load it instead.

The metadata is read only when some torch_npu is found at all, so a CPU host without one pays one
`find_spec`, as before.
"""
from __future__ import annotations

import importlib.machinery
import importlib.metadata
import importlib.util
import os
import sys
from pathlib import Path

from .errors import OpPluginError

TORCH_NPU = "torch_npu"
DISTRIBUTION = "torch-npu"


class ShadowedTorchNpu(OpPluginError):
    """A torch_npu that is not the installed distribution's would be imported in its place."""


def torch_npu_spec() -> importlib.machinery.ModuleSpec | None:
    """The spec `import torch_npu` uses when it is the installed torch-npu's, else None (no torch_npu, or
    one that is not the distribution's: a folder, a module of the user's, op_plugin's virtual-NPU façade).
    Raises ShadowedTorchNpu when torch-npu is installed but another torch_npu would be imported."""
    spec = _find(TORCH_NPU)
    return spec if spec is not None and is_installed_torch_npu(spec) else None


def is_installed_torch_npu(spec) -> bool:
    """`spec` (what some finder found for torch_npu) is the installed torch-npu distribution's file.
    Raises ShadowedTorchNpu when torch-npu is installed and `spec` is another regular package or module."""
    if not _file_origin(spec):
        return False  # a namespace package (a bare folder), a façade, a built-in stand-in
    shipped = _shipped_file(DISTRIBUTION, TORCH_NPU)
    if shipped is None:
        return False  # no torch-npu distribution: a torch_npu of the user's, ignored
    if not shipped.exists() or _same_file(shipped, spec.origin):
        return True  # the distribution's (an editable install keeps its files elsewhere: accepted)
    raise ShadowedTorchNpu(
        f"{describe(spec)} hides the installed torch-npu ({shipped.parent}): `import torch_npu` would load it "
        "instead; rename or move it")


def real_torch_npu() -> bool:
    """An installed torch-npu is what `import torch_npu` loads (see torch_npu_spec)."""
    return torch_npu_spec() is not None


def describe(spec_or_module) -> str:
    """Where a module (or spec) comes from, for messages: "torch_npu at /work/torch_npu (a folder in the
    working directory)"."""
    spec = spec_or_module if isinstance(spec_or_module, importlib.machinery.ModuleSpec) else \
        getattr(spec_or_module, "__spec__", None)
    name = getattr(spec, "name", None) or getattr(spec_or_module, "__name__", "?")
    if spec is not None and _file_origin(spec):
        path = Path(spec.origin)
        where = path.parent if path.name == "__init__.py" else path
    else:
        locations = list(getattr(spec, "submodule_search_locations", None) or ())
        if not locations:
            origin = getattr(spec, "origin", None) or getattr(spec_or_module, "__file__", None)
            return f"{name} ({origin or 'no file'})"
        where = Path(locations[0])
    return f"{name} at {where}{_placement(where)}"


def _placement(where: Path) -> str:
    folder = where.parent
    if _same_dir(folder, os.getcwd()):
        return " (in the working directory)"
    first = sys.path[0] if sys.path else None
    if first and _same_dir(folder, first):
        return " (beside the script: sys.path[0])"
    return ""


def _find(name: str):
    try:
        return importlib.util.find_spec(name)
    except (ImportError, ValueError):  # a module in sys.modules without a spec, or a broken finder
        module = sys.modules.get(name)
        return getattr(module, "__spec__", None)


def _file_origin(spec) -> bool:
    origin = getattr(spec, "origin", None)
    return bool(getattr(spec, "has_location", False) and origin and os.path.isfile(origin))


def _shipped_file(distribution: str, module: str) -> Path | None:
    try:
        dist = importlib.metadata.distribution(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None
    return Path(dist.locate_file(f"{module}/__init__.py"))


def _same_file(a, b) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _same_dir(a, b) -> bool:
    try:
        return os.path.samefile(a, b or ".")
    except OSError:
        return False

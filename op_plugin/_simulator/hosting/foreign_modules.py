"""Folders that merely share a name with torch_npu or torchair are never imported by the simulator.

TorchAir runs ``import torch_npu`` (in ``torchair/__init__.py``, its backend, its ACL-graph and pattern code,
inside try/except ImportError) and on a CPU host expects it to fail. Python finds a folder named
``torch_npu`` in the working directory or beside the script (``sys.path[0]``) first, even an empty data folder
(a namespace package), so TorchAir imported it (running its ``__init__.py``), and every compile then failed
with "torch_npu is already imported" without naming the folder.

* ``install()`` puts a finder first on ``sys.meta_path`` (when the simulator loads TorchAir, for the rest of
  the process): an ``import torch_npu`` made by TorchAir or op_plugin that would load anything but the
  installed torch-npu (`op_plugin._base.installed`) fails with ModuleNotFoundError naming what was found,
  as on a CPU host without such a folder. User code still imports whatever it likes, and a probe
  (`importlib.util.find_spec`) still answers what Python finds: op_plugin's decisions read it through
  `op_plugin._base.installed`.
* ``simulator_torchair_first(parent)``: while the simulator imports TorchAir, the unpacked wheel's folder is
  first on ``sys.path``, so a ``torchair`` package of the user's (a folder with ``__init__.py``) cannot be
  imported in its place; afterwards the folder goes back to the end, where it shadows nothing. An empty
  folder named ``torchair`` never could: a regular package wins over a namespace portion.
"""
from __future__ import annotations

import contextlib
import importlib.abc
import importlib.machinery
import sys

from ..._base.installed import TORCH_NPU, describe, is_installed_torch_npu

_OURS = ("torchair", "op_plugin")
_HOOK_MODULE = __name__.rsplit(".", 1)[0] + ".converter_torch_npu"  # its import layer is no importer


def _importer_is_ours() -> bool:
    """The import comes from TorchAir or op_plugin: the first frame outside the import system (and outside
    op_plugin's import layer for converters, which any thread's import passes through during a converter call).
    False for a probe (`importlib.util.find_spec`), which answers None or a spec and must not raise."""
    frame = sys._getframe(2)
    while frame is not None:
        module = frame.f_globals.get("__name__") or ""
        if module == "importlib.util" and frame.f_code.co_name == "find_spec":
            return False
        if not module.startswith("importlib") and not frame.f_code.co_filename.startswith("<frozen importlib") \
                and module != _HOOK_MODULE:
            return module.split(".", 1)[0] in _OURS
        frame = frame.f_back
    return False


class _ForeignTorchNpu(importlib.abc.MetaPathFinder):
    """Refuses a torch_npu that is not the installed distribution's to TorchAir's and op_plugin's imports."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname != TORCH_NPU or path is not None or not _importer_is_ours():
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname)
        if spec is None or is_installed_torch_npu(spec):
            return None  # nothing there (Python's own error follows), or the real one
        raise ModuleNotFoundError(
            f"No module named 'torch_npu': {describe(spec)} is not the installed torch-npu; op_plugin's simulator "
            "and TorchAir never import it", name=TORCH_NPU)

    def __repr__(self):
        return "<op_plugin: no foreign torch_npu for TorchAir>"


FINDER = _ForeignTorchNpu()


def install() -> None:
    """The finder first on sys.meta_path (idempotent)."""
    if FINDER in sys.meta_path:
        sys.meta_path.remove(FINDER)
    sys.meta_path.insert(0, FINDER)


@contextlib.contextmanager
def simulator_torchair_first(parent: str):
    """Within the block `parent` (the wheel's folder holding torchair) is first on sys.path; after it, last."""
    sys.path[:] = [parent] + [entry for entry in sys.path if entry != parent]
    try:
        yield
    finally:
        sys.path[:] = [entry for entry in sys.path if entry != parent] + [parent]

"""torch_npu's process settings that TorchAir's converters read, answered on a CPU host.

Two converters (``custom/transpose_batchmatmul.py``, ``custom/fused_matmul.py``) read
``torch.npu.matmul.allow_hf32`` (torch_npu's switch for HF32 matmuls, default False) while lowering. A CPU
process has no ``torch.npu``, and giving torch one would make other code believe it runs on an NPU. So
only those converter modules see a ``torch`` whose ``npu.matmul.allow_hf32`` is torch_npu's default
(False); every other name is torch's own. The rebinding happens right after each of those modules is
imported (TorchAir imports its ``custom`` converters lazily), by a finder that only wraps their loader.
"""
from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import types

import torch

# TorchAir converter modules that read torch_npu's matmul settings.
READERS = ("torchair._ge_concrete_graph.ge_converter.custom.transpose_batchmatmul",
           "torchair._ge_concrete_graph.ge_converter.custom.fused_matmul")
ALLOW_HF32 = False  # torch_npu's default for torch.npu.matmul.allow_hf32


class TorchWithNpuSettings(types.ModuleType):
    """torch, plus ``npu.matmul.allow_hf32`` (torch_npu's default), for the converter modules above."""

    def __init__(self):
        super().__init__("torch")
        self.npu = types.SimpleNamespace(matmul=types.SimpleNamespace(allow_hf32=ALLOW_HF32))

    def __getattr__(self, name):
        return getattr(torch, name)


def _rebind(module) -> None:
    if "npu" in torch.__dict__:  # the virtual NPU's torch.npu has the switch (device/torchair_branches.py)
        return
    if not isinstance(module.__dict__.get("torch"), TorchWithNpuSettings):
        module.torch = TorchWithNpuSettings()


class _RebindAfterImport(importlib.abc.MetaPathFinder):
    """Finds nothing itself: for a reader module, wraps the regular spec's loader so that the module's
    `torch` is rebound right after it executes (before any converter in it can run)."""

    def find_spec(self, fullname, path, target=None):
        if fullname not in READERS:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None:
            return None
        loader = spec.loader
        original_exec = loader.exec_module

        def exec_module(module):
            original_exec(module)
            _rebind(module)

        loader.exec_module = exec_module
        return spec


_FINDER = _RebindAfterImport()


def install(torchair) -> None:
    """Rebind the reader modules now if TorchAir imported them, else when it does (idempotent)."""
    del torchair
    for name in READERS:
        if name in sys.modules:
            _rebind(sys.modules[name])
    if _FINDER not in sys.meta_path:
        sys.meta_path.insert(0, _FINDER)

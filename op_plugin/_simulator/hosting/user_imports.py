"""`import torchair` and dynamo's backend "npu" in an Ascend program on the virtual NPU.

On an Ascend host, torch_npu (brought up inside `import torch` by its autoload entry) makes `torchair`
importable (`_install_lazy_torchair`, torch_npu/dynamo/__init__.py of the wheel) and registers the dynamo
backend "npu": TorchAir's `get_npu_backend()` with its default CompilerConfig (GE mode). A program written for
that host does `import torchair` and `torch.compile(model, backend="npu")` without any op_plugin call.

`install(load)` gives the virtual NPU the same: `load` is `op_plugin.load_torchair` (the simulator's TorchAir
with every YAML op's converter), passed in by the backend stage, which owns it.

* A meta path finder, first on `sys.meta_path`, answers `import torchair` while TorchAir is not loaded: it calls
  `load()` and hands the loaded module back. Imports made by op_plugin or by TorchAir itself are not answered (the
  loader imports TorchAir from the wheel's folder, which it puts on `sys.path`). First, because a process started by
  multiprocessing's spawn inherits that `sys.path`: there the path finder would find the wheel's TorchAir folder and
  import it without the simulator's set-up (its native modules then fail). As TorchAir's `__init__` imports
  torch_npu on an Ascend host, the answer puts torch_npu's façade in `sys.modules` first, so TorchAir takes its NPU-
  device branches (device/torchair_branches.py) as it does there. Submodules (`torchair.configs...`) are found
  through the loaded package's `__path__`, as usual.
* The dynamo backend "npu", resolved at its first use: `load().get_npu_backend()` (each compile gets a fresh
  default config, as torch_npu's lazily built global backend is built once from one).
"""
from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
from typing import Any, Callable

from ..device.torch_npu_facade import import_facade, importer_is_blind

NAME = "torchair"
_BLIND = ("op_plugin", "torchair")


class _Loaded(importlib.abc.Loader):
    """Hands back the module `load()` imported. The import system, finding the name in `sys.modules` once the
    finder returns, takes the module's own `__spec__` and would execute its `__init__` again into a second
    module; so the module carries this loader's spec until `exec_module`, which gives its own spec back."""

    def __init__(self, module):
        self.module = module
        self.spec = module.__spec__
        self.loader = module.__loader__

    def create_module(self, spec):
        return self.module

    def exec_module(self, module):
        module.__spec__, module.__loader__ = self.spec, self.loader


class _TorchairFinder(importlib.abc.MetaPathFinder):
    def __init__(self, load: Callable[[], Any]):
        self.load = load

    def find_spec(self, fullname, path=None, target=None):
        if fullname != NAME or path is not None or importer_is_blind(_BLIND):
            return None
        import_facade()  # TorchAir's `__init__` imports torch_npu: on an Ascend host that brings it in
        module = self.load()
        loaded = _Loaded(module)
        spec = importlib.machinery.ModuleSpec(NAME, loaded, origin=module.__spec__.origin, is_package=True)
        spec.submodule_search_locations = list(module.__path__)
        module.__spec__ = spec
        return spec


_installed: list[_TorchairFinder] = []


def install(load: Callable[[], Any]) -> None:
    """Make `import torchair` give `load()` and register the dynamo backend "npu" (idempotent)."""
    if _installed:
        return
    finder = _TorchairFinder(load)
    sys.meta_path.insert(0, finder)
    _installed.append(finder)
    _register_npu_backend(load)


def _register_npu_backend(load: Callable[[], Any]) -> None:
    from torch._dynamo.backends import registry

    if "npu" in registry._COMPILER_FNS:
        return

    def npu(gm, example_inputs, **kwargs):
        """dynamo's backend "npu" (torch_npu's): TorchAir's get_npu_backend() with the default config."""
        return load().get_npu_backend()(gm, example_inputs, **kwargs)

    registry.register_backend(npu, name="npu")

"""`import torch_npu` on the virtual NPU: a façade module, importable only while the device is active.

`install()` (called by `activation.activate()`) puts `FINDER` on `sys.meta_path`. Nothing is written to
disk and nothing enters `sys.modules` at activation: with the virtual NPU off `import torch_npu` fails
as on a stock CPU host, and `importlib.util.find_spec("torch_npu")` (how op_plugin and the autoload
entry detect a real Ascend host) stays None.

While active, the finder answers `import torch_npu` for user code only: an import made by a module of
op_plugin or of TorchAir is not answered (they keep seeing a CPU host, where op_plugin defines
torch_npu's ops itself, `npu/ops.py`, and the simulator hosts TorchAir without torch_npu,
`hosting/loader.py`), and neither is a bare `importlib.util.find_spec` from them. Once the user has
imported it, `torch_npu` is in `sys.modules` like any module.

The façade (`torch_npu`):

* `torch_npu.<op>`: every op of `torch.ops.npu` (the ops op_plugin defines from the torch-npu 2.13.0 wheel's
  schema list, and its YAML ops): `torch_npu.npu_rms_norm(x, gamma)` is `torch.ops.npu.npu_rms_norm(x, gamma)`;
* `torch_npu.npu`: the `torch.npu` module (`npu_module`), with `torch_npu.npu.utils` and
  `torch_npu.npu._backends` answering torch-npu 2.13.0's SoC query `get_soc_version()` (the SoC's enum
  value; `npu_module.SOCS`), also `torch_npu.npu.utils.get_cann_version()` / `_is_gte_cann_version`;
* torch_npu's graph-debugging ops `save_npugraph_tensor` / `print_npugraph_tensor`, defined in `torch.ops.npu`
  when the façade is built, as torch_npu defines them at its import (`torchair_branches`);
* `torch_npu.distributed`: `is_hccl_available` and the uneven collectives (`hccl_uneven`);
  `torch_npu._C._distributed_c10d.ProcessGroupHCCL`: the class of an hccl group's npu backend (gloo's, `hccl`);
* torch_npu's dtype constants (`torch_npu.hifloat8`, ...: the values of `npu/torch_npu_standin.py`) and
  `__version__` ("2.13.0", the wheel emulated);
* any other name raises `VirtualNpuMissing` (an AttributeError) naming it and saying the virtual NPU does
  not provide it.
"""
from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types

import torch

from ..npu import torch_npu_standin as standin
from . import aclgraph_support, npu_module, torchair_branches
from .npu_module import VirtualNpuMissing

NAME = "torch_npu"
VERSION = "2.13.0"
ORIGIN = "op_plugin virtual NPU (op_plugin/_simulator/device/torch_npu_facade.py)"
# Importers that keep seeing a host without torch_npu (their module names' first part).
_BLIND = ("op_plugin", "torchair", "op_plugin_virtual_npu_autoload")


def _missing(dotted: str, name: str) -> VirtualNpuMissing:
    return VirtualNpuMissing(f"{dotted}: the virtual NPU does not provide {name} (op_plugin's virtual NPU "
                             f"emulates part of torch_npu; docs/virtual-npu.md)")


class _Facade(types.ModuleType):
    """The module `torch_npu`: op lookups forward to `torch.ops.npu`, anything else unknown is refused."""

    def __getattr__(self, name: str):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        try:
            return getattr(torch.ops.npu, name)
        except (AttributeError, RuntimeError):
            from ..npu import ops as npu_ops  # here, not at import: the facade loads early, the op families late

            undefined = npu_ops.missing_wheel_message()  # torch_npu's ops are read from the unpacked wheel
            if undefined is not None:
                raise VirtualNpuMissing(f"torch_npu.{name}: {undefined}") from None
            raise _missing(f"torch_npu.{name}", name) from None

    def __dir__(self):
        return sorted(set(super().__dir__()) | {op for op in dir(torch.ops.npu) if not op.startswith("_")})


class _Submodule(types.ModuleType):
    def __getattr__(self, name: str):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        raise _missing(f"{self.__name__}.{name}", name)


def _submodule(name: str, **values) -> types.ModuleType:
    module = _Submodule(name)
    module.__dict__.update(values)
    module.__spec__ = importlib.machinery.ModuleSpec(name, None, origin=ORIGIN)
    return module


def _build(spec) -> types.ModuleType:
    facade = _Facade(NAME, "torch_npu on op_plugin's virtual NPU (docs/virtual-npu.md)")
    facade.__dict__.update({name: standin.TorchNpuDType(name, value)
                            for name, value in standin.TORCH_NPU_DTYPES.items()})
    facade.__version__ = VERSION
    facade.__file__ = None
    facade.npu = npu_module
    facade.get_npu_format = torchair_branches.get_npu_format
    facade.get_storage_size = torchair_branches.get_storage_size
    torchair_branches.define_npugraph_tensor_ops()  # torch_npu.save_npugraph_tensor & co., as torch_npu does
    # An hccl group's npu backend is a gloo ProcessGroupGloo here (hccl.py): torch_npu's ProcessGroupHCCL class is
    # that class, so `patch.object(ProcessGroupHCCL, "get_hccl_comm_name", ...)` reaches the hccl groups' backends.
    gloo = {"ProcessGroupHCCL": torch.distributed.ProcessGroupGloo} if torch.distributed.is_available() else {}
    c10d = sys.modules.setdefault("torch_npu._C._distributed_c10d", _submodule("torch_npu._C._distributed_c10d",
                                                                                **gloo))
    facade._C = sys.modules.setdefault("torch_npu._C", _submodule("torch_npu._C", _distributed_c10d=c10d,
                                                                  **aclgraph_support.C_CALLS))
    soc = npu_module.get_soc_version
    utils = _submodule("torch_npu.npu.utils", get_soc_version=soc, get_cann_version=standin.get_cann_version,
                       _is_gte_cann_version=standin.is_gte_cann_version,
                       is_bf16_supported=npu_module.is_bf16_supported)
    backends = _submodule("torch_npu.npu._backends", get_soc_version=soc)
    npu_module.utils, npu_module._backends = utils, backends
    from . import hccl, hccl_uneven

    facade.distributed = sys.modules.setdefault("torch_npu.distributed", _submodule(
        "torch_npu.distributed", is_hccl_available=hccl.is_hccl_available,
        all_gather_into_tensor_uneven=hccl_uneven.all_gather_into_tensor_uneven,
        reduce_scatter_tensor_uneven=hccl_uneven.reduce_scatter_tensor_uneven))
    sys.modules.setdefault("torch_npu.npu", npu_module)
    sys.modules.setdefault("torch_npu.npu.utils", utils)
    sys.modules.setdefault("torch_npu.npu._backends", backends)
    return facade


class _Loader(importlib.abc.Loader):
    def create_module(self, spec):
        return _build(spec)

    def exec_module(self, module):
        """Everything is set up in create_module."""


def importer_is_blind(blind: tuple[str, ...] = _BLIND) -> bool:
    """The import (or find_spec) a finder's find_spec is answering comes from a module whose top-level package is
    in `blind` (op_plugin, TorchAir): the first frame outside the import system. Also used by
    hosting/user_imports.py's finder."""
    frame = sys._getframe(2)
    while frame is not None:
        module = frame.f_globals.get("__name__") or ""
        if not module.startswith("importlib") and not frame.f_code.co_filename.startswith("<frozen importlib"):
            return module.split(".", 1)[0] in blind
        frame = frame.f_back
    return False


class _Finder(importlib.abc.MetaPathFinder):
    """Answers `torch_npu` while the virtual NPU is active, for importers outside op_plugin and TorchAir."""

    active = False

    def find_spec(self, fullname, path=None, target=None):
        if fullname != NAME or not self.active or importer_is_blind():
            return None
        return importlib.machinery.ModuleSpec(NAME, _Loader(), origin=ORIGIN, is_package=True)


FINDER = _Finder()


def install() -> None:
    """Make `import torch_npu` give the façade (idempotent); called by activation."""
    FINDER.active = True
    if FINDER not in sys.meta_path:
        sys.meta_path.append(FINDER)  # last: a real torch_npu on the path would be found first (never here)


def import_facade() -> types.ModuleType:
    """`import torch_npu` on behalf of user code (TorchAir's `__init__` imports it on an Ascend host, so a user's
    `import torchair` brings torch_npu in): the façade, put in `sys.modules` if it is not there yet."""
    if not FINDER.active:
        raise RuntimeError("torch_npu's façade exists only while the virtual NPU is active")
    module = sys.modules.get(NAME)
    if module is None:
        spec = importlib.machinery.ModuleSpec(NAME, _Loader(), origin=ORIGIN, is_package=True)
        module = importlib.util.module_from_spec(spec)
        sys.modules[NAME] = module
    return module


def is_facade(module) -> bool:
    """`module` (or a spec) is this façade, not a real torch_npu."""
    spec = module if isinstance(module, importlib.machinery.ModuleSpec) else getattr(module, "__spec__", None)
    return getattr(spec, "origin", None) == ORIGIN

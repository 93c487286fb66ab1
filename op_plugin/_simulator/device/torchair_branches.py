"""What TorchAir's NPU-device branches read from torch_npu, answered on the virtual NPU.

Once a user's program has imported `torch_npu` (the façade), TorchAir takes the branches it takes on an
Ascend host (`'torch_npu' in sys.modules` in `core/_backend.py`, `fx2ge_converter.py`, `npu_fx_compiler.py`):
GE runs with the NPU executor type, graph inputs that are npu tensors have their storage format read, the
session's options come from torch_npu's settings. Each name those branches read is answered here with the
value an Ascend host gives for a virtual NPU that keeps every tensor in its plain layout:

* `torch.npu._get_deterministic_level()` (torch_npu/npu/__init__.py): the level set with
  `torch.npu.set_deterministic_level` (0 at start), reconciled with `torch.use_deterministic_algorithms`
  as torch_npu's `_sync_deterministic_level` does (enabled with level 0 gives 1, disabled with a level gives 0);
* `torch.npu.matmul.allow_hf32` (False, torch_npu's default) and `torch.npu.conv.allow_hf32` (True, its
  default), settable: the simulator's kernels compute in float32 either way (hf32 is a cube-unit format);
* `torch_npu.get_npu_format(t)`: ACL_FORMAT_ND (2) for every tensor: the virtual NPU never stores a
  tensor in a private format (`npu_format_cast` to another format is refused by the op itself);
  `torch_npu.get_storage_size(t)`: the element count of the storage behind `t`;
* the native modules `torchair.core._npu_graph_executor` (`GetNpuStorageSizes`: the tensor's shape, its
  storage being plain) and `torchair.core._npu_utils` (nothing TorchAir's GE path calls; any name raises),
  installed as strict module objects by the simulator's TorchAir loader.

Any other name TorchAir reads raises the façade's `VirtualNpuMissing`, naming it.
"""
from __future__ import annotations

import types

import torch

ACL_FORMAT_ND = 2
_level = 0


def _get_deterministic_level() -> int:
    """torch_npu/npu/__init__.py `_get_deterministic_level`: the stored level, reconciled with torch's flag."""
    global _level
    enabled = torch.are_deterministic_algorithms_enabled()
    if _level == 0 and enabled:
        _level = 1
    elif _level >= 1 and not enabled:
        _level = 0
    return _level


def set_deterministic_level(level: int) -> None:
    """torch_npu's `set_deterministic_level`: 0 (off) or 1..2, turning torch's deterministic flag on or off."""
    global _level
    if not isinstance(level, int) or isinstance(level, bool) or level not in (0, 1, 2):
        raise ValueError(f"torch.npu.set_deterministic_level: level must be 0, 1 or 2, got {level!r}")
    _level = level
    torch.use_deterministic_algorithms(level >= 1)


class _Hf32Flag:
    """`torch.npu.matmul` / `torch.npu.conv`: the `allow_hf32` switch (hf32 is a cube-unit format; the
    simulator's kernels compute in float32 whatever it says)."""

    def __init__(self, name: str, default: bool):
        self._name = name
        self.allow_hf32 = default

    def __repr__(self) -> str:
        return f"torch.npu.{self._name}(allow_hf32={self.allow_hf32})"


matmul = _Hf32Flag("matmul", False)
conv = _Hf32Flag("conv", True)


def get_npu_format(tensor: torch.Tensor) -> int:
    """torch_npu.get_npu_format: every virtual-NPU tensor is stored in ACL_FORMAT_ND."""
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"torch_npu.get_npu_format: expected a tensor, got {type(tensor).__name__}")
    return ACL_FORMAT_ND


def get_storage_size(tensor: torch.Tensor) -> int:
    """torch_npu.get_storage_size: the number of elements the tensor's storage holds."""
    return tensor.untyped_storage().nbytes() // tensor.element_size()


class _StrictNative(types.ModuleType):
    def __getattr__(self, name: str):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        raise AttributeError(f"{self.__name__}.{name}: the virtual NPU does not provide this native TorchAir "
                             "call (docs/virtual-npu.md)")


def native_executor_modules() -> dict[str, types.ModuleType]:
    """TorchAir's two NPU-only native modules, by their names in sys.modules."""
    executor = _StrictNative("torchair.core._npu_graph_executor")
    executor.GetNpuStorageSizes = lambda tensor: list(tensor.shape)
    return {executor.__name__: executor, "torchair.core._npu_utils": _StrictNative("torchair.core._npu_utils")}

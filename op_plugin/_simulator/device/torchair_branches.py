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
* `torch.npu.memory_snapshot()`: the caching allocator's segments, read by the debug log of TorchAir's
  ACL-graph capture (`_acl_concrete_graph/utils.py` `debug_mem_state`, evaluated when TorchAir's logger is at
  DEBUG); the virtual NPU's allocator caches no segment (every block goes back to the host when freed,
  `torch.npu.empty_cache`), so the snapshot is empty;
* the native modules `torchair.core._npu_graph_executor` (`GetNpuStorageSizes`: the tensor's shape, its
  storage being plain) and `torchair.core._npu_utils` (nothing TorchAir's GE path calls; any name raises),
  installed as strict module objects by the simulator's TorchAir loader;
* torch_npu's two graph-debugging ops, `torch.ops.npu.save_npugraph_tensor` (TorchAir's ACL-graph data dump,
  `dump_config.enable_dump` in modes reduce-overhead / npugraph_ex, inserts one after each FX node) and
  `print_npugraph_tensor`, also `torch_npu.save_npugraph_tensor` / `print_npugraph_tensor`: defined when the
  façade is built (`define_npugraph_tensor_ops`), as torch_npu defines them at its import. On an NPU they copy
  the tensor to the host on a side stream and save (print) it in a host callback, once per call and, captured,
  once per replay; here kernels run synchronously, so the save (print) happens at the call, and a captured one
  at each replay (the virtual NPUGraph's capture computes nothing, as on an NPU). The file is torch_npu's:
  `save_path` (default `tensor_<time>.pt`, suffix `.pt` when it has none), `_device_<i>` after the stem for an
  npu tensor, then `_<n>`, n counting the saves to that name in this process (unless `overwrite=True`); it
  holds the tensor (the list of tensors) on the CPU.

Any other name TorchAir reads raises the façade's `VirtualNpuMissing`, naming it.
"""
from __future__ import annotations

import datetime
import os
import threading
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


def memory_snapshot() -> list[dict]:
    """torch.npu.memory_snapshot(): no segment, the virtual NPU's allocator caches none."""
    return []


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


_save_lock = threading.Lock()
_save_counts: dict[str, int] = {}


def npugraph_tensor_path(save_path, device_index: int | None, overwrite: bool) -> str:
    """Where `save_npugraph_tensor` writes: torch_npu's naming (the module docstring)."""
    call = "torch_npu.save_npugraph_tensor"
    if save_path is None:
        save_path = f"tensor_{datetime.datetime.now().strftime('%Y%m%d_%H%M%S_%f')}.pt"
    if not isinstance(save_path, str) or not isinstance(overwrite, bool):
        raise TypeError(f"{call}: save_path must be a str or None and overwrite a bool, got "
                        f"{type(save_path).__name__} and {type(overwrite).__name__}")
    folder, name = os.path.split(save_path)
    stem, suffix = os.path.splitext(name)
    if not stem:
        raise ValueError(f"{call}: save_path {save_path!r} names no file")
    if device_index is not None:
        stem = f"{stem}_device_{device_index}"
    if not overwrite:
        with _save_lock:
            count = _save_counts.get(os.path.join(folder, stem + (suffix or ".pt")), 0)
            _save_counts[os.path.join(folder, stem + (suffix or ".pt"))] = count + 1
        stem = f"{stem}_{count}"
    return os.path.join(folder, stem + (suffix or ".pt"))


def _host_copy(tensor: torch.Tensor) -> torch.Tensor:
    return tensor.detach().to("cpu", memory_format=torch.contiguous_format)


def _device_index(tensors: list[torch.Tensor]) -> int | None:
    devices = {t.device for t in tensors}
    if len(devices) > 1:
        raise ValueError(f"torch_npu.save_npugraph_tensor: the tensors are on {sorted(map(str, devices))}; a list "
                         "must be on one device")
    device = devices.pop()
    return (device.index or 0) if device.type == "npu" else None


def _save(input, save_path=None, overwrite=False) -> None:
    torch.save(_host_copy(input), npugraph_tensor_path(save_path, _device_index([input]), overwrite))


def _save_list(input, save_path=None, overwrite=False) -> None:
    if not input:
        raise ValueError("torch_npu.save_npugraph_tensor: the tensor list is empty")
    path = npugraph_tensor_path(save_path, _device_index(list(input)), overwrite)
    torch.save([_host_copy(t) for t in input], path)


def _print(input, tensor_name=None) -> None:
    text = str(_host_copy(input))
    text = text if tensor_name is None else f"{tensor_name}={text}"
    print(f"{text}, shape={tuple(input.shape)}, dtype={input.dtype}", flush=True)


_SCHEMAS = {
    "save_npugraph_tensor": ("(Tensor input, *, str? save_path=None, bool overwrite=False) -> ()", _save),
    "save_npugraph_tensor.tensor_list": ("(Tensor[] input, *, str? save_path=None, bool overwrite=False) -> ()",
                                         _save_list),
    "print_npugraph_tensor": ("(Tensor input, *, str? tensor_name=None) -> ()", _print),
}
_library: list = []


def define_npugraph_tensor_ops() -> None:
    """`torch.ops.npu.save_npugraph_tensor` (and its tensor_list overload) and `print_npugraph_tensor`, with CPU and
    npu kernels and a fake one (idempotent; an op already defined, by op_plugin or torch_npu, is left alone)."""
    if _library or hasattr(torch.ops.npu, "save_npugraph_tensor"):
        return
    from torch.fx.node import has_side_effect

    library = torch.library.Library("npu", "FRAGMENT")
    _library.append(library)  # the definitions live as long as the Library object
    for name, (schema, kernel) in _SCHEMAS.items():
        library.define(name + schema)
        library.impl(name, kernel, "CPU")
        library.impl(name, kernel, "PrivateUse1")
        torch.library.register_fake(f"npu::{name}", _no_effect, lib=library)
        base, _, overload = name.partition(".")
        has_side_effect(getattr(getattr(torch.ops.npu, base), overload or "default"))


def _no_effect(*args, **kwargs) -> None:
    """The fake kernel: the ops return nothing and, traced, do nothing."""

"""`torch.npu` on the virtual NPU: the device module registered with `torch._register_device_module`.

Emulated in this phase: `is_available()` (True while the virtual NPU is active), `device_count()`
(8 by default, `OP_PLUGIN_VIRTUAL_NPU_COUNT` sets it), `current_device()`, `set_device(i)`,
`device(i)` (a context manager), `synchronize()` (a no-op: the CPU runs every kernel synchronously,
so there is never outstanding work), the memory counters of the counting allocator
(`memory_allocated`, `max_memory_allocated`, `memory_reserved`, `max_memory_reserved`,
`reset_peak_memory_stats`, `reset_max_memory_allocated`, `empty_cache`: nothing is cached, so
reserved equals allocated and `empty_cache()` frees nothing), `get_device_name()` (the SoC's name, then
" (op_plugin virtual NPU)"), `get_device_properties(i)` (`SOCS`), `is_bf16_supported()` (True),
`get_soc_version()` (torch-npu 2.13.0's SoC query, `torch_npu.npu.utils.get_soc_version`: the SoC's enum
value; `DEFAULT_SOC`, `OP_PLUGIN_VIRTUAL_NPU_SOC` sets it),
`manual_seed`/`manual_seed_all`/`seed`/`initial_seed` (the CPU generator for now: npu kernels run
the CPU kernels, which draw from it); `Stream`, `Event`, `current_stream`, `default_stream`, `set_stream`,
`stream(s)` (`streams`: no concurrency, host timing) and `NPUGraph`, `graph`, `is_current_stream_capturing`
(`graphs`: capture records the aten ops, replay reruns them into the captured tensors), `make_graphed_callables`
(`graphed_callables`). Any other name raises `VirtualNpuMissing` (an
AttributeError, so `hasattr` stays False) naming it and saying the virtual NPU does not provide it.
"""
from __future__ import annotations

import contextlib
import os
from typing import NamedTuple

import torch

from . import amp as amp  # torch.npu.amp: autocast, GradScaler, custom_fwd, custom_bwd
from .amp import (get_amp_supported_dtype as get_amp_supported_dtype, get_autocast_dtype as get_autocast_dtype,
                  is_autocast_enabled as is_autocast_enabled, set_autocast_dtype as set_autocast_dtype,
                  set_autocast_enabled as set_autocast_enabled)
from .aclgraph_support import graph_pool_handle as graph_pool_handle
from .graphed_callables import make_graphed_callables as make_graphed_callables
from .graph_tasks import graph_task_group_begin as graph_task_group_begin
from .graph_tasks import graph_task_group_end as graph_task_group_end
from .graph_tasks import graph_task_update_begin as graph_task_update_begin
from .graph_tasks import graph_task_update_end as graph_task_update_end
from .graphs import NPUGraph as NPUGraph
from .graphs import graph as graph
from .graphs import is_current_stream_capturing as is_current_stream_capturing
from .streams import Event as Event
from .streams import ExternalEvent as ExternalEvent
from .streams import Stream as Stream
from .streams import current_stream as current_stream
from .streams import default_stream as default_stream
from .streams import set_stream as set_stream
from .streams import stream as stream
from .torchair_branches import _get_deterministic_level as _get_deterministic_level
from .torchair_branches import conv as conv
from .torchair_branches import matmul as matmul
from .torchair_branches import memory_snapshot as memory_snapshot
from .torchair_branches import set_deterministic_level as set_deterministic_level

SOC_VAR = "OP_PLUGIN_VIRTUAL_NPU_SOC"
DEFAULT_SOC = "Ascend910B3"
_NATIVE = None


class Soc(NamedTuple):
    """A SoC the virtual NPU can stand for: torch_npu's SocVersion value, its AI cube and vector core counts and
    its HBM size in bytes (docs/virtual-npu.md gives the sources)."""

    version: int
    cube_core_num: int
    vector_core_num: int
    total_memory: int


_GB = 1 << 30
SOCS = {
    "Ascend910B1": Soc(220, 24, 48, 64 * _GB),
    "Ascend910B2": Soc(221, 24, 48, 64 * _GB),
    "Ascend910B3": Soc(223, 20, 40, 64 * _GB),
    "Ascend910B4": Soc(224, 20, 40, 32 * _GB),
    "Ascend910_9391": Soc(250, 24, 48, 64 * _GB),
    "Ascend910_9392": Soc(253, 24, 48, 64 * _GB),
}


def soc_name() -> str:
    """The SoC the virtual NPU stands for: $OP_PLUGIN_VIRTUAL_NPU_SOC, else DEFAULT_SOC."""
    name = os.environ.get(SOC_VAR, "").strip() or DEFAULT_SOC
    if name not in SOCS:
        raise ValueError(f"{SOC_VAR}={name!r}: the virtual NPU stands for one of {sorted(SOCS)}")
    return name


class NPUDeviceProperties(NamedTuple):
    """What `torch.npu.get_device_properties(i)` gives (torch_npu's _NPUDeviceProperties fields the virtual NPU
    knows; multi_processor_count is the vector core count, as torch_npu's inductor device interface reads it)."""

    name: str
    total_memory: int
    cube_core_num: int
    vector_core_num: int
    multi_processor_count: int


class VirtualNpuMissing(AttributeError):
    """A `torch.npu` name the virtual NPU does not provide (yet)."""


def _bind(native) -> None:
    global _NATIVE
    _NATIVE = native


def is_available() -> bool:
    return _NATIVE is not None


def is_initialized() -> bool:
    return _NATIVE is not None


def init() -> None:
    """Nothing to initialise: the device is up once the module is registered."""


def device_count() -> int:
    return int(_NATIVE.device_count())


def current_device() -> int:
    return int(_NATIVE.current_device())


def _index(device, call: str) -> int:
    if device is None:
        return current_device()
    if isinstance(device, str):
        device = torch.device(device)
    if isinstance(device, torch.device):
        if device.type != "npu":
            raise ValueError(f"{call}: expected an npu device, got {device}")
        index = current_device() if device.index is None else device.index
    else:
        index = int(device)
    _NATIVE.check_index(index, call)
    return index


def set_device(device) -> None:
    _NATIVE.set_device(_index(device, f"torch.npu.set_device({device!r})"), f"torch.npu.set_device({device!r})")


@contextlib.contextmanager
def device(device):
    """`with torch.npu.device(i):` makes npu:i current inside the block."""
    previous = current_device()
    if device is not None and not (isinstance(device, int) and device < 0):
        set_device(device)
    try:
        yield
    finally:
        _NATIVE.set_device(previous, "torch.npu.device")


def synchronize(device=None) -> None:
    """A no-op: the virtual NPU runs every kernel synchronously on the CPU, so nothing is pending."""
    if device is not None:
        _index(device, f"torch.npu.synchronize({device!r})")


def memory_allocated(device=None) -> int:
    return int(_NATIVE.memory_allocated(_index(device, "torch.npu.memory_allocated")))


def max_memory_allocated(device=None) -> int:
    return int(_NATIVE.max_memory_allocated(_index(device, "torch.npu.max_memory_allocated")))


def memory_reserved(device=None) -> int:
    """Equals `memory_allocated`: the virtual NPU's allocator caches nothing."""
    return int(_NATIVE.memory_allocated(_index(device, "torch.npu.memory_reserved")))


def max_memory_reserved(device=None) -> int:
    return int(_NATIVE.max_memory_allocated(_index(device, "torch.npu.max_memory_reserved")))


def reset_peak_memory_stats(device=None) -> None:
    _NATIVE.reset_peak_memory_stats(_index(device, "torch.npu.reset_peak_memory_stats"))


def reset_max_memory_allocated(device=None) -> None:
    reset_peak_memory_stats(device)


def empty_cache() -> None:
    """Frees nothing: the allocator caches no blocks (freed memory goes back to the host at once)."""


def get_device_name(device=None) -> str:
    """The SoC's name first (code compares it: "Ascend910B1" <= name <= "Ascend910B4_1"), then who emulates it."""
    _index(device, "torch.npu.get_device_name")
    return f"{soc_name()} (op_plugin virtual NPU)"


def get_device_properties(device=None) -> NPUDeviceProperties:
    _index(device, f"torch.npu.get_device_properties({device!r})")
    name = soc_name()
    soc = SOCS[name]
    return NPUDeviceProperties(name, soc.total_memory, soc.cube_core_num, soc.vector_core_num, soc.vector_core_num)


def get_soc_version() -> int:
    """torch-npu 2.13.0's `torch_npu.npu.utils.get_soc_version()` (`npu/_backends.py`): the SoC's SocVersion value
    (Ascend910B1 220, Ascend910_9391 250, ...)."""
    return SOCS[soc_name()].version


def is_bf16_supported(including_emulation: bool = False) -> bool:
    """True: the Ascend 910B/910_93 SoCs the virtual NPU stands for compute bfloat16."""
    del including_emulation
    return True


_STREAM_LIMITS: dict = {}  # stream -> (cube cores, vector cores) set_stream_limit gave it


def get_stream_limit(stream) -> dict:
    """torch_npu's get_stream_limit(stream): the cores a stream may use, the SoC's unless set_stream_limit set
    others (TorchAir's aclgraph capture reads it)."""
    soc = SOCS[soc_name()]
    cube, vector = _STREAM_LIMITS.get(stream, (soc.cube_core_num, soc.vector_core_num))
    return {"cube_core_num": cube, "vector_core_num": vector}


def set_stream_limit(stream, cube_num: int = -1, vector_num: int = -1) -> None:
    """torch_npu's set_stream_limit: the cores kernels on `stream` may use (TorchAir's update stream sets the
    captured ones'). Kept for get_stream_limit; the virtual NPU runs every kernel on the host either way.
    Refused, as on an NPU: more cores than the SoC has."""
    if stream is None:
        raise ValueError("torch.npu.set_stream_limit: stream cannot be None")
    soc = SOCS[soc_name()]
    current = _STREAM_LIMITS.get(stream, (soc.cube_core_num, soc.vector_core_num))
    cube = current[0] if cube_num == -1 else int(cube_num)  # -1 leaves a limit as it is, as torch_npu's
    vector = current[1] if vector_num == -1 else int(vector_num)
    if not (0 < cube <= soc.cube_core_num and 0 < vector <= soc.vector_core_num):
        raise ValueError(f"torch.npu.set_stream_limit: {cube} cube and {vector} vector cores; {soc_name()} has "
                         f"{soc.cube_core_num} and {soc.vector_core_num}")
    _STREAM_LIMITS[stream] = (cube, vector)


def manual_seed(seed: int) -> None:
    """Seeds the CPU generator, which the CPU kernels behind npu tensors draw from (this phase)."""
    torch.default_generator.manual_seed(int(seed))


def manual_seed_all(seed: int) -> None:
    manual_seed(seed)


def seed() -> None:
    torch.default_generator.seed()


def seed_all() -> None:
    seed()


def initial_seed() -> int:
    return torch.default_generator.initial_seed()


def get_rng_state(device=None) -> torch.Tensor:
    return torch.default_generator.get_state()


def set_rng_state(new_state: torch.Tensor, device=None) -> None:
    torch.default_generator.set_state(new_state)


def _is_in_bad_fork() -> bool:
    return False


def __getattr__(name: str):
    if name.startswith("__") and name.endswith("__"):
        raise AttributeError(name)
    raise VirtualNpuMissing(f"torch.npu.{name} (torch_npu.npu.{name}): the virtual NPU does not provide {name} "
                            f"(op_plugin's virtual NPU emulates part of torch.npu; docs/virtual-npu.md)")

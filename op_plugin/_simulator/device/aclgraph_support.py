"""What TorchAir's ACL-graph capture (modes `reduce-overhead` / `npugraph_ex`) reads from torch_npu, on the
virtual NPU.

On an NPU, TorchAir's `AclConcreteGraph` (`torchair/_acl_concrete_graph/acl_graph.py`) captures the AOT graph's
eager kernels into `torch.npu.NPUGraph`s that share one memory pool, and replays them. Around the capture it uses
a few torch_npu internals, answered here for the virtual NPUGraph (`graphs.py`), which records aten ops and
replays them into the captured tensors:

* `torch.npu.graph_pool_handle()`: an opaque pool id, as torch_npu's `(0, n)`; the virtual NPU pools no memory
  (each graph keeps its own tensors alive), so the id only tells pools apart;
* `torch_npu._C._npu_getCheckpointState(device, pool)` / `_npu_setCheckpointPoolState(device, state, stale,
  ...)`: the caching allocator's pool state, checkpointed after a capture and restored before the next one so
  graphs sharing a pool reuse its blocks. Without a pool there is nothing to save or restore: the state is a
  token naming the device and pool, and restoring it changes nothing;
* `torch_npu._C._construct_storage_from_data_pointer(ptr, device, nbytes)` and
  `_construct_NPU_Tensor_From_Storage_And_Metadata(metadata, storage)`: an npu tensor over memory TorchAir keeps
  alive (its retained inputs and outputs), built by the C++ part without owning or counting it;
* `torch.npu.get_stream_limit(stream)` (in `npu_module`, beside the SoC's core counts).

`torch_npu_facade` puts the `_C` calls in the façade's `torch_npu._C`.

The rest of TorchAir's capture (its FX passes, the capture itself, the replay, the static-input copies) runs as
on an NPU.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass

import torch

_POOL_IDS = itertools.count(1)


def graph_pool_handle() -> tuple[int, int]:
    """torch.npu.graph_pool_handle(): a new pool id."""
    return (0, next(_POOL_IDS))


@dataclass(frozen=True)
class CheckpointState:
    """The state `_npu_getCheckpointState` returns: the virtual NPU pools nothing, so it only names its pool."""

    device: int
    pool: object


def get_checkpoint_state(device, pool) -> CheckpointState:
    return CheckpointState(int(device), pool)


def set_checkpoint_pool_state(device, state, stale_storages=(), storages_to_add_deleters_to=()) -> None:
    if not isinstance(state, CheckpointState):
        raise TypeError(f"torch_npu._C._npu_setCheckpointPoolState: expected the state _npu_getCheckpointState "
                        f"returned, got {type(state).__name__}")


@dataclass(frozen=True)
class _Memory:
    """What `_construct_storage_from_data_pointer` returns: memory kept alive by its owner (TorchAir)."""

    address: int
    device: torch.device
    nbytes: int


def construct_storage_from_data_pointer(address: int, device, nbytes: int) -> _Memory:
    return _Memory(int(address), torch.device(device), int(nbytes))


def construct_tensor(metadata: dict, memory: _Memory) -> torch.Tensor:
    """An npu tensor with `metadata`'s size, stride, offset and dtype over `memory` (not owned)."""
    from . import fallback

    if memory.device.type != "npu":
        raise RuntimeError(f"torch_npu._C._construct_NPU_Tensor_From_Storage_And_Metadata: {memory.device} memory; "
                           "the virtual NPU builds npu tensors only")
    tensor = fallback._NATIVE.tensor_at(memory.address, memory.nbytes, memory.device.index or 0,
                                        list(metadata["size"]), list(metadata["stride"]),
                                        int(metadata["storage_offset"]), metadata["dtype"])
    if metadata.get("requires_grad"):
        tensor.requires_grad_(True)
    return tensor


C_CALLS = {"_npu_getCheckpointState": get_checkpoint_state, "_npu_setCheckpointPoolState": set_checkpoint_pool_state,
           "_construct_storage_from_data_pointer": construct_storage_from_data_pointer,
           "_construct_NPU_Tensor_From_Storage_And_Metadata": construct_tensor}

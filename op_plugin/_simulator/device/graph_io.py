"""GE graphs on npu tensors: what the simulator's graph runner gives the executor, and what it hands back.

On an NPU, TorchAir passes a graph's npu input tensors to GE, whose kernels read and write device memory, and
GE's outputs are npu tensors. The executor's kernels are CPU kernels and the virtual NPU's storage is host
memory, so `host_inputs` gives the executor CPU views over the npu tensors' own memory (no copy; CPU inputs,
such as the offset list TorchAir places on the host, pass unchanged) and `device_outputs` hands the results
back as npu tensors of the inputs' device: a view of an input's storage when a result aliases one, else the
CPU result's memory borrowed without a copy and counted by the allocator (`torch.npu.memory_allocated`).

With the virtual NPU inactive, or a graph without npu inputs, both return what they were given: the CPU-tensor
path is unchanged. A graph whose inputs sit on two npu devices is refused naming the graph, as GE refuses
inputs of another device than its session's.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Placement:
    """Where a graph's npu inputs live: their device index and the tensors (results aliasing them become
    views of their storage)."""

    device: int
    npu_inputs: tuple[torch.Tensor, ...]


def _native():
    from . import fallback

    return fallback._NATIVE


def host_inputs(inputs, graph_name: str) -> tuple[list, Placement | None]:
    """The graph's inputs as the executor takes them (CPU views of npu tensors) and their placement (None when
    no input is an npu tensor)."""
    native = _native()
    if native is None:
        return list(inputs), None
    npu = tuple(t for t in inputs if isinstance(t, torch.Tensor) and t.device.type == "npu")
    if not npu:
        return list(inputs), None
    devices = sorted({t.device.index for t in npu})
    if len(devices) > 1:
        raise RuntimeError(f"GE graph {graph_name!r}: its inputs are on npu:{devices[0]} and npu:{devices[1]}; a "
                           "graph runs on one device (move the inputs to one npu device before the call)")
    host = [native.cpu_alias(t) if isinstance(t, torch.Tensor) and t.device.type == "npu" else t for t in inputs]
    return host, Placement(devices[0], npu)


def device_outputs(outputs: list, placement: Placement | None) -> list:
    """The executor's CPU results as npu tensors on `placement`'s device (unchanged without a placement)."""
    if placement is None:
        return outputs
    native = _native()
    bases = list(placement.npu_inputs)
    return [native.to_npu(t, bases, placement.device) if isinstance(t, torch.Tensor) and t.device.type == "cpu"
            else t for t in outputs]

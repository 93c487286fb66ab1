"""Distributed code traced on a CPU host as on an Ascend host.

TorchAir, when imported, adds traceable-collective remaps to torch
(`torchair/_utils/adjust_traceable_collective_remaps.py`): `dist.broadcast`, `dist.all_to_all`,
`dist.send` and `dist.recv` in compiled code become its `npu_define` ops, which it lowers to
HcomBroadcast, HcomAllToAllV, HcomSend and HcomReceive. On an Ascend host `import op_plugin` imports
TorchAir, so the remaps are in place before dynamo traces anything. The simulator imports TorchAir
only at the first npugraph compile, after dynamo has traced that frame: there dynamo graph-breaks on
those calls (with fullgraph=True it fails: "Attempted to call function marked as skipped").

The gap before TorchAir is loaded is closed by `collectives_trace`.

`install(torchair)` (called by the loader) does two things once TorchAir is imported:

* TorchAir's `npu_define` collective ops get the CPU kernels of their NPU ones: TorchAir registers
  them for PrivateUse1 only, as plain torch.distributed calls, so once its remaps are in place on a
  CPU host, `aot_eager` (and npugraph's mode 'aclgraph', which runs it on a CPU host) would
  otherwise fail on `dist.broadcast` with "Could not run 'npu_define::broadcast' with arguments
  from the 'CPU' backend". Where TorchAir's kernel returns its input (broadcast, recv), the CPU
  kernel returns a copy: a functional custom op may not alias its inputs, and AOT autograd raises on
  it where `error_on_custom_op_aliasing` is on (torch's default when the CI variable is set);
* its backend's send/recv pass (`npu_fx_compiler._process_send_recv`) reads the CANN version from
  `torch_npu.npu.utils` unguarded, which fails on a CPU host with "No module named 'torch_npu'"; the
  simulator's copy of the pass answers that version "supported" (the simulator runs HcomSend and
  HcomReceive) and keeps what the pass does to the compile: two or more send/recv in a graph compiled
  in max-autotune mode set the topology sorting strategy to StableRDFS.
"""
from __future__ import annotations

import functools

import torch

# TorchAir module -> (npu_define op, its Python kernel for PrivateUse1): the ops its remaps emit.
_NPU_DEFINE_KERNELS = {
    "torchair._ge_concrete_graph.ge_converter.experimental.hcom_broadcast": (("broadcast", "broadcast_npu"),),
    "torchair._ge_concrete_graph.ge_converter.experimental.hcom_alltoall": (
        ("all_to_all_single_npu", "npu_all_to_all_single_npu"),),
    "torchair._ge_concrete_graph.ge_converter.experimental.hcom_send_recv": (("_send", "send_npu"),
                                                                             ("_recv", "recv_npu")),
}


def install(torchair) -> None:
    """CPU kernels for TorchAir's collective `npu_define` ops, and its send/recv pass without torch_npu
    (idempotent; see the module doc)."""
    _install_cpu_kernels()
    _install_send_recv_pass(torchair)


def _install_send_recv_pass(torchair) -> None:
    del torchair
    from torchair import npu_fx_compiler

    if getattr(npu_fx_compiler._process_send_recv, "_op_plugin_simulator", False):
        return

    def process_send_recv(gm, compiler_config):
        """TorchAir's `_process_send_recv` with the CANN version answered: supported."""
        ops = [getattr(torch.ops.npu_define, name, None) for name in ("_send", "_recv")]
        if None in ops:
            return
        targets = set(ops) | {op.default for op in ops}
        count = sum(1 for node in gm.graph.nodes if node.target in targets)
        if count > 1 and compiler_config.mode.value == "max-autotune":
            strategy = compiler_config.experimental_config.topology_sorting_strategy
            if strategy.value != "StableRDFS":
                compiler_config.experimental_config.topology_sorting_strategy = "StableRDFS"

    process_send_recv._op_plugin_simulator = True
    process_send_recv._op_plugin_original = npu_fx_compiler._process_send_recv
    npu_fx_compiler._process_send_recv = process_send_recv


def _install_cpu_kernels() -> None:
    import importlib
    import sys

    for module_name, ops in _NPU_DEFINE_KERNELS.items():
        module = sys.modules.get(module_name) or importlib.import_module(module_name)
        library = getattr(module, "npu_define_lib", None)
        for op_name, kernel_name in ops:
            kernel = getattr(module, kernel_name, None)
            op = getattr(torch.ops.npu_define, op_name, None)
            if library is None or kernel is None or op is None:
                continue  # defined by someone else first (TorchAir then skips its own definition)
            if torch._C._dispatch_has_kernel_for_dispatch_key(op.default.name(), "CPU"):
                continue
            library.impl(op_name, _without_input_aliases(kernel), "CPU")


def _without_input_aliases(kernel):
    """`kernel` with an output that shares storage with a tensor argument returned as a copy."""
    @functools.wraps(kernel)
    def run(*args, **kwargs):
        result = kernel(*args, **kwargs)
        if not isinstance(result, torch.Tensor):
            return result
        storages = {a.untyped_storage().data_ptr() for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor)}
        return result.clone() if result.untyped_storage().data_ptr() in storages else result

    return run

"""TorchAir's ACL-graph modes (`CompilerConfig.mode = "reduce-overhead"` or `"npugraph_ex"`) through
`torchair.get_npu_backend` on a CPU host.

On an NPU those modes capture the eager NPU kernels of the AOT graph into an ACL graph
(`AclConcreteGraph`, which needs torch_npu's `NPUGraph`); no GE converter is involved. A CPU host
has no graph capture, so TorchAir's compiler here hands back the AOT graph it was given, which runs
the ops' eager (reference) kernels: the numbers of a captured ACL graph, minus the capture. Said
with a warning, as npugraph's mode "aclgraph" says it; everything TorchAir does before the capture
(AOT tracing, its FX passes, stream and event replacement) runs as on an NPU.

On the virtual NPU (docs/virtual-npu.md) TorchAir's own capture runs instead: its `AclConcreteGraph` captures
the AOT graph into the virtual `torch.npu.NPUGraph` and replays it (device/aclgraph_support.py answers the
torch_npu internals it uses), as on an NPU.
"""
from __future__ import annotations

import functools
import types
import warnings

from ..device.activation import is_active
from ..device.torch_npu_facade import import_facade

ACL_MODES = ("reduce-overhead", "npugraph_ex")
WARNING = ("TorchAir mode '{mode}' on a CPU host: the AOT graph runs with the eager (reference) kernels; "
           "ACL graph capture needs an NPU")


NOT_DUMPED = ("TorchAir's data dump (dump_config) in mode '{mode}' on a CPU host writes nothing: it saves the "
              "tensors of a captured ACL graph, and here the AOT graph runs eagerly (no capture). Use the virtual NPU "
              "(OP_PLUGIN_VIRTUAL_NPU=1, npu tensors) or mode 'max-autotune' for a data dump")
NOT_CACHED = ("torchair.inference.cache_compile in an ACL-graph mode on a CPU host stores nothing: there is no ACL "
              "graph to store, the AOT graph runs eagerly; each process compiles again. Use the virtual NPU "
              "(OP_PLUGIN_VIRTUAL_NPU=1, npu tensors) or mode 'max-autotune'")


class _EagerAotGraph:
    """What `_CompiledFxGraph` runs: its `codegen` hands back the AOT graph as the kernel."""

    def __init__(self, gm):
        self.gm = gm
        self.graph = types.SimpleNamespace(name="the AOT graph, eager kernels (CPU host)")  # TorchAir logs its name

    def codegen(self, extend_config=None, enable_cache=False):
        del enable_cache
        if extend_config is not None:  # torchair.inference.cache_compile asks for the code to store
            warnings.warn(NOT_CACHED, UserWarning, stacklevel=3)
        return self.gm

    def __call__(self, *args, **kwargs):
        return self.gm(*args, **kwargs)


def install(torchair) -> None:
    """Route the ACL-graph modes of the simulator's TorchAir to the AOT graph (idempotent)."""
    del torchair
    from torchair import npu_fx_compiler

    compiler = npu_fx_compiler._NpuFxCompiler
    original = compiler._gen_compiled_gm
    if getattr(original, "_op_plugin_acl_modes", False):
        return

    @functools.wraps(original)
    def gen_compiled_gm(self, gm, example_inputs, observer):
        mode = self.config.mode.value
        if mode not in ACL_MODES:
            return original(self, gm, example_inputs, observer)
        if is_active() and any(getattr(t, "device", None) is not None and t.device.type == "npu"
                               for t in example_inputs):  # the virtual NPU: TorchAir's capture, into its NPUGraph
            import_facade()  # its capture imports torch_npu, loaded on an NPU host by `import torch` itself
            return original(self, gm, example_inputs, observer)
        warnings.warn(WARNING.format(mode=mode), UserWarning, stacklevel=2)
        if self.config.dump_config.enable_dump.value == "1":
            warnings.warn(NOT_DUMPED.format(mode=mode), UserWarning, stacklevel=2)
        return _EagerAotGraph(gm)

    gen_compiled_gm._op_plugin_acl_modes = True
    compiler._gen_compiled_gm = gen_compiled_gm

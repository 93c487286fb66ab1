"""`op_plugin.inspect`: what graph mode makes of a model, FX graph and GE graph side by side.

The GE graphs come from TorchAir's own lowering run through the simulator's native boundary,
where they are captured; so inspect() always lowers through the simulator and runs the model once
on the CPU to trigger the lowering. It needs a process that has not imported torch_npu (the
simulator's TorchAir cannot live beside the real one): on an Ascend host run it in a separate
process, after `python -m op_plugin._simulator.hosting.install` once; otherwise the simulator's loader
refuses with that reason.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

from ... import _simulator
from ..._backend import NpuGraphConfig, compile_graph
from ..._ge.graph import op_types
from .graph_text import ge_graph_text


@dataclass
class InspectReport:
    fx_graphs: list = field(default_factory=list)   # torch.fx.GraphModule per compiled graph (dynamo)
    ge_graphs: list = field(default_factory=list)   # GE GraphDef protobuf messages, one per compiled graph
    outputs: object = None                          # what the compiled model returned

    @property
    def fx_graph(self) -> torch.fx.GraphModule:
        return self.fx_graphs[0]

    @property
    def ge_op_types(self) -> list[str]:
        """Op types of the first GE graph in topological order."""
        return op_types(self.ge_graphs[0])

    def ge_text(self, index: int = 0) -> str:
        return ge_graph_text(self.ge_graphs[index])


def inspect(model, *example_inputs, dynamic: bool = False, **backend_options) -> InspectReport:
    """Compile `model` with the npugraph backend (on the simulator; `backend_options` are the
    backend's, NpuGraphConfig's fields, e.g. mode="ge"), run it once on `example_inputs`, and report
    the FX graph(s) and GE graph(s) it produced."""
    report = InspectReport()
    # Lowered here, never taken from the compile cache: the tool reads what the lowering builds.
    config = NpuGraphConfig.from_options({**backend_options, "compile_cache": False})

    def recording_backend(gm, inputs):
        report.fx_graphs.append(gm)
        return compile_graph(gm, inputs, config, force_simulator=True)

    compiled = torch.compile(model, backend=recording_backend, dynamic=dynamic)
    with _simulator.capture_graphs() as captured, torch.no_grad():
        report.outputs = compiled(*example_inputs)
    report.ge_graphs.extend(captured)
    return report

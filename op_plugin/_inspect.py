"""`op_plugin.inspect`: what graph mode makes of a model, FX graph and GE graph side by side.

The GE graphs come from TorchAir's own lowering run through the simulator's native boundary,
where they are captured; so inspect() always lowers through the simulator (also on an Ascend
host, where it needs `python -m op_plugin._simulator.install` once) and runs the model once on
the CPU to trigger the lowering.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

from ._backend import NpuGraphConfig


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
        return ge_op_types(self.ge_graphs[0])

    def ge_text(self, index: int = 0) -> str:
        return ge_graph_text(self.ge_graphs[index])


def ge_op_types(graph_def) -> list[str]:
    from ._simulator._ge_executor import topological_order

    return [op.type for op in topological_order(list(graph_def.op))]


def ge_graph_text(graph_def) -> str:
    """One line per GE node: name, type, inputs, attrs and output shapes/dtypes."""
    from ._simulator._ge_executor import topological_order

    lines = [f"graph {graph_def.name}"]
    for op in topological_order(list(graph_def.op)):
        inputs = ", ".join(i for i in op.input if i and not i.endswith(":-1"))
        attrs = ", ".join(f"{k}={describe_attr(v)}" for k, v in sorted(op.attr.items()) if not k.startswith("_"))
        outs = ", ".join(describe_desc(d) for d in op.output_desc)
        lines.append(f"  {op.name}: {op.type}({inputs})" + (f" {{{attrs}}}" if attrs else "") + (f" -> {outs}" if outs else ""))
    return "\n".join(lines)


def describe_attr(attr_def) -> str:
    from ._simulator._ge_types import decode_attr

    value = decode_attr(attr_def)
    if isinstance(value, torch.Tensor):
        return f"tensor{list(value.shape)}" if value.numel() > 8 else str(value.tolist())
    return repr(value)


def describe_desc(desc) -> str:
    from ._simulator._ge_types import proto_dtype_name

    dims = list(desc.shape.dim) if desc.HasField("shape") else "?"
    return f"{proto_dtype_name(desc.dtype)}{dims}"


def inspect(model, *example_inputs, dynamic: bool = False, mode: str = "ge") -> InspectReport:
    """Compile `model` with the npugraph backend, run it once on `example_inputs`, and report the
    FX graph(s) and GE graph(s) it produced."""
    from . import _simulator
    from ._backend import compile_graph

    report = InspectReport()
    config = NpuGraphConfig(mode=mode)

    def recording_backend(gm, inputs):
        report.fx_graphs.append(gm)
        return compile_graph(gm, inputs, config, force_simulator=True)

    compiled = torch.compile(model, backend=recording_backend, dynamic=dynamic)
    with _simulator.capture_graphs() as captured, torch.no_grad():
        report.outputs = compiled(*example_inputs)
    report.ge_graphs.extend(captured)
    return report

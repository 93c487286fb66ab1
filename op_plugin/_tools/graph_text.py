"""A GE GraphDef as text: one line per node with its inputs, attrs and output descs."""
from __future__ import annotations

import torch

from .._ge.graph import topological_order
from .._ge.values import decode_attr, proto_dtype_name


def ge_graph_text(graph_def) -> str:
    """One line per GE node: name, type, inputs, attrs and output shapes/dtypes."""
    lines = [f"graph {graph_def.name}"]
    for op in topological_order(list(graph_def.op)):
        inputs = ", ".join(i for i in op.input if i and not i.endswith(":-1"))
        attrs = ", ".join(f"{k}={describe_attr(v)}" for k, v in sorted(op.attr.items()) if not k.startswith("_"))
        outs = ", ".join(describe_desc(d) for d in op.output_desc)
        lines.append(f"  {op.name}: {op.type}({inputs})" + (f" {{{attrs}}}" if attrs else "")
                     + (f" -> {outs}" if outs else ""))
    return "\n".join(lines)


def describe_attr(attr_def) -> str:
    value = decode_attr(attr_def)
    if isinstance(value, torch.Tensor):
        return f"tensor{list(value.shape)}" if value.numel() > 8 else str(value.tolist())
    return repr(value)


def describe_desc(desc) -> str:
    dims = list(desc.shape.dim) if desc.HasField("shape") else "?"
    return f"{proto_dtype_name(desc.dtype)}{dims}"

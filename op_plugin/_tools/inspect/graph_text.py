"""A GE GraphDef as text: one line per node with its inputs, attrs and output descs."""
from __future__ import annotations

import torch

from ..._ge.graph import topological_order
from ..._ge.values import GE_TO_TORCH, PROTO_DT_FLOAT, decode_attr, fx_tensor_meta, proto_dtype_name


def ge_graph_text(graph_def) -> str:
    """One line per GE node: name, type, inputs, attrs and output shapes/dtypes."""
    lines = [f"graph {graph_def.name}"]
    for op in topological_order(list(graph_def.op)):
        inputs = ", ".join(i for i in op.input if i and not i.endswith(":-1"))
        attrs = ", ".join(f"{k}={describe_attr(v)}" for k, v in sorted(op.attr.items()) if not k.startswith("_"))
        outs = ", ".join(describe_desc(d, op) for d in op.output_desc)
        lines.append(f"  {op.name}: {op.type}({inputs})" + (f" {{{attrs}}}" if attrs else "")
                     + (f" -> {outs}" if outs else ""))
    return "\n".join(lines)


def describe_attr(attr_def) -> str:
    value = decode_attr(attr_def)
    if isinstance(value, torch.Tensor):
        return f"tensor{list(value.shape)}" if value.numel() > 8 else str(value.tolist())
    return repr(value)


def describe_desc(desc, op=None) -> str:
    """`float32[s0, 16]` from the FX meta TorchAir records, else from the desc; `?` is unrecorded."""
    meta = fx_tensor_meta(desc)
    if meta is not None:
        return f"{meta.dtype}[{', '.join(meta.dims)}]"
    if not desc.HasField("shape") and desc.dtype == PROTO_DT_FLOAT:
        # TorchAir gives an output it knows nothing about a DT_FLOAT desc without a shape, which
        # labelled Shape's int64 sizes float32: the node's dtype attr (Shape's dtype, Cast's
        # dst_type; GE's enum) says it, else the dtype is unknown
        for name in ("dtype", "dst_type"):
            if op is not None and name in op.attr and op.attr[name].WhichOneof("value") in ("i", "dt"):
                number = op.attr[name].i if op.attr[name].WhichOneof("value") == "i" else op.attr[name].dt
                if number in GE_TO_TORCH:
                    return f"{str(GE_TO_TORCH[number]).replace('torch.', '')}[?]"
        return "?[?]"
    dims = list(desc.shape.dim) if desc.HasField("shape") else "[?]"
    return f"{proto_dtype_name(desc.dtype)}{dims}"

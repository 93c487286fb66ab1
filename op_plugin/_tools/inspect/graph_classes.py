"""What each node of a GE graph is, for pictures: graph I/O, Const, custom GE op, built-in op
lowered from a YAML op (with that op's name), plain built-in op, or shape arithmetic."""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..._ge.graph import DataRef, parse_input, topological_order
from ..._registry.op_state import loaded
from ..._simulator.hosting.builtin_types import builtin_ge_types

_DATA_TYPES = {"Data", "RefData"}
_CONST_TYPES = {"Const", "Constant"}
_SHAPE_SOURCE_TYPES = {"Shape", "ShapeN", "Size", "Rank"}
_FX_NAME = re.compile(r"^[^-]*-(.*)\.OUTPUT\.\d+$")


@dataclass
class NodeInfo:
    op: object                   # the OpDef
    kind: str                    # data | output | const | custom | yaml | builtin | shape
    origin: str | None = None    # "ns.op_name" of the op_plugin op that produced this node
    folded: list = field(default_factory=list)   # (input name, text) of folded Const inputs


def yaml_ops() -> dict[str, str | None]:
    """Loaded op_plugin ops as `ns.name` -> their GE type (None without a `ge:` mapping)."""
    return {f"{st.spec.namespace}.{st.spec.name}": (st.spec.ge.type if st.spec.ge else None)
            for st in loaded() if st.spec is not None}


def classify(graph_def, builtin_types: set[str] | None = None,
             ops: dict[str, str | None] | None = None) -> dict[str, NodeInfo]:
    """Every node of the graph with its kind and, for op_plugin ops, its origin."""
    builtin_types = builtin_ge_types() if builtin_types is None else builtin_types
    ops = yaml_ops() if ops is None else ops
    custom_origin = {ge_type: name for name, ge_type in ops.items() if ge_type}
    nodes = {op.name: NodeInfo(op, "builtin") for op in graph_def.op}
    for info in nodes.values():
        op = info.op
        if op.type in _DATA_TYPES:
            info.kind = "data"
        elif op.type == "NetOutput":
            info.kind = "output"
        elif op.type in _CONST_TYPES:
            info.kind = "const"
        else:
            info.origin = _fx_origin(op, ops)
            if op.type not in builtin_types:
                info.kind = "custom"
                info.origin = info.origin or custom_origin.get(op.type)
            elif info.origin:
                info.kind = "yaml"
    _mark_shape_nodes(nodes)
    _spread_converter_origin(nodes)
    return nodes


def _fx_origin(op, ops: dict[str, str | None]) -> str | None:
    """The op_plugin op whose FX node this GE node carries (TorchAir's `_fx_tensor_name`)."""
    for desc in op.output_desc:
        if "_fx_tensor_name" not in desc.attr:
            continue
        match = _FX_NAME.match(desc.attr["_fx_tensor_name"].s.decode("utf-8", "replace"))
        if not match:
            continue
        target = match.group(1)  # e.g. npu.npu_custom_linear.default
        for name in ops:
            if target == name or target.startswith(name + "."):
                return name
    return None


def meta_text(desc) -> str | None:
    return desc.attr["_meta"].s.decode("utf-8", "replace") if "_meta" in desc.attr else None


def data_inputs(op):
    """(position, producer name, output index) of the node's data inputs; control edges skipped."""
    for position, text in enumerate(op.input):
        ref = parse_input(text)
        if isinstance(ref, DataRef):
            yield position, ref.node, ref.index


def _mark_shape_nodes(nodes: dict[str, NodeInfo]) -> None:
    """Size plumbing: Shape-like ops, SymInt/list-valued nodes, and nodes fed only by those."""
    for op in topological_order([info.op for info in nodes.values()]):
        info = nodes[op.name]
        if info.kind != "builtin":
            continue
        metas = [meta_text(d) for d in op.output_desc]
        if any(m and m.startswith("Tensor(") for m in metas):
            continue
        producers = [nodes[name] for _, name, _ in data_inputs(op) if name in nodes]
        if (op.type in _SHAPE_SOURCE_TYPES
                or any(m and m.startswith("<class") for m in metas)
                or (producers and all(p.kind in ("shape", "const") for p in producers))):
            info.kind = "shape"


def _spread_converter_origin(nodes: dict[str, NodeInfo]) -> None:
    """A converter builds several GE nodes but TorchAir names only the last one after the FX
    node: give its origin to producers that carry no FX meta and feed only that op's nodes."""
    consumers: dict[str, set[str]] = {name: set() for name in nodes}
    for info in nodes.values():
        for _, name, _ in data_inputs(info.op):
            if name in consumers:
                consumers[name].add(info.op.name)
    changed = True
    while changed:
        changed = False
        for name, info in nodes.items():
            if info.origin or info.kind not in ("builtin", "custom") or not consumers[name]:
                continue
            if any(meta_text(d) or "_fx_tensor_name" in d.attr for d in info.op.output_desc):
                continue
            origins = {nodes[c].origin for c in consumers[name]}
            if len(origins) == 1 and None not in origins:
                info.origin = origins.pop()
                if info.kind == "builtin":
                    info.kind = "yaml"
                changed = True

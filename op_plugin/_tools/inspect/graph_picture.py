"""A GE GraphDef as a Graphviz picture: op types, shapes and dtypes on the nodes.

`ge_graph_dot(graph_def)` builds the DOT graph (no Graphviz binary needed); `render(dot, ...)`
runs Graphviz's `dot` to write SVG/PNG. How nodes are drawn:

* **custom GE op** (its type is not a CANN built-in, so it needs an Ascend C kernel):
  orange, bold double border;
* **from a YAML op** (a built-in GE type that an op_plugin op lowered to, through its `ge:`
  mapping or a converter): light yellow, the op's name on the node; a converter that built
  several nodes gets a dashed box around them;
* built-in GE ops: white; graph inputs (`Data`) and the output (`NetOutput`): blue;
* shape arithmetic (Shape, Gather of sizes, Pack of sizes, ...: the symbolic-size plumbing
  TorchAir adds for dynamic shapes): small and grey, dashed edges;
* `Const` nodes are folded into the nodes that read them (one line each), or drawn small with
  `fold_consts=False`.

Shapes and dtypes come from TorchAir's `_meta` attr on an output desc (the FX node's fake
tensor, so symbolic sizes show as `s0`), else from the desc itself; `?` means unknown.
"""
from __future__ import annotations

import html
import re
from pathlib import Path

import torch

from ..._ge.values import decode_attr, fx_tensor_meta, proto_dtype_name
from .graph_classes import NodeInfo, classify, data_inputs, meta_text
from .graph_text import describe_desc

CUSTOM_FILL, CUSTOM_EDGE = "#ffb74d", "#b35c00"
YAML_FILL, YAML_EDGE = "#fff1b8", "#c99a00"
IO_FILL, IO_EDGE = "#cfe3ff", "#2f5fa7"
BUILTIN_FILL, BUILTIN_EDGE = "#ffffff", "#555555"
SHAPE_FILL, SHAPE_EDGE, SHAPE_FONT = "#f4f4f4", "#aaaaaa", "#777777"
CONST_FILL = "#eeeeee"
FONT = "Helvetica"

_META_OTHER = re.compile(r"<class '(?:torch\.)?(\w+)'>\((.*)\)$", re.S)
_MAX_ATTRS, _MAX_TEXT = 4, 36


def describe_output(desc, op=None) -> str:
    """`float32[s0, 16]` from the FX meta when present, else from the desc; `?` = unknown."""
    tensor_meta = fx_tensor_meta(desc)
    if tensor_meta:
        return f"{tensor_meta.dtype}[{', '.join(tensor_meta.dims)}]"
    meta = meta_text(desc)
    if meta:
        match = _META_OTHER.match(meta)
        if match:
            return f"{match.group(1)} {match.group(2)}"
    if not desc.HasField("shape"):
        return describe_desc(desc, op)  # TorchAir's placeholder desc: the node's dtype attr or `?`
    return proto_dtype_name(desc.dtype) + f"[{', '.join(str(d) for d in desc.shape.dim)}]"


def _value_text(attr_def, limit: int = _MAX_TEXT) -> str:
    """An attr or Const value, short: floats with 6 significant digits, big tensors as a shape."""
    value = decode_attr(attr_def)
    if isinstance(value, torch.Tensor):
        value = value.tolist() if value.numel() <= 8 else f"tensor{list(value.shape)}"

    def fmt(v):
        if isinstance(v, float):
            return f"{v:.6g}"
        if isinstance(v, (list, tuple)):
            return "[" + ", ".join(fmt(x) for x in v) + "]"
        return repr(v) if isinstance(v, str) else str(v)

    return _short(fmt(value), limit)


def _const_text(op) -> str:
    if "value" not in op.attr:
        return "const"
    desc = op.attr["value"].t.desc
    dims = list(desc.shape.dim)
    shape = f"[{', '.join(str(d) for d in dims)}]" if dims else ""
    return f"{proto_dtype_name(desc.dtype)}{shape} {_value_text(op.attr['value'])}"


def _short(text: str, limit: int = _MAX_TEXT) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _attr_lines(op) -> list[str]:
    items = [(k, v) for k, v in sorted(op.attr.items()) if not k.startswith("_")]
    lines = [f"{k}={_value_text(v, 24)}" for k, v in items[:_MAX_ATTRS]]
    if len(items) > _MAX_ATTRS:
        lines.append(f"+{len(items) - _MAX_ATTRS} more attrs")
    return lines


def _label(info: NodeInfo) -> str:
    """An HTML-like Graphviz label: type, name, origin, attrs, folded consts, outputs."""
    op, esc = info.op, html.escape
    small = 8 if info.kind == "shape" else 9
    color = SHAPE_FONT if info.kind == "shape" else "#333333"
    rows = [f'<B>{esc(op.type)}</B>']
    if info.kind == "data" and "index" in op.attr:
        rows[0] += f' <FONT POINT-SIZE="{small}">#{op.attr["index"].i}</FONT>'
    if op.name != op.type:
        rows.append(f'<FONT POINT-SIZE="{small}" COLOR="#777777">{esc(op.name)}</FONT>')
    if info.origin:
        tag = "custom GE op from " if info.kind == "custom" else "from "
        rows.append(f'<FONT POINT-SIZE="{small}" COLOR="#8a4b00"><I>{esc(tag + info.origin)}</I></FONT>')
    elif info.kind == "custom":
        rows.append(f'<FONT POINT-SIZE="{small}" COLOR="#8a4b00"><I>custom GE op</I></FONT>')
    if info.kind not in ("data", "output", "shape"):
        rows += [f'<FONT POINT-SIZE="{small}" COLOR="{color}">{esc(line)}</FONT>' for line in _attr_lines(op)]
    rows += [f'<FONT POINT-SIZE="{small}" COLOR="#555555">{esc(name)} ← {esc(text)}</FONT>'
             for name, text in info.folded]
    if info.kind != "output":
        names = [d.name for d in op.output_desc]
        for desc in op.output_desc:
            prefix = f"{desc.name}: " if len(names) > 1 and desc.name else ""
            text = esc(prefix + describe_output(desc, op))
            rows.append(f'<FONT POINT-SIZE="{small + 1}" COLOR="{color}">{text}</FONT>')
    return "<" + "<BR/>".join(rows) + ">"


_STYLE = {
    "custom": dict(shape="box", style="filled,bold", fillcolor=CUSTOM_FILL, color=CUSTOM_EDGE, penwidth="2",
                   peripheries="2"),
    "yaml": dict(shape="box", style="filled,rounded", fillcolor=YAML_FILL, color=YAML_EDGE, penwidth="1.5"),
    "builtin": dict(shape="box", style="filled,rounded", fillcolor=BUILTIN_FILL, color=BUILTIN_EDGE),
    "data": dict(shape="invhouse", style="filled", fillcolor=IO_FILL, color=IO_EDGE),
    "output": dict(shape="house", style="filled", fillcolor=IO_FILL, color=IO_EDGE, penwidth="1.5"),
    "shape": dict(shape="box", style="filled,rounded", fillcolor=SHAPE_FILL, color=SHAPE_EDGE, fontcolor=SHAPE_FONT,
                  fontsize="8", margin="0.04,0.02"),
    "const": dict(shape="box", style="filled", fillcolor=CONST_FILL, color=SHAPE_EDGE, fontsize="7",
                  margin="0.02,0.01", height="0.2"),
}


def _legend() -> str:
    cells = [
        (IO_FILL, "Data / NetOutput"),
        (CUSTOM_FILL, "custom GE op (needs an Ascend C kernel)"),
        (YAML_FILL, "built-in GE op from an op_plugin op"),
        (BUILTIN_FILL, "built-in GE op"),
        (SHAPE_FILL, "shape arithmetic"),
    ]
    rows = "".join(f'<TR><TD BGCOLOR="{fill}" WIDTH="18"> </TD><TD ALIGN="LEFT">{html.escape(text)}</TD></TR>'
                   for fill, text in cells)
    return f'<<TABLE BORDER="0" CELLBORDER="1" CELLSPACING="2" CELLPADDING="3">{rows}</TABLE>>'


def _shape_text(op) -> str:
    """What a folded shape-arithmetic node computes: its symbolic value when TorchAir recorded it."""
    metas = [meta_text(d) for d in op.output_desc]
    if metas and metas[0]:
        match = _META_OTHER.match(metas[0])
        if match:
            return _short(match.group(2))
    return f"{op.name} (sizes)"


def ge_graph_dot(graph_def, *, fold_consts: bool = True, fold_shape_ops: bool = True, title: str | None = None,
                 builtin_types: set[str] | None = None, ops: dict[str, str | None] | None = None):
    """The GE graph as a `graphviz.Digraph` (building it needs no Graphviz binary).

    `fold_consts` / `fold_shape_ops`: draw Const nodes / shape arithmetic as one line inside the
    nodes that read them instead of as nodes of their own."""
    import graphviz

    nodes = classify(graph_def, builtin_types, ops)
    folded = {name for name, info in nodes.items()
              if (fold_consts and info.kind == "const") or (fold_shape_ops and info.kind == "shape")}
    for info in nodes.values():
        if info.op.name in folded:
            continue
        for position, name, _ in data_inputs(info.op):
            if name in folded:
                input_name = info.op.input_desc[position].name if position < len(info.op.input_desc) else ""
                source = nodes[name]
                text = _const_text(source.op) if source.kind == "const" else _shape_text(source.op)
                info.folded.append((input_name or f"input {position}", text))

    counts = {kind: sum(1 for i in nodes.values() if i.kind == kind) for kind in ("custom", "yaml", "const", "shape")}
    heading = title or f"GE graph {graph_def.name}"
    notes = [f"{counts['custom']} custom GE op(s)", f"{counts['yaml']} built-in from op_plugin ops"]
    if fold_consts and counts["const"]:
        notes.append(f"{counts['const']} Const")
    if fold_shape_ops and counts["shape"]:
        notes.append(f"{counts['shape']} shape-arithmetic nodes folded into their consumers")
    elif fold_consts and counts["const"]:
        notes[-1] += " folded into their consumers"
    summary = f"{len(nodes)} nodes: " + ", ".join(notes)
    dot = graphviz.Digraph(name=graph_def.name or "ge_graph")
    dot.attr("graph",
             label=f"<<B>{html.escape(heading)}</B><BR/><FONT POINT-SIZE=\"10\">{html.escape(summary)}</FONT>>",
             labelloc="t", fontname=FONT, fontsize="14", rankdir="TB", nodesep="0.25", ranksep="0.3",
             newrank="true", bgcolor="white", pad="0.2")
    dot.attr("node", fontname=FONT, fontsize="10", margin="0.08,0.04")
    dot.attr("edge", color="#666666", arrowsize="0.6", fontname=FONT, fontsize="8", fontcolor="#555555")
    dot.node("__legend__", _legend(), shape="plaintext", fontsize="9")

    groups: dict[str, list[str]] = {}
    for name, info in nodes.items():
        if name in folded:
            continue
        if info.origin and info.kind in ("yaml", "custom"):
            groups.setdefault(info.origin, []).append(name)
    clustered = {}
    for origin, members in groups.items():
        if len(members) < 2 or len({nodes[m].op.type for m in members}) < 2:
            continue  # one node, or repeated calls of one op: no box needed
        # A converter's nodes for one call are connected; repeated calls would merge, acceptable.
        for member in members:
            clustered[member] = origin
    for origin in sorted(set(clustered.values())):
        with dot.subgraph(name=f"cluster_{re.sub(r'[^A-Za-z0-9_]', '_', origin)}") as sub:
            sub.attr(label=f"{origin} (converter)", style="dashed,rounded", color=YAML_EDGE,
                     fontname=FONT, fontsize="9", fontcolor="#8a4b00")
            for member in (m for m, o in clustered.items() if o == origin):
                sub.node(member, _label(nodes[member]), **_STYLE[nodes[member].kind])
    for name, info in nodes.items():
        if name in folded or name in clustered:
            continue
        if info.kind == "const":
            dot.node(name, f"{info.op.name}\n{_const_text(info.op)}", **_STYLE["const"])
        else:
            dot.node(name, _label(info), **_STYLE[info.kind])

    for info in nodes.values():
        op = info.op
        if op.name in folded:
            continue
        for ref in op.input:
            if ref.endswith(":-1"):
                source = ref.rpartition(":")[0]
                if source in nodes and source not in folded:
                    dot.edge(source, op.name, style="dotted", color="#999999", arrowhead="empty")
        for _position, source, index in data_inputs(op):
            if source not in nodes or source in folded:
                continue
            src = nodes[source]
            attrs = {}
            if len(src.op.output_desc) > 1 and index < len(src.op.output_desc):
                attrs["label"] = src.op.output_desc[index].name or str(index)
            if src.kind in ("shape", "const"):
                attrs.update(style="dashed", color="#aaaaaa")
            dot.edge(source, op.name, **attrs)
    return dot


class GraphvizMissing(RuntimeError):
    pass


def render(dot, out_dir: str | Path, stem: str, formats=("svg", "png"), dpi: int = 110) -> list[Path]:
    """Write `stem.dot` and `stem.<format>` for each format into out_dir; returns the paths.

    The .dot source is always written; pictures need Graphviz's `dot` binary (GraphvizMissing).
    """
    import graphviz

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = [out / f"{stem}.dot"]
    written[0].write_text(dot.source, encoding="utf-8")
    for fmt in formats:
        fmt = fmt.strip().lower()
        if not fmt or fmt == "dot":
            continue
        source = dot.copy()
        if fmt in ("png", "jpg", "jpeg", "gif", "bmp"):
            source.attr("graph", dpi=str(dpi))
        try:
            data = source.pipe(format=fmt)
        except graphviz.ExecutableNotFound:
            raise GraphvizMissing("Graphviz's `dot` program is not installed, so no SVG/PNG was drawn "
                                  f"(the DOT source is in {written[0]}); install it with "
                                  "`apt-get install graphviz` (or `make setup`)") from None
        path = out / f"{stem}.{fmt}"
        path.write_bytes(data)
        written.append(path)
    return written

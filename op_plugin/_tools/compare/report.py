"""What `op_plugin.compare` reports: one row per FX node whose GE result was seen, per graph run.

A row compares the GE tensor TorchAir named after the FX node (`_fx_tensor_name`) with the FX node
computed eagerly on the same inputs the GE graph gave that node ("local" error: the node's own
error, what decides divergence), and with the FX graph run eagerly from the graph inputs
("chained" error: how far the GE value has drifted from eager by then, for information).
Tolerances are per dtype (`_tools._shared.tolerances`). Known semantic differences between a GE op and
its eager counterpart are named on the row (`KNOWN_DIFFERENCES`).
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

import torch


@dataclass
class CompareRow:
    graph: str                  # "forward 0", "backward 1", "inference 0": which compiled graph run
    node: str                   # FX node name in the graph TorchAir lowered
    target: str                 # its op, e.g. aten.gelu.default
    ge_types: list[str]         # GE op types that computed it (the converter's nodes)
    ge_node: str                # the GE node whose output carries the FX node's name
    output: str                 # which output of the FX node ("0", "1", ...)
    dtype: str
    shape: list[int]
    max_abs: float | None       # local error: GE vs eager on the GE graph's own inputs to this node
    max_rel: float | None
    chained_abs: float | None   # GE vs the FX graph run eagerly from the graph inputs
    atol: float
    rtol: float
    ok: bool
    note: str = ""              # mismatch detail, known difference, or why not compared

    @property
    def divergent(self) -> bool:
        return not self.ok


OK_FILL, DIVERGENT_FILL, KNOWN_FILL = "#a5d6a7", "#ef9a9a", "#ce93d8"

# (GE op type, FX target name) -> why graph mode legitimately differs from eager there.
KNOWN_DIFFERENCES = {
    ("Gelu", "aten.gelu.default"): (
        "CANN's GE Gelu is the tanh approximation; TorchAir lowers aten.gelu(approximate='none') to it "
        "verbatim, so graph mode differs from eager erf-GELU by up to ~5e-4 (use approximate='tanh', or "
        "the GeluV2 lowering)"),
}


def known_difference(ge_types, target: str) -> str:
    for ge_type in ge_types:
        reason = KNOWN_DIFFERENCES.get((ge_type, target))
        if reason:
            return reason
    return ""


@dataclass
class CompareReport:
    rows: list[CompareRow] = field(default_factory=list)
    ge_graphs: dict = field(default_factory=dict)    # graph label -> GE GraphDef
    fx_graphs: dict = field(default_factory=dict)    # graph label -> the FX GraphModule TorchAir lowered
    outputs: object = None                           # what the compiled model returned
    notes: list = field(default_factory=list)        # about the run as a whole (a backward not compared, why)

    @property
    def first_divergent_row(self) -> CompareRow | None:
        return next((row for row in self.rows if row.divergent), None)

    @property
    def first_divergent(self) -> str | None:
        """Name of the first FX node (in run order) whose GE result departs from eager, or None."""
        row = self.first_divergent_row
        return row.node if row else None

    def to_dict(self) -> dict:
        first = self.first_divergent_row
        return {"first_divergent": self.first_divergent,
                "first_divergent_graph": first.graph if first else None,
                "notes": list(self.notes),
                "rows": [asdict(row) for row in self.rows]}

    def to_json(self, **kwargs) -> str:
        return json.dumps(self.to_dict(), indent=kwargs.pop("indent", 1), **kwargs)

    def __str__(self) -> str:
        header = ("graph", "FX node", "target", "GE ops", "dtype", "max abs", "max rel", "chained", "tol", "")
        lines = [header]
        for row in self.rows:
            status = "ok" if row.ok else "DIVERGES"
            lines.append((row.graph, row.node + ("" if row.output == "0" else f"[{row.output}]"), row.target,
                          ",".join(row.ge_types) or "-", row.dtype, _num(row.max_abs), _num(row.max_rel),
                          _num(row.chained_abs), f"{row.atol:g}/{row.rtol:g}", status))
        widths = [max(len(str(line[i])) for line in lines) for i in range(len(header))]
        text = ["  ".join(str(cell).ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
                for line in lines]
        first = self.first_divergent_row
        if first is None:
            text.append(f"\nno divergence: {len(self.rows)} FX node result(s) within tolerance")
        else:
            text.append(f"\nfirst divergent FX node: {first.node} ({first.target}, GE {','.join(first.ge_types)}) "
                        f"in the {first.graph} graph: max abs {_num(first.max_abs)}, tolerance "
                        f"{first.atol:g}/{first.rtol:g}")
        notes = [row for row in self.rows if row.note]
        for row in notes:
            text.append(f"  note {row.graph} {row.node}: {row.note}")
        text.extend(f"note: {note}" for note in self.notes)
        return "\n".join(text)

    def picture(self, index: int | str = 0, **kwargs):
        """The GE graph (label or index into `ge_graphs`) as a graphviz.Digraph, each node that carries
        an FX node's result coloured by its error (green within tolerance, red divergent, orange a
        known difference); render with `_tools.inspect.graph_picture.render`."""
        from ..inspect.graph_picture import ge_graph_dot

        label = list(self.ge_graphs)[index] if isinstance(index, int) else index
        graph_def = self.ge_graphs[label]
        kwargs.setdefault("title", f"GE graph ({label}) coloured by error against eager")
        dot = ge_graph_dot(graph_def, **kwargs)
        worst: dict[str, CompareRow] = {}
        for row in self.rows:
            if row.graph != label:
                continue
            seen = worst.get(row.ge_node)
            if (seen is None or (seen.ok and not row.ok)
                    or ((row.max_abs or 0) > (seen.max_abs or 0) and seen.ok == row.ok)):
                worst[row.ge_node] = row
        for ge_node, row in worst.items():
            colour = OK_FILL if row.ok else (KNOWN_FILL if row.note.startswith("known") else DIVERGENT_FILL)
            dot.node(ge_node, fillcolor=colour, style="filled,rounded,bold",
                     xlabel=f"{row.node}: abs {_num(row.max_abs)}")
        cells = "".join(f'<TR><TD BGCOLOR="{fill}" WIDTH="18"> </TD><TD ALIGN="LEFT">{text}</TD></TR>'
                        for fill, text in ((OK_FILL, "FX node result within tolerance"),
                                           (DIVERGENT_FILL, "FX node result beyond tolerance"),
                                           (KNOWN_FILL, "beyond tolerance: known semantic difference")))
        dot.node("__compare_legend__",
                 f'<<TABLE BORDER="0" CELLBORDER="1" CELLSPACING="2" CELLPADDING="3">{cells}</TABLE>>',
                 shape="plaintext", fontsize="9")
        return dot


def _num(value) -> str:
    return "-" if value is None else f"{value:.3g}"


def error_of(actual: torch.Tensor, expected: torch.Tensor) -> tuple[float, float]:
    """(max abs, max rel) error; NaN in the same places counts as equal; rel over nonzero expected."""
    if actual.numel() == 0:
        return 0.0, 0.0
    if actual.dtype == torch.bool or expected.dtype == torch.bool:
        diff = (actual != expected).to(torch.float64)
        return float(diff.max()), float(diff.max())
    a, e = actual.detach().to(torch.float64), expected.detach().to(torch.float64)
    if a.is_complex() or e.is_complex():
        diff = (a - e).abs()
    else:
        both_nan = a.isnan() & e.isnan()
        same_inf = (a == e)
        diff = torch.where(both_nan | same_inf, torch.zeros_like(a), (a - e).abs())
        diff = torch.nan_to_num(diff, nan=float("inf"))
    scale = e.abs()
    rel = torch.where(scale > 0, diff / scale.clamp_min(1e-300), torch.zeros_like(diff))
    return float(diff.max()), float(rel.max())


def within(actual: torch.Tensor, expected: torch.Tensor, atol: float, rtol: float) -> bool:
    if actual.numel() == 0:
        return True
    if actual.dtype == torch.bool or not (actual.is_floating_point() or actual.is_complex()):
        return bool(torch.equal(actual, expected))
    return bool(torch.isclose(actual.detach(), expected.detach().to(actual.dtype), atol=atol, rtol=rtol,
                              equal_nan=True).all())

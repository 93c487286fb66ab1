"""`op-plugin compare --dumps DIR_A DIR_B`: two data-dump folders diffed op by op.

A folder holds numpy dump files named `{op_type}.{op_name}.{task_id}.{stream_id}.{timestamp}.
{input|output}.{index}.npy` anywhere below it: what the simulator writes for TorchAir's
dump_config (`_simulator/hosting/data_dump.py`), and what CANN's `msaccucmp.py convert` makes of an NPU
dump. Tensors are paired by (step folder, op name, input/output, index), listed in DIR_A's task
order; the first op whose output departs beyond the dtype tolerance is `first_divergent`.
"""
from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from ..._base.paths import shown  # names from the file system, control characters escaped
from .report import error_of, within
from .._shared.tolerances import tolerances

_NAME = re.compile(r"^(?P<type>[^.]+)\.(?P<op>[^.]+)\.(?P<task>\d+)\.(?P<stream>\d+)\.(?P<ts>\d+)\."
                   r"(?P<io>input|output)\.(?P<index>\d+)\.npy$")


@dataclass
class DumpRow:
    op: str
    op_type: str
    io: str
    index: int
    step: str
    dtype: str
    shape: list
    max_abs: float | None
    max_rel: float | None
    ok: bool
    note: str = ""


@dataclass
class DumpCompareReport:
    rows: list[DumpRow] = field(default_factory=list)
    only_in_a: list[str] = field(default_factory=list)
    only_in_b: list[str] = field(default_factory=list)

    @property
    def first_divergent(self) -> str | None:
        return next((row.op for row in self.rows if not row.ok and row.io == "output"), None)

    def to_json(self) -> str:
        return json.dumps({"first_divergent": self.first_divergent, "rows": [asdict(r) for r in self.rows],
                           "only_in_a": self.only_in_a, "only_in_b": self.only_in_b}, indent=1)

    def text(self) -> str:
        lines = [("step", "op", "type", "tensor", "dtype", "shape", "max abs", "max rel", "")]
        for r in self.rows:
            lines.append((r.step, r.op, r.op_type, f"{r.io}.{r.index}", r.dtype, str(r.shape),
                          "-" if r.max_abs is None else f"{r.max_abs:.3g}",
                          "-" if r.max_rel is None else f"{r.max_rel:.3g}", "ok" if r.ok else f"DIVERGES {r.note}"))
        widths = [max(len(str(line[i])) for line in lines) for i in range(len(lines[0]))]
        out = ["  ".join(str(c).ljust(w) for c, w in zip(line, widths, strict=True)).rstrip() for line in lines]
        if self.only_in_a or self.only_in_b:
            out.append(f"\nunpaired: {len(self.only_in_a)} tensor(s) only in A, {len(self.only_in_b)} only in B")
        first = self.first_divergent
        out.append(f"\nfirst divergent op: {first}" if first else f"\nno divergence: {len(self.rows)} tensor(s) paired")
        return "\n".join(out)


def _index(folder: Path) -> dict:
    if not folder.is_dir():
        raise ValueError(f"{shown(folder)} is not a folder")
    found = {}
    for path in sorted(folder.rglob("*.npy")):
        match = _NAME.match(path.name)
        if match is None:
            continue
        key = (path.parent.name, match["op"], match["io"], int(match["index"]))
        found[key] = (int(match["task"]), match["type"], path)
    if not found:
        raise ValueError(f"{shown(folder)}: no dump files named "
                         "{op_type}.{op_name}.{task}.{stream}.{timestamp}.{input|output}.{index}.npy (convert an NPU "
                         "dump with CANN's msaccucmp.py convert first)")
    return found


def compare_dump_dirs(dir_a, dir_b) -> DumpCompareReport:
    import numpy

    a, b = _index(Path(dir_a)), _index(Path(dir_b))
    report = DumpCompareReport(only_in_a=sorted(str(a[k][2]) for k in a.keys() - b.keys()),
                               only_in_b=sorted(str(b[k][2]) for k in b.keys() - a.keys()))
    for key in sorted(a.keys() & b.keys(), key=lambda k: (k[0], a[k][0], k[2], k[3])):
        step, op, io, index = key
        _, op_type, path_a = a[key]
        left = torch.from_numpy(numpy.load(path_a))
        right = torch.from_numpy(numpy.load(b[key][2]))
        tol = tolerances(left.dtype)
        row = DumpRow(op=op, op_type=op_type, io=io, index=index, step=step,
                      dtype=str(left.dtype).replace("torch.", ""),
                      shape=list(left.shape), max_abs=None, max_rel=None, ok=True)
        if left.shape != right.shape or left.dtype != right.dtype:
            row.ok = False
            row.note = f"A {left.dtype}{list(left.shape)}, B {right.dtype}{list(right.shape)}"
        else:
            row.max_abs, row.max_rel = error_of(right, left)
            row.ok = within(right, left, **tol)
        report.rows.append(row)
    return report

"""`op-plugin inspect MODULE:FACTORY`."""
from __future__ import annotations

import re
import sys

from .._shared.command import Command, add_backend_options, backend_options, call_factory


class InspectCommand(Command):
    name = "inspect"
    help = "FX and GE graphs of a model, as text and as a picture"
    description = ("Import MODULE (the working directory is importable), call FACTORY() -> (model, example_inputs), "
                   "compile with the npugraph backend and run once; print the FX and GE graphs and draw each GE "
                   "graph with Graphviz.")

    def add_arguments(self, parser):
        parser.add_argument("target", metavar="MODULE:FACTORY")
        parser.add_argument("--dynamic", action="store_true", help="compile with dynamic shapes")
        parser.add_argument("--out", default="op-plugin-inspect", metavar="DIR",
                            help="folder for the pictures and text dumps (default: ./op-plugin-inspect)")
        parser.add_argument("--format", default="svg,png", help="picture formats, comma-separated (default: svg,png)")
        parser.add_argument("--show-consts", action="store_true", help="draw Const nodes instead of folding them")
        parser.add_argument("--show-shape-ops", action="store_true",
                            help="draw shape arithmetic (Shape, Pack of sizes, ...) instead of folding it")
        add_backend_options(parser)

    def run(self, args) -> int:
        from pathlib import Path

        import op_plugin

        from .graph_picture import GraphvizMissing, ge_graph_dot, render

        out = Path(args.out)
        refusal = _out_refusal(out, getattr(args, "force", False))
        if refusal is not None:  # before the model is built: nothing run for an output that cannot be written
            print(f"error: {refusal}", file=sys.stderr)
            return 2
        try:
            model, inputs = call_factory(args.target)
        except ValueError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        formats = [f.strip().lower() for f in args.format.split(",") if f.strip()]
        report = op_plugin.inspect(model, *inputs, dynamic=args.dynamic, **backend_options(args))
        out.mkdir(parents=True, exist_ok=True)
        written, status = [], 0
        for i, gm in enumerate(report.fx_graphs):
            print(f"== FX graph {i} (dynamo) ==\n{gm.code.strip()}\n")
            path = out / f"fx_graph_{i}.py"
            path.write_text(gm.code.strip() + "\n", encoding="utf-8")
            written.append(path)
        for i, graph_def in enumerate(report.ge_graphs):
            text = report.ge_text(i)
            print(f"== GE graph {i} (TorchAir lowering) ==\n{text}\n")
            path = out / f"ge_graph_{i}.txt"
            path.write_text(text + "\n", encoding="utf-8")
            written.append(path)
            dot = ge_graph_dot(graph_def, fold_consts=not args.show_consts, fold_shape_ops=not args.show_shape_ops,
                               title=f"GE graph {i} of {args.target}")
            try:
                written += render(dot, out, f"ge_graph_{i}", formats)
            except GraphvizMissing as exc:
                written.append(out / f"ge_graph_{i}.dot")
                print(f"error: {exc}", file=sys.stderr)
                status = 1
        if not report.ge_graphs:
            print("note: no GE graph was produced (nothing was compiled)", file=sys.stderr)
        print("wrote:\n" + "\n".join(f"  {p}" for p in written))
        return status


# The files inspect writes into --out: fx_graph_<i>.py, ge_graph_<i>.txt, .dot and the picture formats.
_WRITTEN = re.compile(r"(fx_graph_\d+\.py|ge_graph_\d+\.\w+)")


def _out_refusal(out, force: bool) -> str | None:
    """Why `--out` cannot take this run's files: it is not a folder, or (without --force) it holds files of
    an earlier run, which this one would replace."""
    from ..._base.paths import shown

    if not out.exists():
        return None
    if not out.is_dir():
        return f"{shown(out)}: --out names something that is not a folder"
    if force:
        return None
    earlier = sorted(p.name for p in out.iterdir() if _WRITTEN.fullmatch(p.name))
    if earlier:
        return (f"{shown(out / earlier[0])}: --out holds the files of an earlier run ({len(earlier)}), which this "
                "one would replace; pass --force to replace them, or choose another --out")
    return None

"""`op-plugin compare MODULE:FACTORY` and `op-plugin compare --dumps DIR_A DIR_B`."""
from __future__ import annotations

import sys

from .._shared.command import Command, add_backend_options, backend_options, call_factory


class CompareCommand(Command):
    name = "compare"
    help = "per FX node, where graph mode (GE on the simulator) departs from eager"
    description = ("Import MODULE, call FACTORY() -> (model, example_inputs), compile with npugraph on the simulator, "
                   "and compare every FX node's GE result with eager (forward, and backward when an output requires "
                   "grad and every op has a backward; otherwise the forward only, under torch.no_grad(), with a "
                   "note). Exit 1 when a node diverges. With --dumps, diff two data-dump folders op by op instead.")

    def add_arguments(self, parser):
        parser.add_argument("target", metavar="MODULE:FACTORY", nargs="?")
        parser.add_argument("--dynamic", action="store_true", help="compile with dynamic shapes")
        parser.add_argument("--no-backward", action="store_true", help="compare the forward graph only")
        parser.add_argument("--no-grad", action="store_true",
                            help="run the model under torch.no_grad(), as inference does (its ops need no backward); "
                                 "without it, a model with an op that has no backward is compared forward only, "
                                 "that way, with a note")
        parser.add_argument("--json", metavar="FILE", help="write the report as JSON")
        parser.add_argument("--picture", metavar="FILE",
                            help="draw the GE graph coloured by error (FILE.svg or .png)")
        parser.add_argument("--dumps", nargs=2, metavar=("DIR_A", "DIR_B"),
                            help="diff two TorchAir/GE data-dump folders (e.g. NPU vs simulator) op by op")
        add_backend_options(parser, skip=("mode",))  # compare checks the GE graph: mode "ge" only

    def run(self, args) -> int:
        if args.dumps:
            return _compare_dumps(args)
        if not args.target:
            print("error: give MODULE:FACTORY, or --dumps DIR_A DIR_B", file=sys.stderr)
            return 2
        from pathlib import Path

        import op_plugin

        from ..inspect.graph_picture import GraphvizMissing, render

        try:
            model, inputs = call_factory(args.target)
        except ValueError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        # backward=None (not True): an op without a backward leaves the backward out, with a note
        report = op_plugin.compare(model, *inputs, dynamic=args.dynamic, backward=False if args.no_backward else None,
                                   no_grad=args.no_grad, **backend_options(args))
        print(report)
        if args.json:
            Path(args.json).write_text(report.to_json() + "\n", encoding="utf-8")
            print(f"wrote {args.json}")
        if args.picture:
            path = Path(args.picture)
            label = report.first_divergent_row.graph if report.first_divergent_row else 0
            dot = report.picture(label)
            try:
                written = render(dot, path.parent, path.stem, [path.suffix.lstrip(".") or "svg"])
                print("wrote " + ", ".join(str(p) for p in written))
            except GraphvizMissing as exc:
                print(f"error: {exc} (wrote {path.with_suffix('.dot')})", file=sys.stderr)
                return 2
        return 0 if report.first_divergent is None else 1


def _compare_dumps(args) -> int:
    from pathlib import Path

    from .dumps import compare_dump_dirs

    try:
        report = compare_dump_dirs(*args.dumps)
    except (OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(report.text())
    if args.json:
        Path(args.json).write_text(report.to_json() + "\n", encoding="utf-8")
        print(f"wrote {args.json}")
    return 0 if report.first_divergent is None else 1

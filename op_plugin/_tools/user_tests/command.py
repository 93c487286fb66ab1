"""`op-plugin test FILE.yaml`."""
from __future__ import annotations

import sys

from .._shared.command import Command


class UserTestsCommand(Command):
    name = "test"
    help = "check a user's own ops from their YAML samples (opcheck, Meta, npugraph, ...)"
    description = ("For every op x sample of FILE: torch.library.opcheck, Meta vs the eager kernel, symbolic-size "
                   "cleanliness of the Meta function, npugraph == eager static and dynamic (one compile), backward "
                   "vs autograd through the reference, and your @op_plugin.testing.oracle / golden values when given "
                   "(for a custom GE type npugraph == eager checks the lowering, not the formula). An op without "
                   "samples: gets one derived from its schema (<op>-default). Exit 1 on a failure.")

    def add_arguments(self, parser):
        parser.add_argument("file", metavar="FILE.yaml")
        parser.add_argument("--python", action="append", metavar="MODULE",
                            help="import MODULE (or a .py file) first: your @reference/@meta/@backward pieces; "
                                 "repeatable")
        parser.add_argument("--check", action="append", metavar="NAME",
                            help="only this check (opcheck, meta, symbolic, npugraph, dynamic, backward, oracle, "
                                 "golden); repeatable")
        parser.add_argument("--op", action="append", metavar="NAME", help="only this op; repeatable")
        parser.add_argument("--no-grad", action="store_true",
                            help="inference only: no input requires grad and the backward check is skipped (ops "
                                 "without a backward, in-place cache updates)")

    def run(self, args) -> int:
        from ..._base.paths import shown
        from .checks import CHECKS
        from .runner import error_detail, failure_text, notes, run_yaml_checks, summary_table

        unknown = [c for c in args.check or [] if c not in CHECKS]
        if unknown:
            print(f"error: unknown check(s) {unknown}; known: {', '.join(CHECKS)}", file=sys.stderr)
            return 2
        try:
            outcomes = run_yaml_checks(args.file, args.python or [], args.check, args.op, no_grad=args.no_grad)
        except Exception as exc:  # a YAML or import error: one line, exit 2
            print(f"error: {shown(error_detail(exc))}", file=sys.stderr)
            return 2
        if not outcomes:
            print(f"error: {args.file}: nothing to check (an --op that names no op of the file, or --check golden "
                  "for ops without @op_plugin.testing.golden values?)", file=sys.stderr)
            return 2
        print(summary_table(outcomes))
        failures = failure_text(outcomes)
        if failures:
            print("\n" + failures)
        for note in notes(outcomes):
            print(note)
        return 1 if any(o.failed for o in outcomes) else 0

"""`op-plugin declared-cases`: enumerate, run in guarded workers, report and check (the cases:
cases.py; the workers: pool.py; the reports: report.py)."""
from __future__ import annotations

import sys

from .._shared.command import Command


class DeclaredCasesCommand(Command):
    name = "declared-cases"
    help = "run TorchAir's declared converter cases through npugraph against eager"
    description = ("Every case TorchAir declares on its converters (@declare_supported), compiled with the npugraph "
                   "backend and compared with CPU eager, each in a guarded worker process (a crash or hang costs one "
                   "case). Prints a summary by class.")

    def add_arguments(self, parser):
        parser.add_argument("--prefix", action="append", metavar="P",
                            help="only cases whose id (converter target, e.g. aten.add.Tensor#1) starts with P; "
                                 "repeatable")
        parser.add_argument("--json", metavar="FILE", help="write the summary and every case's result as JSON")
        parser.add_argument("--markdown", metavar="FILE", help="write the page docs/declared-cases.md")
        parser.add_argument("--workers", type=int, default=2, help="worker processes (default: 2)")
        parser.add_argument("--timeout", type=float, default=120.0, metavar="S",
                            help="seconds per case (default: 120)")
        parser.add_argument("--check", metavar="KNOWN_FILE",
                            help="exit 1 when a case outside this known-failures file fails; warn about entries "
                                 "that now pass")
        parser.add_argument("--write-known", metavar="KNOWN_FILE",
                            help="write the failing cases as a known-failures file")
        parser.add_argument("--from-json", metavar="FILE",
                            help="report on the results a previous --json run saved; run nothing")
        parser.add_argument("--setup", action="append", metavar="MODULE",
                            help="import MODULE (or a .py file) in every worker first; it may plant extra cases; "
                                 "repeatable")

    def run(self, args) -> int:
        """Run (or reload with --from-json) the cases, summarise, write, check."""
        import json
        from pathlib import Path

        from ..._base.paths import shown
        from .._shared.command import one_line
        from .cases import CaseResult, enumerate_cases, import_setup
        from .group import rank_scaled_timeouts
        from .pool import run_cases
        from .report import Progress, check_known, read_known, render_page, summarize, summary_text, write_known

        known = None
        if args.check:
            try:
                known = read_known(args.check)
            except (OSError, ValueError) as exc:
                print(f"error: {shown(exc)}", file=sys.stderr)
                return 2
        if args.from_json:  # report on a saved run instead of running the cases
            try:
                saved = json.loads(Path(args.from_json).read_text(encoding="utf-8"))["cases"]
                results = [CaseResult(**r) for r in saved
                           if not args.prefix or any(r["case_id"].startswith(p) for p in args.prefix)]
            except OSError as exc:
                print(f"error: cannot read {shown(args.from_json)}: {exc.strerror or shown(exc)}", file=sys.stderr)
                return 2
            except (ValueError, KeyError, TypeError, AttributeError) as exc:  # not JSON, or not a saved --json run
                print(f"error: {shown(args.from_json)} is not the JSON a `declared-cases --json` run writes: "
                      f"{shown(one_line(exc))}", file=sys.stderr)
                return 2
        else:
            for module in args.setup or []:
                try:
                    import_setup(module)
                except Exception as exc:  # a module that is missing, not Python, or fails: name it
                    print(f"error: {shown(module)}: the --setup module cannot be imported: {shown(one_line(exc))}",
                          file=sys.stderr)
                    return 2
            cases = enumerate_cases(args.prefix or ())
            if not cases:
                print(f"error: no declared case matches the prefixes {args.prefix}", file=sys.stderr)
                return 2
            with Progress(len(cases)) as progress:
                results = run_cases([c.case_id for c in cases], workers=args.workers, timeout=args.timeout,
                                    setup=args.setup or [], on_result=progress.advance,
                                    case_timeouts=rank_scaled_timeouts(cases, args.timeout))
        try:
            previous = read_known(args.write_known) if args.write_known and Path(args.write_known).exists() else {}
        except (OSError, ValueError) as exc:  # an existing --write-known file that is not a known-failures file
            print(f"error: {shown(exc)}", file=sys.stderr)
            return 2
        summary = summarize(results, known or previous)
        print(summary_text(summary))
        try:
            if args.json:
                Path(args.json).write_text(json.dumps({"summary": summary, "cases": [r.as_dict() for r in results]},
                                                      indent=1) + "\n", encoding="utf-8")
                print(f"wrote {args.json}")
            if args.markdown:  # the known-failures file's hand-written reasons become the page's notes
                Path(args.markdown).write_text(render_page(results, summary, known or previous), encoding="utf-8")
                print(f"wrote {args.markdown}")
            if args.write_known:
                # a --prefix run keeps the entries of the cases it did not run
                count = write_known(args.write_known, results, previous, keep_unrun=bool(args.prefix))
                print(f"wrote {args.write_known}: {count} known failures")
        except OSError as exc:  # an output file that cannot be written
            print(f"error: cannot write {shown(exc.filename or '')}: {exc.strerror or shown(exc)}", file=sys.stderr)
            return 2
        if known is not None:
            outcome = check_known(results, known, all_cases_ran=not args.prefix)
            print(outcome.text())
            return 0 if outcome.ok else 1
        return 0

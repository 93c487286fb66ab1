"""`op-plugin msopgen FILE...` and `op-plugin opproto FILE... --out DIR`."""
from __future__ import annotations

import sys

from .._shared.command import Command, parse_yaml_files


class MsopgenCommand(Command):
    name = "msopgen"
    help = "msOpGen JSON (Ascend C op project) for the custom GE ops of YAML files"

    def add_arguments(self, parser):
        parser.add_argument("files", nargs="+", metavar="FILE")
        parser.add_argument("--out", metavar="DIR",
                            help="write one <op>.json per custom op here (default: JSON to stdout)")

    def run(self, args) -> int:
        from ..._base.paths import shown
        from .msopgen import dumps, msopgen_ops, write_jsons

        specs = parse_yaml_files(args.files)
        if specs is None:
            return 1
        result = msopgen_ops(specs)
        log = sys.stderr if args.out is None else sys.stdout  # stdout carries the JSON without --out
        for spec, ge_type in result.builtin:
            print(f"skip {spec.qualname}: GE type {ge_type} is a CANN built-in op; it already has a kernel", file=log)
        for spec in result.no_ge:
            print(f"skip {spec.qualname}: no `ge:` mapping (eager and aclgraph mode only, or a hand-written "
                  "converter)", file=log)
        for note in result.notes:
            print(f"note: {note}", file=log)
        for _, message in result.errors:  # one op's problem never stops the others; each is named
            print(f"error: {message}", file=sys.stderr)
        status = 1 if result.errors else 0
        if args.out is None:
            print(dumps(result.ops))
            return status
        try:
            paths = write_jsons(result, args.out, replace=getattr(args, "force", False))
        except OSError as exc:
            print(f"error: cannot write {shown(exc.filename or args.out)}: {exc.strerror or shown(exc)}",
                  file=sys.stderr)
            return 1
        for spec, path in zip(result.sources, paths, strict=True):
            print(f"wrote {path}: {spec.ge.type} for {spec.qualname}\n"
                  f"    msopgen gen -i {path} -f pytorch -c ai_core-<soc_version> -lan cpp -out ./{spec.ge.type}")
        if not result.ops and not result.errors:
            print("no custom GE ops: nothing to generate")
        return status


class OpprotoCommand(Command):
    name = "opproto"
    help = ("GE op prototypes (REG_OP) with infer functions (C++) for the custom GE ops of YAML files, from the same "
            "`outputs:` rules as the Meta functions")

    def add_arguments(self, parser):
        parser.add_argument("files", nargs="+", metavar="FILE")
        parser.add_argument("--out", metavar="DIR", required=True,
                            help="folder for <op>.h, <op>.cc and op_plugin_infer.h")

    def run(self, args) -> int:
        from ..._base.paths import shown
        from .opproto import opproto_sources, write_sources

        specs = parse_yaml_files(args.files)
        if specs is None:
            return 1
        result = opproto_sources(specs)
        for spec, ge_type in result.builtin:
            print(f"skip {spec.qualname}: GE type {ge_type} is a CANN built-in op; CANN ships its prototype")
        for spec in result.no_ge:
            print(f"skip {spec.qualname}: no `ge:` mapping, so no GE op")
        for _, message in result.errors:  # one op's problem never stops the others; each is named
            print(f"error: {message}", file=sys.stderr)
        try:
            paths = write_sources(result, args.out, replace=getattr(args, "force", False))
        except OSError as exc:
            print(f"error: cannot write {shown(exc.filename or args.out)}: {exc.strerror or shown(exc)}",
                  file=sys.stderr)
            return 1
        for path in paths:
            print(f"wrote {path}")
        if not result.generated and not result.errors:
            print("no custom GE ops: nothing to generate")
        return 1 if result.errors else 0

"""The `op-plugin` command line: one argparse parser and a small handler per subcommand; the work itself
lives in `_tools` (the reason this module is a little over 400 lines is the parser's help text)."""
from __future__ import annotations

import argparse
import sys


def _validate(args) -> int:
    from ._base.errors import YamlSpecError
    from ._registry.load import parse_yaml

    failed = 0
    for path in args.files:
        try:
            specs = parse_yaml(path)
        except YamlSpecError as exc:
            print(f"error: {exc}", file=sys.stderr)
            failed += 1
            continue
        problems = _builtin_mapping_problems(specs)
        for problem in problems:
            print(f"error: {problem}", file=sys.stderr)
        if problems:
            failed += 1
            continue
        print(f"ok: {path}: {len(specs)} op(s): {', '.join(s.qualname for s in specs)}")
    return 1 if failed else 0


def _builtin_mapping_problems(specs) -> list[str]:
    """A `ge:` mapping onto a CANN built-in type checked against CANN's prototype (input, attr and
    output names and kinds), as the first compile would, with advice that keeps the built-in."""
    from ._base.errors import OpPluginError
    from ._ge.builtin_prototypes import builtin_prototype
    from ._lowering.mapping import check_against_builtin

    problems = []
    for spec in specs:
        if spec.ge is None:
            continue
        builtin = builtin_prototype(spec.ge.type)
        if builtin is None:
            continue
        try:
            check_against_builtin(spec, builtin)
        except OpPluginError as exc:
            problems.append(f"{exc}; {spec.ge.type} is a CANN built-in: use its names in `ge:` (inputs, attrs, "
                            "outputs) as listed; a different `ge.type` would make this a custom op that needs "
                            "its own Ascend C kernel")
    return problems


def _list(args) -> int:
    import op_plugin
    from . import _registry

    for path in args.yaml or []:
        op_plugin.load_yaml(path)
    for st in sorted(_registry.loaded(), key=lambda s: s.qualname):
        spec = st.spec
        ge = f"GE {spec.ge.type}" if spec.ge else "no GE mapping"
        print(f"{spec.schema.text}\n    {ge}; {spec.location.file_line}")
    return 0


def _demo(args) -> int:
    from ._tools.demo import run_demo

    return run_demo()


def _load_factory(target: str):
    """`MODULE:FACTORY` -> the factory callable; the working directory is importable (like -m)."""
    import importlib
    import os

    module_name, sep, attr_path = target.partition(":")
    if not sep or not module_name or not attr_path:
        raise ValueError(f"expected MODULE:FACTORY (e.g. my_model:make), got {target!r}")
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.insert(0, cwd)
    try:
        obj = importlib.import_module(module_name)
    except ImportError as exc:
        raise ValueError(f"cannot import module '{module_name}' (from {cwd}): {exc}") from exc
    for part in attr_path.split("."):
        if not hasattr(obj, part):
            raise ValueError(f"module '{module_name}' has no attribute '{attr_path}'")
        obj = getattr(obj, part)
    if not callable(obj):
        raise ValueError(f"{target} is not callable; FACTORY() must return (model, example_inputs)")
    return obj


def _call_factory(target: str):
    made = _load_factory(target)()
    if not isinstance(made, (tuple, list)) or len(made) != 2:
        raise ValueError(f"{target}() must return (model, example_inputs), got {type(made).__name__}")
    model, inputs = made
    if not callable(model):
        raise ValueError(f"{target}() returned a model that is not callable: {type(model).__name__}")
    if not isinstance(inputs, (tuple, list)):
        raise ValueError(f"{target}() must return example_inputs as a tuple or list, got {type(inputs).__name__}")
    return model, tuple(inputs)


def _add_backend_options(parser: argparse.ArgumentParser, skip: tuple[str, ...] = ()) -> None:
    """One flag per npugraph backend option (NpuGraphConfig's fields): --name-with-dashes, its help,
    choices and default from the field."""
    from ._backend import option_specs

    group = parser.add_argument_group("npugraph backend options (op_plugin.NpuGraphConfig)")
    for spec in option_specs():
        if spec.name in skip:
            continue
        flag = "--" + spec.name.replace("_", "-")
        if spec.flag:
            action = argparse.BooleanOptionalAction if spec.default else "store_true"
            group.add_argument(flag, dest=spec.name, action=action, default=spec.default, help=spec.help)
            continue
        shown = "" if spec.default is None else f" (default: {spec.default})"
        group.add_argument(flag, dest=spec.name, choices=spec.choices, default=spec.default,
                           metavar=None if spec.choices else spec.name.upper(), help=spec.help + shown)


def _backend_options(args) -> dict:
    """The backend options given on the command line (those left at their default are left out)."""
    from ._backend import option_specs

    return {spec.name: getattr(args, spec.name) for spec in option_specs()
            if hasattr(args, spec.name) and getattr(args, spec.name) != spec.default}


def _inspect(args) -> int:
    from pathlib import Path

    import op_plugin

    from ._tools.graph_picture import GraphvizMissing, ge_graph_dot, render

    try:
        model, inputs = _call_factory(args.target)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    formats = [f.strip().lower() for f in args.format.split(",") if f.strip()]
    report = op_plugin.inspect(model, *inputs, dynamic=args.dynamic, **_backend_options(args))
    out = Path(args.out)
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


def _parse_files(paths) -> list | None:
    """The ops of every YAML file (parsed, not registered); None after printing each file's error."""
    from ._base.errors import YamlSpecError
    from ._registry.load import parse_yaml

    specs, failed = [], 0
    for path in paths:
        try:
            specs.extend(parse_yaml(path))
        except YamlSpecError as exc:
            print(f"error: {exc}", file=sys.stderr)
            failed += 1
    return None if failed else specs


def _msopgen(args) -> int:
    from ._tools.msopgen import dumps, msopgen_ops, write_jsons

    specs = _parse_files(args.files)
    if specs is None:
        return 1
    result = msopgen_ops(specs)
    log = sys.stderr if args.out is None else sys.stdout  # stdout carries the JSON without --out
    for spec, ge_type in result.builtin:
        print(f"skip {spec.qualname}: GE type {ge_type} is a CANN built-in op; it already has a kernel", file=log)
    for spec in result.no_ge:
        print(f"skip {spec.qualname}: no `ge:` mapping (eager and aclgraph mode only, or a hand-written converter)",
              file=log)
    for note in result.notes:
        print(f"note: {note}", file=log)
    for _, message in result.errors:  # one op's problem never stops the others; each is named
        print(f"error: {message}", file=sys.stderr)
    status = 1 if result.errors else 0
    if args.out is None:
        print(dumps(result.ops))
        return status
    try:
        paths = write_jsons(result, args.out)
    except OSError as exc:
        print(f"error: cannot write {exc.filename or args.out}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    for spec, path in zip(result.sources, paths, strict=True):
        print(f"wrote {path}: {spec.ge.type} for {spec.qualname}\n"
              f"    msopgen gen -i {path} -f pytorch -c ai_core-<soc_version> -lan cpp -out ./{spec.ge.type}")
    if not result.ops and not result.errors:
        print("no custom GE ops: nothing to generate")
    return status


def _opproto(args) -> int:
    from ._tools.opproto import opproto_sources, write_sources

    specs = _parse_files(args.files)
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
        paths = write_sources(result, args.out)
    except OSError as exc:
        print(f"error: cannot write {exc.filename or args.out}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    for path in paths:
        print(f"wrote {path}")
    if not result.generated and not result.errors:
        print("no custom GE ops: nothing to generate")
    return 1 if result.errors else 0


def _declared_cases(args) -> int:
    from ._tools.declared_cli import run

    return run(args)


def _test(args) -> int:
    from ._tools.user_tests import error_detail, failure_text, notes, run_yaml_checks, summary_table
    from ._tools.user_checks import CHECKS

    unknown = [c for c in args.check or [] if c not in CHECKS]
    if unknown:
        print(f"error: unknown check(s) {unknown}; known: {', '.join(CHECKS)}", file=sys.stderr)
        return 2
    try:
        outcomes = run_yaml_checks(args.file, args.python or [], args.check, args.op, no_grad=args.no_grad)
    except Exception as exc:  # pylint: disable=broad-except  # a YAML or import error: one line, exit 2
        print(f"error: {error_detail(exc)}", file=sys.stderr)
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


def _compare(args) -> int:
    from pathlib import Path

    if args.dumps:
        from ._tools.dump_compare import compare_dump_dirs

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
    if not args.target:
        print("error: give MODULE:FACTORY, or --dumps DIR_A DIR_B", file=sys.stderr)
        return 2
    import op_plugin

    from ._tools.graph_picture import GraphvizMissing, render

    try:
        model, inputs = _call_factory(args.target)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    report = op_plugin.compare(model, *inputs, dynamic=args.dynamic, backward=not args.no_backward,
                               no_grad=args.no_grad, **_backend_options(args))
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


class _VersionAction(argparse.Action):
    """`--version`: op-plugin's version and the versions it runs with (torch, the torch-npu wheel whose
    TorchAir the simulator runs, torch_npu when installed), one per line; computed only when asked."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None):  # noqa: A002
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        from ._tools.version_info import version_lines

        print("\n".join(version_lines()))
        parser.exit()


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.run(args)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="op-plugin",
                                     description="Custom NPU operators from YAML into PyTorch graph mode.")
    parser.add_argument("--version", action=_VersionAction, help="show the versions of op-plugin, torch and the "
                                                                "simulator's torch-npu wheel, and exit")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("validate", help="check YAML op definitions without registering them")
    p.add_argument("files", nargs="+")
    p.set_defaults(run=_validate)
    p = sub.add_parser("list", help="list the registered ops (shipped, plus --yaml files)")
    p.add_argument("--yaml", action="append", metavar="FILE", help="also load this YAML file first")
    p.set_defaults(run=_list)
    p = sub.add_parser("demo", help="run the demo model eagerly, through Meta functions and compiled")
    p.set_defaults(run=_demo)
    p = sub.add_parser("inspect", help="FX and GE graphs of a model, as text and as a picture",
                       description="Import MODULE (the working directory is importable), call FACTORY() -> "
                                   "(model, example_inputs), compile with the npugraph backend and run once; print "
                                   "the FX and GE graphs and draw each GE graph with Graphviz.")
    p.add_argument("target", metavar="MODULE:FACTORY")
    p.add_argument("--dynamic", action="store_true", help="compile with dynamic shapes")
    p.add_argument("--out", default="op-plugin-inspect", metavar="DIR",
                   help="folder for the pictures and text dumps (default: ./op-plugin-inspect)")
    p.add_argument("--format", default="svg,png", help="picture formats, comma-separated (default: svg,png)")
    p.add_argument("--show-consts", action="store_true", help="draw Const nodes instead of folding them")
    p.add_argument("--show-shape-ops", action="store_true",
                   help="draw shape arithmetic (Shape, Pack of sizes, ...) instead of folding it")
    _add_backend_options(p)
    p.set_defaults(run=_inspect)
    p = sub.add_parser("msopgen", help="msOpGen JSON (Ascend C op project) for the custom GE ops of YAML files")
    p.add_argument("files", nargs="+", metavar="FILE")
    p.add_argument("--out", metavar="DIR", help="write one <op>.json per custom op here (default: JSON to stdout)")
    p.set_defaults(run=_msopgen)
    p = sub.add_parser("opproto", help="GE op prototypes (REG_OP) with infer functions (C++) for the custom GE ops "
                                       "of YAML files, from the same `outputs:` rules as the Meta functions")
    p.add_argument("files", nargs="+", metavar="FILE")
    p.add_argument("--out", metavar="DIR", required=True, help="folder for <op>.h, <op>.cc and op_plugin_infer.h")
    p.set_defaults(run=_opproto)
    p = sub.add_parser("declared-cases", help="run TorchAir's declared converter cases through npugraph against eager",
                       description="Every case TorchAir declares on its converters (@declare_supported), compiled with "
                                   "the npugraph backend and compared with CPU eager, each in a guarded worker process "
                                   "(a crash or hang costs one case). Prints a summary by class.")
    p.add_argument("--prefix", action="append", metavar="P",
                   help="only cases whose id (converter target, e.g. aten.add.Tensor#1) starts with P; repeatable")
    p.add_argument("--json", metavar="FILE", help="write the summary and every case's result as JSON")
    p.add_argument("--markdown", metavar="FILE", help="write the page docs/declared-cases.md")
    p.add_argument("--workers", type=int, default=2, help="worker processes (default: 2)")
    p.add_argument("--timeout", type=float, default=120.0, metavar="S", help="seconds per case (default: 120)")
    p.add_argument("--check", metavar="KNOWN_FILE",
                   help="exit 1 when a case outside this known-failures file fails; warn about entries that now pass")
    p.add_argument("--write-known", metavar="KNOWN_FILE", help="write the failing cases as a known-failures file")
    p.add_argument("--from-json", metavar="FILE", help="report on the results a previous --json run saved; run nothing")
    p.add_argument("--setup", action="append", metavar="MODULE",
                   help="import MODULE (or a .py file) in every worker first; it may plant extra cases; repeatable")
    p.set_defaults(run=_declared_cases)
    p = sub.add_parser("test", help="check a user's own ops from their YAML samples (opcheck, Meta, npugraph, ...)",
                       description="For every op x sample of FILE: torch.library.opcheck, Meta vs the eager kernel, "
                                   "symbolic-size cleanliness of the Meta function, npugraph == eager static and "
                                   "dynamic (one compile), backward vs autograd through the reference, and your "
                                   "@op_plugin.testing.oracle / golden values when given (for a custom GE type "
                                   "npugraph == eager checks the lowering, not the formula). An op without samples: "
                                   "gets one derived from its schema (<op>-default). Exit 1 on a failure.")
    p.add_argument("file", metavar="FILE.yaml")
    p.add_argument("--python", action="append", metavar="MODULE",
                   help="import MODULE (or a .py file) first: your @reference/@meta/@backward pieces; repeatable")
    p.add_argument("--check", action="append", metavar="NAME",
                   help="only this check (opcheck, meta, symbolic, npugraph, dynamic, backward, oracle, golden); "
                        "repeatable")
    p.add_argument("--op", action="append", metavar="NAME", help="only this op; repeatable")
    p.add_argument("--no-grad", action="store_true",
                   help="inference only: no input requires grad and the backward check is skipped (ops without a "
                        "backward, in-place cache updates)")
    p.set_defaults(run=_test)
    p = sub.add_parser("compare", help="per FX node, where graph mode (GE on the simulator) departs from eager",
                       description="Import MODULE, call FACTORY() -> (model, example_inputs), compile with npugraph "
                                   "on the simulator, and compare every FX node's GE result with eager (forward, and "
                                   "backward when an output requires grad). Exit 1 when a node diverges. With --dumps, "
                                   "diff two data-dump folders op by op instead.")
    p.add_argument("target", metavar="MODULE:FACTORY", nargs="?")
    p.add_argument("--dynamic", action="store_true", help="compile with dynamic shapes")
    p.add_argument("--no-backward", action="store_true", help="compare the forward graph only")
    p.add_argument("--no-grad", action="store_true",
                   help="run the model under torch.no_grad(), as inference does (its ops need no backward)")
    p.add_argument("--json", metavar="FILE", help="write the report as JSON")
    p.add_argument("--picture", metavar="FILE", help="draw the GE graph coloured by error (FILE.svg or .png)")
    p.add_argument("--dumps", nargs=2, metavar=("DIR_A", "DIR_B"),
                   help="diff two TorchAir/GE data-dump folders (e.g. NPU vs simulator) op by op")
    _add_backend_options(p, skip=("mode",))  # compare checks the GE graph: mode "ge" only
    p.set_defaults(run=_compare)
    return parser


if __name__ == "__main__":
    sys.exit(main())

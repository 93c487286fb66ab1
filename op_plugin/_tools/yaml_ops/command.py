"""`op-plugin validate` (check YAML files, registering nothing) and `op-plugin list` (the registered ops)."""
from __future__ import annotations

import sys

from .._shared.command import Command


class ValidateCommand(Command):
    name = "validate"
    help = "check YAML op definitions without registering them"

    def add_arguments(self, parser):
        parser.add_argument("files", nargs="+")

    def run(self, args) -> int:
        from ..._base.errors import YamlSpecError
        from ..._registry.load import parse_yaml

        failed = 0
        for path in args.files:
            try:
                specs = parse_yaml(path)
            except YamlSpecError as exc:
                print(f"error: {exc}", file=sys.stderr)
                failed += 1
                continue
            problems = builtin_mapping_problems(specs)
            for problem in problems:
                print(f"error: {problem}", file=sys.stderr)
            if problems:
                failed += 1
                continue
            print(f"ok: {path}: {len(specs)} op(s): {', '.join(s.qualname for s in specs)}")
        return 1 if failed else 0


def builtin_mapping_problems(specs) -> list[str]:
    """A `ge:` mapping onto a CANN built-in type checked against CANN's prototype (input, attr and
    output names and kinds), as the first compile would, with advice that keeps the built-in."""
    from ..._base.errors import OpPluginError
    from ..._ge.builtin_prototypes import builtin_prototype
    from ..._lowering.mapping import check_against_builtin

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


class ListCommand(Command):
    name = "list"
    help = "list the registered ops (shipped, plus --yaml files)"

    def add_arguments(self, parser):
        parser.add_argument("--yaml", action="append", metavar="FILE", help="also load this YAML file first")

    def run(self, args) -> int:
        import op_plugin

        from ... import _registry

        for path in args.yaml or []:
            op_plugin.load_yaml(path)
        for st in sorted(_registry.loaded(), key=lambda s: s.qualname):
            spec = st.spec
            ge = f"GE {spec.ge.type}" if spec.ge else "no GE mapping"
            print(f"{spec.schema.text}\n    {ge}; {spec.location.file_line}")
        return 0

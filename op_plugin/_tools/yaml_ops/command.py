"""`op-plugin validate` (check YAML files, registering nothing) and `op-plugin list` (the registered ops)."""
from __future__ import annotations

import sys

from .._shared.command import Command


class ValidateCommand(Command):
    name = "validate"
    help = "check YAML op definitions without registering them"
    description = ("Check each file as `op_plugin.load_yaml` would load it, in the order given, registering "
                   "nothing: its syntax, schemas and fields, its names against the ops already defined (op_plugin's, "
                   "torch_npu's from the pinned wheel's operator list, the earlier files'), its GE types, and "
                   "mappings onto CANN built-in types against their prototypes.")

    def add_arguments(self, parser):
        parser.add_argument("files", nargs="+")

    def run(self, args) -> int:
        from pathlib import Path

        from ..._base.errors import YamlSpecError
        from ..._registry.load import check_yaml

        failed, earlier, seen = 0, [], set()
        for path in args.files:
            resolved = Path(path).resolve()
            try:
                # every check load_yaml makes, nothing registered; a file given twice is, like a second
                # load_yaml of it, no second definition
                specs, problems = check_yaml(path, () if resolved in seen else earlier)
            except YamlSpecError as exc:
                print(f"error: {exc}", file=sys.stderr)
                failed += 1
                continue
            problems = [str(p) for p in problems] + builtin_mapping_problems(specs)
            for problem in problems:
                print(f"error: {problem}", file=sys.stderr)
            if problems:
                failed += 1
                continue
            if resolved not in seen:
                seen.add(resolved)
                earlier.extend(specs)  # a later file is checked as load_yaml would check it after this one
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
            try:
                op_plugin.load_yaml(path)
            except op_plugin.OpPluginError as exc:  # a located YamlSpecError (or a refusal naming the op)
                print(f"error: {exc}", file=sys.stderr)
                return 1
        for st in sorted(_registry.loaded(), key=lambda s: s.qualname):
            spec = st.spec
            ge = f"GE {spec.ge.type}" if spec.ge else "no GE mapping"
            print(f"{spec.schema.text}\n    {ge}; {spec.location.file_line}")
        return 0

"""The `op-plugin` command line."""
from __future__ import annotations

import argparse
import sys


def _validate(args) -> int:
    from ._errors import YamlSpecError
    from ._load import parse_yaml

    failed = 0
    for path in args.files:
        try:
            specs = parse_yaml(path)
        except YamlSpecError as exc:
            print(f"error: {exc}", file=sys.stderr)
            failed += 1
            continue
        print(f"ok: {path}: {len(specs)} op(s): {', '.join(s.qualname for s in specs)}")
    return 1 if failed else 0


def _list(args) -> int:
    import op_plugin
    from . import _registry

    for path in args.yaml or []:
        op_plugin.load_yaml(path)
    for st in sorted(_registry.loaded(), key=lambda s: s.qualname):
        spec = st.spec
        ge = f"GE {spec.ge.type}" if spec.ge else "no GE mapping"
        print(f"{spec.schema.text}\n    {ge}; {spec.location.file}:{spec.location.line}")
    return 0


def _demo(args) -> int:
    from ._demo import run_demo

    return run_demo()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="op-plugin", description="Custom NPU operators from YAML into PyTorch graph mode.")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("validate", help="check YAML op definitions without registering them")
    p.add_argument("files", nargs="+")
    p.set_defaults(run=_validate)
    p = sub.add_parser("list", help="list the registered ops (shipped, plus --yaml files)")
    p.add_argument("--yaml", action="append", metavar="FILE", help="also load this YAML file first")
    p.set_defaults(run=_list)
    p = sub.add_parser("demo", help="run the demo model eagerly, through Meta functions and compiled")
    p.set_defaults(run=_demo)
    args = parser.parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())

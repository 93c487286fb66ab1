"""The page docs/ge-executor-ops.md, generated from the GE executor's kernel table.

    python -m op_plugin._tools.oplist > docs/ge-executor-ops.md

tests/test_docs_oplist.py fails when the committed page differs from `render_page()`, so the page
always lists exactly the op types the executor runs.
"""
from __future__ import annotations

import importlib
import sys

from .._registry.load import parse_yaml
from .._simulator.interpreter.kernels import builtin_kernels
from .._spec.shipped import shipped_yaml_files

REGENERATE = "python -m op_plugin._tools.oplist > docs/ge-executor-ops.md"
# Node types the executor handles itself (see op_plugin._simulator.interpreter.executor.plan), not through a kernel.
STRUCTURAL = (
    ("Data", "graph input number `index` (checked against the node's desc)"),
    ("RefData", "graph input that the graph may update in place; same as Data on the CPU"),
    ("Const", "its `value` tensor"),
    ("NetOutput", "its data inputs, in order, are the graph's outputs"),
)


def _first_line(text: str | None) -> str:
    """The first paragraph of a docstring, on one line."""
    paragraph = (text or "").strip().split("\n\n", 1)[0]
    return " ".join(paragraph.split())


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def shipped_custom_types() -> list[tuple[str, str]]:
    """(GE type, op) of the shipped YAML ops whose GE type has no built-in kernel; the executor runs
    those with the op's reference kernel once op_plugin is imported."""
    builtins = builtin_kernels()
    found = []
    for path in shipped_yaml_files():
        for spec in parse_yaml(path):
            if spec.ge is not None and spec.ge.type not in builtins:
                found.append((spec.ge.type, spec.qualname))
    return sorted(found)


def render_page() -> str:
    kernels = builtin_kernels()
    by_module: dict[str, list[str]] = {}
    for op_type, kernel in kernels.items():
        by_module.setdefault(kernel.__module__, []).append(op_type)
    shared: dict[object, list[str]] = {}
    for op_type, kernel in kernels.items():
        shared.setdefault(kernel, []).append(op_type)

    out = [
        "# GE op types the CPU simulator executes",
        "",
        f"<!-- Generated from the GE executor's kernel table by `{REGENERATE}`.",
        "     Do not edit by hand: tests/test_docs_oplist.py fails when this page and the code disagree. -->",
        "",
        "On a host without an Ascend NPU, the `npugraph` backend lowers the graph with TorchAir's own code",
        "and the simulator's GE executor (`op_plugin/_simulator/interpreter/executor/`) runs the GE graph node",
        "by node on the CPU. A node whose type is not listed here fails with `GE op type 'X' (node ...)",
        "has no CPU kernel in the op_plugin simulator`; add one with",
        "`op_plugin.register_ge_kernel('X', fn)`, where `fn` takes the node's inputs by",
        "position and its attrs as keyword arguments and returns its output tensor(s); built-in kernels",
        "are bound to their CANN REG_OP prototypes (docs/contributing.md). Custom GE types of YAML ops",
        "(`ge: {type: ...}` that is not a CANN built-in) need no kernel here: the executor runs the op's",
        "reference kernel for them.",
        "",
        f"{len(kernels)} built-in op types, plus {len(STRUCTURAL)} graph-structure node types.",
        "",
        "## Graph structure",
        "",
        "| GE op type | executed as |",
        "|---|---|",
    ]
    out += [f"| `{name}` | {_cell(what)} |" for name, what in STRUCTURAL]
    for module_name in sorted(by_module):
        module = importlib.import_module(module_name)
        short = module_name.split(".kernels.", 1)[-1]
        out += ["", f"## `{short}`", "", _cell(_first_line(module.__doc__)), "",
                "| GE op type | same kernel as | notes |", "|---|---|---|"]
        for op_type in by_module[module_name]:
            kernel = kernels[op_type]
            others = ", ".join(f"`{o}`" for o in shared[kernel] if o != op_type)
            out.append(f"| `{op_type}` | {others} | {_cell(_first_line(kernel.__doc__))} |")
    custom = shipped_custom_types()
    out += ["", "## Custom GE types of the shipped YAML ops", "",
            "Run by the op's reference kernel (registered when `op_plugin` is imported); on an Ascend host",
            "they need an Ascend C kernel (`op-plugin msopgen yaml/*.yaml`).", "",
            "| GE op type | op |", "|---|---|"]
    out += [f"| `{ge_type}` | `{qualname}` |" for ge_type, qualname in custom]
    return "\n".join(out) + "\n"


def main() -> int:
    sys.stdout.write(render_page())
    return 0


if __name__ == "__main__":
    sys.exit(main())

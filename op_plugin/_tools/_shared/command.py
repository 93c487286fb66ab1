"""One `op-plugin` subcommand as an object, and the command-line plumbing several commands share.

A command owns its name, its help and description, its arguments (`add_arguments`) and its work
(`run(args) -> int`, the exit code); `op_plugin.cli` builds the parser from its table of commands
and dispatches. A command's module imports only the standard library at its top: the work (torch,
TorchAir, the simulator) is imported inside `run`, so `op-plugin --help` stays fast.
"""
from __future__ import annotations

import argparse
import sys
from typing import ClassVar


class Command:
    """An `op-plugin` subcommand: `name`, `help` (the one line in `op-plugin --help`), an optional
    longer `description` (its own `--help`), its arguments and its work."""

    name: ClassVar[str]
    help: ClassVar[str]
    description: ClassVar[str | None] = None

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        """Add this command's arguments to its subparser (none by default)."""

    def run(self, args: argparse.Namespace) -> int:
        """Do the work; return the exit code."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<op-plugin command {self.name!r}>"


class VersionAction(argparse.Action):
    """`--version`: op-plugin's version and the versions it runs with (torch, the torch-npu wheel whose
    TorchAir the simulator runs, torch_npu when installed), one per line; computed only when asked."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None):
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        from .version_info import version_lines

        print("\n".join(version_lines()))
        parser.exit()


def load_factory(target: str):
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


def call_factory(target: str):
    """Call `MODULE:FACTORY` and check that it returned (model, example_inputs)."""
    made = load_factory(target)()
    if not isinstance(made, (tuple, list)) or len(made) != 2:
        raise ValueError(f"{target}() must return (model, example_inputs), got {type(made).__name__}")
    model, inputs = made
    if not callable(model):
        raise ValueError(f"{target}() returned a model that is not callable: {type(model).__name__}")
    if not isinstance(inputs, (tuple, list)):
        raise ValueError(f"{target}() must return example_inputs as a tuple or list, got {type(inputs).__name__}")
    return model, tuple(inputs)


def add_backend_options(parser: argparse.ArgumentParser, skip: tuple[str, ...] = ()) -> None:
    """One flag per npugraph backend option (NpuGraphConfig's fields): --name-with-dashes, its help,
    choices and default from the field."""
    from ..._backend import option_specs

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


def backend_options(args: argparse.Namespace) -> dict:
    """The backend options given on the command line (those left at their default are left out)."""
    from ..._backend import option_specs

    return {spec.name: getattr(args, spec.name) for spec in option_specs()
            if hasattr(args, spec.name) and getattr(args, spec.name) != spec.default}


def parse_yaml_files(paths) -> list | None:
    """The ops of every YAML file (parsed, not registered); None after printing each file's error."""
    from ..._base.errors import YamlSpecError
    from ..._registry.load import parse_yaml

    specs, failed = [], 0
    for path in paths:
        try:
            specs.extend(parse_yaml(path))
        except YamlSpecError as exc:
            print(f"error: {exc}", file=sys.stderr)
            failed += 1
    return None if failed else specs

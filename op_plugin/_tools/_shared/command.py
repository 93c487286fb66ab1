"""One `op-plugin` subcommand as an object, and the command-line plumbing several commands share.

A command owns its name, its help and description, its arguments (`add_arguments`) and its work
(`run(args) -> int`, the exit code); `op_plugin.cli` builds the parser from its table of commands
and dispatches. A command's module imports only the standard library at its top: the work (torch,
TorchAir, the simulator) is imported inside `run`, so `op-plugin --help` stays fast.
"""
from __future__ import annotations

import argparse
import os
import sys
from typing import ClassVar

# Options naming a file a command writes (by their dest, in every command, compare's included): a file that
# exists is not replaced without --force. `--out DIR` folders are checked by their commands, which know the
# names they write.
OUTPUT_FILE_DESTS = frozenset({"json", "markdown", "write_known", "picture"})
OUTPUT_DESTS = OUTPUT_FILE_DESTS | {"out"}
_UNCHECKED_DESTS = frozenset({"argv"})  # `op-plugin run -- CMD ARGS`: the command's own arguments
TRACEBACK_VARIABLE = "OP_PLUGIN_CLI_TRACEBACK"  # =1: an unexpected error shows its traceback


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


def add_shared_arguments(parser: argparse.ArgumentParser) -> None:
    """What every command with an output option takes: `--force` to replace output files that exist."""
    if any(action.dest in OUTPUT_DESTS for action in parser._actions):
        parser.add_argument("--force", action="store_true",
                            help="replace output files that exist (without it an existing file is an error)")


def run_command(args: argparse.Namespace) -> int:
    """Run the chosen command (`args.run`) with what every command shares:

    * SIGTERM and SIGHUP stop it as Ctrl-C does (`_base.processes.Terminated`, a KeyboardInterrupt), so the
      cleanup written for Ctrl-C (worker processes killed) runs for `timeout`, CI limits and a closed
      terminal too; the exit code is 128 + the signal number;
    * a FIFO, device or socket named where a command reads a path is refused before anything opens it;
    * an output file that exists is refused without --force;
    * an error nothing else caught is one `error:` line and exit 1, never a traceback
      ($OP_PLUGIN_CLI_TRACEBACK=1 shows it).
    """
    from ..._base.paths import shown
    from ..._base.processes import terminating_signals

    command = getattr(args.run, "__self__", None)
    name = getattr(command, "name", "op-plugin")
    with terminating_signals():
        try:
            refusal = path_refusal(args)
            if refusal is not None:  # a special file to read: bad input (1), an output in the way: usage (2)
                print(f"error: {refusal[1]}", file=sys.stderr)
                return refusal[0]
            return args.run(args)
        except KeyboardInterrupt as stop:  # Ctrl-C, or SIGTERM / SIGHUP (Terminated)
            import signal

            signum = getattr(stop, "signum", signal.SIGINT)
            print(f"op-plugin {name}: stopped by {signal.Signals(signum).name}", file=sys.stderr)
            return 128 + signum
        except Exception as error:  # a path no command foresaw: one line, not a traceback
            if os.environ.get(TRACEBACK_VARIABLE) == "1":
                raise
            print(f"error: {shown(one_line(error))} (op-plugin {name}; ${TRACEBACK_VARIABLE}=1 shows where)",
                  file=sys.stderr)
            return 1


def one_line(error: BaseException) -> str:
    """`Type: first line of the message` (the type left out for op_plugin's own errors, which say it all)."""
    from ..._base.errors import OpPluginError

    lines = str(error).strip().splitlines()
    text = lines[0] if lines else ""
    if isinstance(error, OpPluginError) and text:
        return text
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def _path_values(args: argparse.Namespace):
    for dest, value in vars(args).items():
        if dest in OUTPUT_DESTS or dest in _UNCHECKED_DESTS:
            continue
        for item in value if isinstance(value, (list, tuple)) else [value]:
            if isinstance(item, str) and item:
                yield item


def path_refusal(args: argparse.Namespace) -> tuple[int, str] | None:
    """(exit code, why) when the command must not start: an input path that is a FIFO, device or socket (never
    opened; 1, as for any bad input file), or an output file that exists (without --force) or is a folder (2,
    as for a usage error). None when it may."""
    from ..._base.paths import shown, special_file

    for value in _path_values(args):
        kind = special_file(value)
        if kind is not None:
            return 1, f"{shown(value)}:1: the path is {kind}, not a regular file; op-plugin reads regular files only"
    force = getattr(args, "force", False)
    for dest in sorted(OUTPUT_FILE_DESTS):
        value = getattr(args, dest, None)
        if not isinstance(value, str) or not os.path.lexists(value):
            continue
        option = "--" + dest.replace("_", "-")
        if os.path.isdir(value):
            return 2, f"{shown(value)}: {option} names a folder; give a file name"
        if not force:
            return 2, f"{shown(value)}: {option} would replace a file that exists; pass --force to replace it"
    return None


def load_factory(target: str):
    """`MODULE:FACTORY` -> the factory callable; the working directory is importable (like -m)."""
    import importlib
    import os

    from ..._base.paths import shown

    module_name, sep, attr_path = target.partition(":")
    if not sep or not module_name or not attr_path:
        raise ValueError(f"expected MODULE:FACTORY (e.g. my_model:make), got {shown(repr(target))}")
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.insert(0, cwd)
    origin = None
    try:
        origin = _module_file(module_name)
        obj = importlib.import_module(module_name)
    except ImportError as exc:
        raise ValueError(f"cannot import module '{shown(module_name)}' (from {shown(cwd)}): {shown(exc)}") from exc
    except (SyntaxError, ValueError, UnicodeDecodeError) as exc:  # a file that is not Python source
        where = f"{shown(origin)}:{getattr(exc, 'lineno', None) or 1}" if origin else shown(module_name)
        raise ValueError(f"{where}: module '{shown(module_name)}' cannot be imported: {shown(one_line(exc))}") from exc
    for part in attr_path.split("."):
        if not hasattr(obj, part):
            raise ValueError(f"module '{shown(module_name)}' has no attribute '{shown(attr_path)}'")
        obj = getattr(obj, part)
    if not callable(obj):
        raise ValueError(f"{shown(target)} is not callable; FACTORY() must return (model, example_inputs)")
    return obj


def _module_file(module_name: str) -> str | None:
    """The file `module_name` would be imported from, refused (ImportError) when it is a FIFO, device or
    socket: importing one would block on it or read without end."""
    import importlib.util

    from ..._base.paths import special_file

    spec = importlib.util.find_spec(module_name)
    origin = getattr(spec, "origin", None) if spec is not None else None
    if origin and os.path.exists(origin):
        kind = special_file(origin)
        if kind is not None:
            raise ImportError(f"{origin} is {kind}, not a regular file")
    return origin


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

"""The `op-plugin` command line: a table of commands, as pip has.

Each command is an object beside the tool it runs (`op_plugin/_tools/<family>/command.py`) that owns
its name, help, arguments (`add_arguments(parser)`) and work (`run(args) -> int`); this module builds
one subparser per command, in the table's order, and dispatches to the chosen one. The commands'
modules import only the standard library at their top, and a command's arguments are added only when
the command line names it (some need the backend's option list, which imports torch), so
`op-plugin --help` never imports torch: `op_plugin._cli_entry` answers it before `op_plugin`'s own
imports, and prints a command's first line before them.
"""
from __future__ import annotations

import argparse
import sys

from ._tools._shared.command import Command, VersionAction, add_shared_arguments, run_command
from ._tools.ascend_c.command import MsopgenCommand, OpprotoCommand
from ._tools.compare.command import CompareCommand
from ._tools.declared.command import DeclaredCasesCommand
from ._tools.demo.command import DemoCommand
from ._tools.inspect.command import InspectCommand
from ._tools.simulator_setup.command import SetupSimulatorCommand
from ._tools.user_tests.command import UserTestsCommand
from ._tools.virtual_npu.command import RunCommand
from ._tools.yaml_ops.command import ListCommand, ValidateCommand

COMMANDS: tuple[Command, ...] = (
    ValidateCommand(), ListCommand(), DemoCommand(), InspectCommand(), MsopgenCommand(), OpprotoCommand(),
    DeclaredCasesCommand(), UserTestsCommand(), CompareCommand(), SetupSimulatorCommand(), RunCommand(),
)


def named_command(argv: list[str]) -> str | None:
    """The command `argv` names (its first argument that is not an option), or None when it names none
    of the table's (help, --version, a usage error)."""
    first = next((arg for arg in argv if not arg.startswith("-")), None)
    return first if first in {command.name for command in COMMANDS} else None


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The parser; with `argv`, only the command it names gets its arguments (the others are never parsed)."""
    chosen = named_command(argv) if argv is not None else None
    parser = argparse.ArgumentParser(prog="op-plugin",
                                     description="Custom NPU operators from YAML into PyTorch graph mode.")
    parser.add_argument("--version", action=VersionAction, help="show the versions of op-plugin, torch and the "
                                                               "simulator's torch-npu wheel, and exit")
    sub = parser.add_subparsers(dest="command", required=True)
    for command in COMMANDS:
        p = sub.add_parser(command.name, help=command.help, description=command.description)
        if argv is None or command.name == chosen:
            command.add_arguments(p)
            add_shared_arguments(p)  # --force where a command writes files
        p.set_defaults(run=command.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = build_parser(argv).parse_args(argv)
    from ._base.errors import options_given_as

    with options_given_as("cli"):  # an error or note that names a fix names the flag (--no-grad), not the keyword
        return run_command(args)  # signals, special files, existing outputs, one-line errors


if __name__ == "__main__":
    sys.exit(main())

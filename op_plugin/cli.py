"""The `op-plugin` command line: a table of commands, as pip has.

Each command is an object beside the tool it runs (`op_plugin/_tools/<family>/command.py`) that owns
its name, help, arguments (`add_arguments(parser)`) and work (`run(args) -> int`); this module builds
one subparser per command, in the table's order, and dispatches to the chosen one. The commands'
modules import only the standard library at their top, so `op-plugin --help` stays fast.
"""
from __future__ import annotations

import argparse
import sys

from ._tools._shared.command import Command, VersionAction
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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="op-plugin",
                                     description="Custom NPU operators from YAML into PyTorch graph mode.")
    parser.add_argument("--version", action=VersionAction, help="show the versions of op-plugin, torch and the "
                                                               "simulator's torch-npu wheel, and exit")
    sub = parser.add_subparsers(dest="command", required=True)
    for command in COMMANDS:
        p = sub.add_parser(command.name, help=command.help, description=command.description)
        command.add_arguments(p)
        p.set_defaults(run=command.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())

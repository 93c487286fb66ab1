"""What the `op-plugin` command line does before op_plugin's heavy imports.

The console script runs `from op_plugin.cli import main`, so `op_plugin/__init__` (torch, the shipped
ops, the host set-up: seconds, 15-40 s on a loaded machine) runs before any of the CLI's own code.
`op_plugin/__init__` imports this module first; when this process is the `op-plugin` command line
(the console script, or `python -m op_plugin.cli`):

- a command line that names no command (`op-plugin --help`, `--version`, no arguments, a misspelt
  command) is answered here by the CLI's parser, which prints and exits: torch is never imported;
- `op-plugin COMMAND ...` prints its first line, `op-plugin COMMAND: loading torch and op_plugin ...`,
  on stderr now, when progress is shown (a terminal, or OP_PLUGIN_PROGRESS=1; the rule of
  `_tools._shared.progress`), so a slow start is not a silent one.

In any other process (`import op_plugin` in a program, pytest, the command `op-plugin run` starts)
it does nothing. Imports only the standard library and the CLI's parser (whose modules import only
the standard library at their top).
"""
from __future__ import annotations

import os
import sys

CONSOLE_SCRIPTS = ("op-plugin", "op-plugin.exe", "op-plugin-script.py")


def cli_arguments() -> list[str] | None:
    """The arguments of this process's `op-plugin` command line, or None when it is not one."""
    if _console_script():
        return sys.argv[1:]
    argv = list(getattr(sys, "orig_argv", ()))   # `python [options] -m op_plugin.cli ARGS`
    index = 1
    while index < len(argv):
        arg = argv[index]
        if arg == "-m":
            return argv[index + 2:] if argv[index + 1:index + 2] == ["op_plugin.cli"] else None
        if arg.startswith("-m"):
            return argv[index + 1:] if arg[2:] == "op_plugin.cli" else None
        if arg in ("-X", "-W"):   # an option with its value
            index += 2
            continue
        if not arg.startswith("-") or arg in ("-", "-c") or arg.startswith("-c"):
            return None   # a script, `-c` or stdin: not the CLI
        index += 1
    return None


def _console_script() -> bool:
    main = sys.modules.get("__main__")
    return os.path.basename(getattr(main, "__file__", None) or "") in CONSOLE_SCRIPTS


def start(arguments: list[str] | None = None) -> None:
    """Called once, by `op_plugin/__init__` before its heavy imports (see the module docstring)."""
    arguments = cli_arguments() if arguments is None else arguments
    if arguments is None:
        return
    from . import cli

    name = cli.named_command(arguments)
    if name is None:
        # help, --version or a usage error: argparse prints and exits (SystemExit), nothing else is needed
        cli.build_parser(arguments).parse_args(arguments)
        return
    if not _console_script():
        # `python -m op_plugin.cli`: runpy runs cli.py as __main__ next, and warns when the module is
        # imported already; its command modules stay imported
        sys.modules.pop(cli.__name__, None)
        vars(sys.modules[__package__]).pop("cli", None)
    from ._tools._shared.progress import enabled

    if enabled():
        print(f"op-plugin {name}: loading torch and op_plugin ...", file=sys.stderr, flush=True)


start()

"""`op-plugin run -- CMD [ARGS...]`."""
from __future__ import annotations

import argparse
import os
import subprocess
import sys

from .._shared.command import Command


class RunCommand(Command):
    name = "run"
    help = "run any command (python, pytest, torchrun) with the virtual NPU active"
    description = ("Runs CMD [ARGS...] with OP_PLUGIN_VIRTUAL_NPU=1 in its environment: every Python process it "
                   "starts that imports torch gets an `npu` device (PrivateUse1 renamed, storage in host memory; "
                   "docs/virtual-npu.md), unless the real torch_npu is importable there. The command's exit code "
                   "is passed through; the running environment's bin folder comes first on PATH, so `python`, "
                   "`pytest` and `torchrun` are this environment's. "
                   "Example: op-plugin run -- python train.py --device npu")

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--devices", type=int, default=None, metavar="N",
                            help="number of virtual NPUs (sets OP_PLUGIN_VIRTUAL_NPU_COUNT; default 8)")
        parser.add_argument("argv", nargs=argparse.REMAINDER, metavar="-- CMD [ARGS...]",
                            help="the command to run, after --")

    def run(self, args: argparse.Namespace) -> int:
        argv = list(args.argv)
        if argv and argv[0] == "--":
            argv = argv[1:]
        if not argv:
            print("op-plugin run: no command given (usage: op-plugin run -- CMD [ARGS...])", file=sys.stderr)
            return 2
        env = dict(os.environ, OP_PLUGIN_VIRTUAL_NPU="1")
        # `python`, `pytest`, `torchrun` mean this environment's (where op_plugin and its entry point are).
        bin_dir = os.path.dirname(sys.executable)
        env["PATH"] = os.pathsep.join([bin_dir, env.get("PATH", "")]) if env.get("PATH") else bin_dir
        if args.devices is not None:
            env["OP_PLUGIN_VIRTUAL_NPU_COUNT"] = str(args.devices)
        try:
            return subprocess.run(argv, env=env, check=False).returncode
        except FileNotFoundError:
            print(f"op-plugin run: command not found: {argv[0]}", file=sys.stderr)
            return 127
        except KeyboardInterrupt:
            return 130

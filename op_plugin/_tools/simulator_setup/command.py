"""`op-plugin setup-simulator`."""
from __future__ import annotations

import sys

from .._shared.command import Command


class SetupSimulatorCommand(Command):
    name = "setup-simulator"
    help = "download and unpack the pinned torch-npu wheel the CPU simulator runs TorchAir from"
    description = ("Unpacks torch-npu (pinned) beside the environment, never into it: TorchAir and the wheel's "
                   "schemas, Meta functions and CANN headers become available to the simulator without "
                   "torch_npu being importable (an importable torch_npu makes `import torch` load the NPU runtime).")

    def add_arguments(self, parser) -> None:
        parser.add_argument("target", nargs="?", default=None,
                            help="folder to unpack into (default: beside the running Python environment)")

    def run(self, args) -> int:
        from ..._simulator.hosting.install import install_simulator

        try:
            folder = install_simulator(args.target)
        except RuntimeError as error:
            print(f"op_plugin: {error}", file=sys.stderr)
            return 1
        print(f"op_plugin: simulator ready in {folder}")
        return 0

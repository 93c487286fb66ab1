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

        refusal = target_refusal(args.target)
        if refusal is not None:
            print(f"error: {refusal}", file=sys.stderr)
            return 2
        try:
            folder = install_simulator(args.target)
        except RuntimeError as error:
            print(f"op_plugin: {error}", file=sys.stderr)
            return 1
        print(f"op_plugin: simulator ready in {folder}")
        return 0


def target_refusal(target: str | None) -> str | None:
    """Why TARGET cannot be unpacked into: it exists and is no folder, or it is a folder holding files that
    are not an unpack of the wheel (the install replaces an incomplete unpack by removing the folder, so
    anyone else's files there would be deleted). None when it can."""
    import os
    from pathlib import Path

    from ..._base.paths import shown

    if target is None:
        return None
    folder = Path(target)
    if not folder.exists():
        return None
    if not folder.is_dir():
        return f"{shown(target)}: TARGET exists and is not a folder; give a new or empty folder"
    names = {p.name for p in folder.iterdir()}
    # what the wheel unpacks (torch_npu, its dist-info, bin, torchnpugen) and the install's marker
    ours = {name for name in names if name in ("torch_npu", "bin", "torchnpugen", ".op-plugin-simulator-complete")
            or name.startswith("torch_npu-")}
    if names - ours:
        others = sorted(names - ours)
        return (f"{shown(os.path.join(target, others[0]))}: TARGET holds files that are not an unpacked torch-npu "
                f"wheel ({len(others)}), which setup-simulator would remove with an incomplete unpack; give a new "
                "or empty folder")
    return None

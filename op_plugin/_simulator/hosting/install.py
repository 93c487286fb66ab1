"""Unpack the pinned torch-npu wheel into a side folder for the CPU simulator.

    python -m op_plugin._simulator.hosting.install [TARGET_DIR]

The simulator needs TorchAir's Python sources, which ship inside the torch-npu wheel.
The wheel must never be installed into site-packages: torch would auto-load its
``torch.backends`` entry point and ``import torch`` would fail on a host without CANN.
So it is unpacked with ``pip install --no-deps --target DIR``; its dist-info is then not
on ``sys.path`` and nothing loads it behind our back.

A marker file written after a complete unpack makes a second call a cheap no-op.
The unpack goes to a temporary sibling folder that is renamed into place at the end,
so an interrupted install never leaves a half-filled folder that looks complete.
"""

from __future__ import annotations

import compileall
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from ..._base.wheel import ENV_VAR, TORCH_NPU_VERSION, missing_parts, simulator_dir, torchair_parent

__all__ = ["ENV_VAR", "TORCH_NPU_VERSION", "install_simulator", "missing_parts", "simulator_dir", "torchair_parent"]
TORCH_NPU_REQUIREMENT = f"torch-npu=={TORCH_NPU_VERSION}"
MARKER_NAME = ".op-plugin-simulator-complete"
INSTALL_HINT = "run `make setup` or `op-plugin setup-simulator`"

def _marker_ok(folder: Path) -> bool:
    marker = folder / MARKER_NAME
    try:
        content = json.loads(marker.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return content.get("torch_npu") == TORCH_NPU_VERSION and sys.implementation.cache_tag in content.get("bytecode", ())


def _write_marker(folder: Path) -> None:
    payload = {"torch_npu": TORCH_NPU_VERSION, "requirement": TORCH_NPU_REQUIREMENT,
               "bytecode": [sys.implementation.cache_tag]}
    (folder / MARKER_NAME).write_text(json.dumps(payload) + "\n", encoding="utf-8")


def compile_bytecode(folder: Path) -> None:
    """Compile the TorchAir sources the simulator imports, as pip does for installed packages.

    The wheel is unpacked with --no-compile (most of torch_npu is never imported here), and with
    PYTHONDONTWRITEBYTECODE set no process would ever write the bytecode: every process would
    recompile ~1,000 files (seconds). compileall writes .pyc files whatever that variable says.
    """
    tree = torchair_parent(folder) / "torchair"
    if not compileall.compile_dir(str(tree), quiet=1, workers=0):
        raise RuntimeError(f"compiling the simulator's TorchAir sources in {tree} to bytecode failed")


def _pip_unpack(target: Path) -> None:
    command = [
        sys.executable, "-m", "pip", "install",
        "--no-deps", "--no-compile", "--disable-pip-version-check", "--no-input",
        "--target", str(target), TORCH_NPU_REQUIREMENT,
    ]
    result = subprocess.run(command, check=False)
    if result.returncode != 0:
        raise RuntimeError(
            f"installing the simulator failed: `{' '.join(command)}` exited with {result.returncode}"
        )


def install_simulator(target: str | os.PathLike | None = None, *, quiet: bool = False) -> Path:
    """Make sure torch-npu (pinned) is unpacked into ``target`` (default: ``simulator_dir()``).

    Idempotent: with the marker present it returns at once. A folder that already holds a
    complete unpack of the pinned version (but no marker) is accepted and marked.
    Never touches site-packages. Returns the folder.
    """
    folder = Path(target) if target is not None else simulator_dir()
    if _marker_ok(folder) and not missing_parts(folder):
        return folder
    if not missing_parts(folder):  # unpacked, but not compiled for this interpreter (or unmarked)
        compile_bytecode(folder)
        _write_marker(folder)
        return folder

    folder.parent.mkdir(parents=True, exist_ok=True)
    if not quiet:
        print(f"op_plugin: unpacking {TORCH_NPU_REQUIREMENT} into {folder}", file=sys.stderr)
    staging = Path(tempfile.mkdtemp(prefix=f".{folder.name}.partial-", dir=folder.parent))
    try:
        _pip_unpack(staging)
        still_missing = missing_parts(staging)
        if still_missing:
            raise RuntimeError(f"the unpacked torch-npu wheel lacks {still_missing}")
        compile_bytecode(staging)
        _write_marker(staging)
        if folder.exists():  # an incomplete leftover: replace it
            shutil.rmtree(folder)
        staging.rename(folder)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    return folder


def main(argv: list[str] | None = None) -> int:
    """Command line: ``python -m op_plugin._simulator.hosting.install [TARGET]``."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) > 1 or (args and args[0].startswith("-")):
        print("usage: python -m op_plugin._simulator.hosting.install [TARGET_DIR]", file=sys.stderr)
        return 2
    try:
        folder = install_simulator(args[0] if args else None)
    except RuntimeError as error:
        print(f"op_plugin: {error}", file=sys.stderr)
        return 1
    print(f"op_plugin: simulator ready in {folder}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Where the pinned torch-npu wheel is unpacked on a CPU host (by `op_plugin._simulator.hosting.install`).

Kept at the bottom of the import layers because several stages read files from it without importing
anything in it: the GE prototypes (`_ge.builtin_prototypes`), torch_npu's schemas and Meta functions
(`_simulator.npu`), and the CANN headers the generated C++ is compiled against (`_tools`).
"""
from __future__ import annotations

import os
import sys
import warnings
from pathlib import Path

TORCH_NPU_VERSION = "2.13.0"
ENV_VAR = "OP_PLUGIN_SIMULATOR_DIR"


class SimulatorDirWarning(UserWarning):
    """$OP_PLUGIN_SIMULATOR_DIR names something that is not a folder."""


_warned: set[str] = set()


def simulator_dir() -> Path:
    """Folder holding the unpacked torch-npu wheel ($OP_PLUGIN_SIMULATOR_DIR overrides). An override that is
    not a folder is warned about, once per value: without it torch_npu's operators are not defined on a CPU
    host (torch.ops.npu.npu_rms_norm is then an AttributeError naming neither the variable nor the folder)
    and npugraph cannot compile; the default folder missing is the normal state before `make setup`."""
    override = os.environ.get(ENV_VAR)
    if override:
        folder = Path(override)
        if override not in _warned and not folder.is_dir() and not installing_it():
            _warned.add(override)
            from .paths import shown

            warnings.warn(f"${ENV_VAR} is '{shown(override)}', which is not a folder: until it names the folder "
                          "`op-plugin setup-simulator` unpacked the torch-npu wheel into, torch_npu's operators "
                          "(torch.ops.npu.*) are not defined and npugraph cannot compile on this CPU host; run "
                          f"`op-plugin setup-simulator '{shown(override)}'`, or unset it for the default folder",
                          SimulatorDirWarning, stacklevel=2)
        return folder
    return Path(sys.prefix) / "op-plugin-simulator" / f"torch-npu-{TORCH_NPU_VERSION}"


def torchair_parent(folder: Path) -> Path:
    """The folder that must be on sys.path for ``import torchair`` (TorchAir imports itself top-level)."""
    return folder / "torch_npu" / "dynamo"


# Files whose presence shows that TorchAir's sources were unpacked, relative to the folder.
_TORCHAIR_PARTS = "torch_npu/dynamo/torchair"
REQUIRED_FILES = (
    f"{_TORCHAIR_PARTS}/__init__.py",
    f"{_TORCHAIR_PARTS}/core/_backend.py",
    f"{_TORCHAIR_PARTS}/_ge_concrete_graph/ge_ir_pb2.py",
    f"{_TORCHAIR_PARTS}/npu_fx_compiler.py",
)


def missing_parts(folder: Path) -> list[str]:
    """What is missing for the folder to be a usable simulator; empty when it is complete."""
    if not folder.is_dir():
        return [str(folder)]
    missing = [name for name in REQUIRED_FILES if not (folder / name).is_file()]
    installed = _unpacked_version(folder)
    if installed != TORCH_NPU_VERSION:
        missing.append(f"torch_npu-{TORCH_NPU_VERSION}.dist-info (found version {installed})")
    return missing


def _unpacked_version(folder: Path) -> str | None:
    metadata = folder / f"torch_npu-{TORCH_NPU_VERSION}.dist-info" / "METADATA"
    if not metadata.is_file():
        return None
    with metadata.open(encoding="utf-8") as handle:
        for line in handle:
            if line.startswith("Version:"):
                return line.split(":", 1)[1].strip()
            if not line.strip():  # end of the header block
                break
    return None


def installing_it() -> bool:
    """This process is the installer of the wheel (`op-plugin setup-simulator`, `python -m
    op_plugin._simulator.hosting.install`): what is missing is what it is about to unpack, so nothing warns."""
    argv = list(getattr(sys, "orig_argv", sys.argv))
    if "-m" in argv[:-1] and argv[argv.index("-m") + 1] == "op_plugin._simulator.hosting.install":
        return True
    return Path(sys.argv[0]).name == "op-plugin" and "setup-simulator" in sys.argv[1:2]

"""Where the pinned torch-npu wheel is unpacked on a CPU host (by `op_plugin._simulator.hosting.install`).

Kept at the bottom of the import layers because several stages read files from it without importing
anything in it: the GE prototypes (`_ge.builtin_prototypes`), torch_npu's schemas and Meta functions
(`_simulator.npu`), and the CANN headers the generated C++ is compiled against (`_tools`).
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

TORCH_NPU_VERSION = "2.13.0"
ENV_VAR = "OP_PLUGIN_SIMULATOR_DIR"


def simulator_dir() -> Path:
    """Folder holding the unpacked torch-npu wheel ($OP_PLUGIN_SIMULATOR_DIR overrides)."""
    override = os.environ.get(ENV_VAR)
    if override:
        return Path(override)
    return Path(sys.prefix) / "op-plugin-simulator" / f"torch-npu-{TORCH_NPU_VERSION}"


def torchair_parent(folder: Path) -> Path:
    """The folder that must be on sys.path for ``import torchair`` (TorchAir imports itself top-level)."""
    return folder / "torch_npu" / "dynamo"

"""`op-plugin --version`: op_plugin's version and the versions it was built and tested with.

The pins are read from where they are set, never restated: the installed distribution's metadata
(op_plugin and its torch requirement), the torch-npu wheel the simulator unpacked (`_base.wheel`) and
that wheel's own metadata (its torch requirement; the branch its README names, which carries the
Ascend/CANN release the build matches). docs/compatibility.md explains the table.
"""
from __future__ import annotations

import importlib.metadata
import platform
import re

from ..._base.installed import ShadowedTorchNpu, real_torch_npu
from ..._base.wheel import TORCH_NPU_VERSION, simulator_dir

_BRANCH = re.compile(r"-b (v\d[\w.]*-[\w.]+)")   # `git clone ... -b v2.13.0-26.2.0` in the wheel's README


def _installed(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def _wheel_metadata() -> str | None:
    path = simulator_dir() / f"torch_npu-{TORCH_NPU_VERSION}.dist-info" / "METADATA"
    try:
        return path.read_text(encoding="utf-8")
    except OSError:
        return None


def version_lines() -> list[str]:
    """One line per component, e.g. `torch 2.13.0 (required: torch==2.13.0)`."""
    import op_plugin

    requires = importlib.metadata.requires("op_plugin") or []
    torch_pin = next((r for r in requires if r.replace(" ", "").startswith("torch==")), "torch (not pinned)")
    lines = [f"op-plugin {op_plugin.__version__}",
             f"python {platform.python_version()}",
             f"torch {_installed('torch') or 'not installed'} (required: {torch_pin})"]
    try:
        npu = _installed("torch_npu") if real_torch_npu() else None
    except ShadowedTorchNpu as error:
        lines.append(f"torch_npu: {error}")
        npu = None
    if npu:
        lines.append(f"torch_npu {npu} (installed: TorchAir from it on an Ascend host)")
    metadata = _wheel_metadata()
    if metadata is None:
        from ..._simulator.hosting.install import INSTALL_HINT  # the one install hint, as errors give it

        lines.append(f"simulator: torch-npu {TORCH_NPU_VERSION} wheel not unpacked at {simulator_dir()} "
                     f"({INSTALL_HINT})")
        return lines
    branch = _BRANCH.search(metadata)
    torch_req = next((line.split(":", 1)[1].strip() for line in metadata.splitlines()
                      if line.startswith("Requires-Dist: torch")), "?")
    lines.append(f"simulator: torch-npu {TORCH_NPU_VERSION} wheel (its TorchAir; requires {torch_req}; "
                 f"source branch {branch.group(1) if branch else '?'}) at {simulator_dir()}")
    return lines

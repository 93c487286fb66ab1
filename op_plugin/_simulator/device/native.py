"""Where the virtual NPU's C++ part is built and how it is loaded.

The sources are `csrc/*.cpp` (and `csrc/virtual_npu.h`) beside this module; `build.py` compiles them with
`torch.utils.cpp_extension` into a fixed folder under the running environment,
`<sys.prefix>/op-plugin-virtual-npu/` (`OP_PLUGIN_VIRTUAL_NPU_DIR` overrides), and writes a stamp
naming the sources' digest and the torch version. `load_native()` loads that build and refuses a
missing or stale one with an error naming `make setup` and the build command. This module imports
only the standard library at its top: the autoload entry point's activation starts here.
"""
from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import json
import os
import sys
from pathlib import Path

EXTENSION_NAME = "op_plugin_virtual_npu_C"
DIR_VAR = "OP_PLUGIN_VIRTUAL_NPU_DIR"
BUILD_COMMAND = "python -m op_plugin._simulator.device.build"
STAMP_NAME = "built.json"


class VirtualNpuUnavailable(RuntimeError):
    """The virtual NPU was asked for but its C++ part is not built (or was built from other sources)."""


def build_dir() -> Path:
    """The folder holding the built extension ($OP_PLUGIN_VIRTUAL_NPU_DIR overrides)."""
    override = os.environ.get(DIR_VAR)
    return Path(override) if override else Path(sys.prefix) / "op-plugin-virtual-npu"


def source_paths() -> list[Path]:
    """The C++ sources compiled into the extension."""
    return sorted((Path(__file__).resolve().parent / "csrc").glob("*.cpp"))


def source_digest() -> str:
    """What a build must match: the C++ sources and header, the torch version and the Python ABI."""
    import torch

    digest = hashlib.sha256()
    for path in sorted((Path(__file__).resolve().parent / "csrc").glob("*.[ch]*")):
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    digest.update(torch.__version__.encode())
    digest.update(sys.implementation.cache_tag.encode())
    return digest.hexdigest()


def built_library(folder: Path | None = None) -> Path | None:
    """The built shared library when a build matching today's source is in `folder`, else None."""
    folder = build_dir() if folder is None else folder
    try:
        stamp = json.loads((folder / STAMP_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    library = folder / stamp.get("library", "")
    if stamp.get("digest") != source_digest() or not library.is_file():
        return None
    return library


def load_native():
    """The loaded extension module (loaded once per process)."""
    loaded = sys.modules.get(EXTENSION_NAME)
    if loaded is not None:
        return loaded
    library = built_library()
    if library is None:
        raise VirtualNpuUnavailable(
            f"OP_PLUGIN_VIRTUAL_NPU=1 asks for the virtual NPU, but its C++ part is not built in {build_dir()} "
            f"(or was built from other sources or another torch): run `make setup` or `{BUILD_COMMAND}`")
    spec = importlib.util.spec_from_file_location(
        EXTENSION_NAME, library, loader=importlib.machinery.ExtensionFileLoader(EXTENSION_NAME, str(library)))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sys.modules[EXTENSION_NAME] = module
    return module

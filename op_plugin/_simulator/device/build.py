"""Build the virtual NPU's C++ part: `python -m op_plugin._simulator.device.build [--force] [--quiet]`.

`make setup` runs it after the simulator install. It compiles `csrc/*.cpp` with
`torch.utils.cpp_extension` (ninja when available, which torch's builder prefers; g++ and the
headers of the installed torch are enough) into `native.build_dir()`, then writes the stamp
`native.load_native()` checks. Idempotent: a build matching today's source returns at once.
The build runs in a child process so the process that asks for it never loads the extension
(loading it registers PrivateUse1 kernels process-wide).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from .native import EXTENSION_NAME, STAMP_NAME, build_dir, built_library, source_digest, source_paths

_CHILD = """
import sys, torch.utils.cpp_extension as ext
ext.load(name=sys.argv[1], sources=sys.argv[2].split("|"), build_directory=sys.argv[3], extra_cflags=["-O2"],
         verbose=sys.argv[4] == "1", is_python_module=True)
"""


def build(folder: Path | None = None, *, force: bool = False, verbose: bool = False) -> Path:
    """Build (unless a matching build exists) and return the shared library's path."""
    folder = build_dir() if folder is None else Path(folder)
    existing = built_library(folder)
    if existing is not None and not force:
        return existing
    folder.mkdir(parents=True, exist_ok=True)
    (folder / STAMP_NAME).unlink(missing_ok=True)
    # ninja (the `test` extra installs it) is found on PATH: this environment's bin folder first.
    bin_dir = os.path.dirname(sys.executable)
    env = dict(os.environ, PATH=os.pathsep.join(filter(None, [bin_dir, os.environ.get("PATH")])))
    sources = "|".join(str(path) for path in source_paths())
    result = subprocess.run([sys.executable, "-c", _CHILD, EXTENSION_NAME, sources, str(folder),
                             "1" if verbose else "0"], capture_output=not verbose, text=True, check=False, env=env)
    library = folder / f"{EXTENSION_NAME}.so"
    if result.returncode != 0 or not library.is_file():
        detail = "" if verbose else f"\n{result.stdout}\n{result.stderr}"
        raise RuntimeError(f"building the virtual NPU's C++ part in {folder} failed{detail}")
    stamp = {"digest": source_digest(), "library": library.name, "sources": [p.name for p in source_paths()]}
    (folder / STAMP_NAME).write_text(json.dumps(stamp) + "\n", encoding="utf-8")
    return library


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m op_plugin._simulator.device.build", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--force", action="store_true", help="rebuild even when a matching build exists")
    parser.add_argument("--verbose", action="store_true", help="show the compiler's commands and output")
    args = parser.parse_args(argv)
    started = time.monotonic()
    try:
        library = build(force=args.force, verbose=args.verbose)
    except RuntimeError as error:
        print(f"op_plugin: {error}", file=sys.stderr)
        return 1
    print(f"op_plugin: virtual NPU extension ready: {library} ({time.monotonic() - started:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

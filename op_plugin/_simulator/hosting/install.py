"""Unpack the pinned torch-npu wheel into a side folder for the CPU simulator.

    python -m op_plugin._simulator.hosting.install [TARGET_DIR]

The simulator needs TorchAir's Python sources, which ship inside the torch-npu wheel.
The wheel must never be installed into site-packages: torch would auto-load its
``torch.backends`` entry point and ``import torch`` would fail on a host without CANN.
So it is unpacked with ``pip install --no-deps --target DIR``; its dist-info is then not
on ``sys.path`` and nothing loads it behind our back.

A marker file written after a complete unpack makes a second call a cheap no-op, and says the folder is
ours. The folder is never deleted or written into unless it is ours or empty:

* the unpack goes to a staging folder beside it (``.NAME.partial-*``, holding a staging marker from its
  first moment), swapped in with ``os.replace`` only once complete: an interrupted install leaves no
  half-filled folder that looks complete, and never touches the target;
* an existing target is replaced only when it holds our marker (an older or damaged unpack), and only
  what this installer created is removed (the replaced unpack, staging folders of dead installers);
* a non-empty folder without our marker (a user's files, ``$OP_PLUGIN_SIMULATOR_DIR`` or a TARGET given by
  mistake) is refused by name, before anything is downloaded;
* two installers (processes) take turns on a lock file beside the folder (``.NAME.install-lock``); the
  second finds the first one's complete unpack and returns.
"""

from __future__ import annotations

import compileall
import contextlib
import fcntl
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from ..._base.paths import shown
from ..._base.wheel import ENV_VAR, TORCH_NPU_VERSION, missing_parts, simulator_dir, torchair_parent

__all__ = ["ENV_VAR", "TORCH_NPU_VERSION", "install_simulator", "missing_parts", "simulator_dir", "torchair_parent"]
TORCH_NPU_REQUIREMENT = f"torch-npu=={TORCH_NPU_VERSION}"
MARKER_NAME = ".op-plugin-simulator-complete"
STAGING_MARKER_NAME = ".op-plugin-simulator-staging"  # in a staging folder until it is swapped in
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
        raise RuntimeError(f"compiling the simulator's TorchAir sources in {shown(tree)} to bytecode failed")


def _pip_unpack(target: Path) -> None:
    command = [
        sys.executable, "-m", "pip", "install",
        "--no-deps", "--no-compile", "--disable-pip-version-check", "--no-input",
        "--target", str(target), TORCH_NPU_REQUIREMENT,
    ]
    result = subprocess.run(command, check=False)
    if result.returncode != 0:
        raise RuntimeError(
            f"installing the simulator failed: `{' '.join(shown(part) for part in command)}` exited with "
            f"{result.returncode}"
        )


def _ours(folder: Path) -> bool:
    """The folder was made by this installer: it holds our marker (any version: an older unpack)."""
    return (folder / MARKER_NAME).is_file()


def _refusal(folder: Path) -> str | None:
    """Why `folder` cannot be unpacked into: it is no folder, or a non-empty folder that is not ours."""
    if not folder.exists() and not folder.is_symlink():
        return None
    if not folder.is_dir():
        return (f"{shown(folder)} exists and is not a folder; the simulator is unpacked into a folder: "
                "give a new or empty folder (or unset $" + ENV_VAR + ")")
    if _ours(folder) or not any(folder.iterdir()):
        return None
    return (f"{shown(folder)} holds files and is not an unpack made by op_plugin (no {MARKER_NAME} in it), so "
            "op_plugin will not unpack the simulator there: it never deletes or overwrites files it did not "
            f"create. Give a new or empty folder (`op-plugin setup-simulator NEW_DIR` and ${ENV_VAR}=NEW_DIR), "
            f"or unset ${ENV_VAR} for the default folder")


@contextlib.contextmanager
def _install_lock(folder: Path, quiet: bool):
    """One installer at a time per folder (processes too): an exclusive lock on a file beside it."""
    lock_path = folder.parent / f".{folder.name}.install-lock"
    with open(lock_path, "a+b") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if not quiet:
                print(f"op_plugin: waiting for another installer of {shown(folder)} to finish", file=sys.stderr)
            fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _remove_dead_leftovers(folder: Path) -> None:
    """Staging and replaced folders that installers killed mid-way left, recognised as ours by a marker (the
    lock is held, so no live installer is using one)."""
    for pattern in (f".{folder.name}.partial-*", f".{folder.name}.replaced-*"):
        for leftover in folder.parent.glob(pattern):
            if leftover.is_dir() and not leftover.is_symlink() and (
                    (leftover / STAGING_MARKER_NAME).is_file() or _ours(leftover)):
                shutil.rmtree(leftover, ignore_errors=True)


def _swap_in(staging: Path, folder: Path) -> None:
    """Put the complete `staging` at `folder`: os.replace (atomic) onto a missing or empty folder, which fails
    rather than replace a folder someone filled meanwhile; an older unpack of ours is first renamed aside
    (atomic too), then removed."""
    try:
        if folder.is_dir() and any(folder.iterdir()):
            if not _ours(folder):  # checked before the download; checked again here, just before replacing
                raise RuntimeError(_refusal(folder))
            aside = Path(tempfile.mkdtemp(prefix=f".{folder.name}.replaced-", dir=folder.parent))
            os.replace(folder, aside)  # onto the new empty folder: the old unpack moves aside whole
            os.replace(staging, folder)
            shutil.rmtree(aside, ignore_errors=True)
            return
        os.replace(staging, folder)
    except OSError as error:  # e.g. files appeared in the empty folder: nothing of it was changed
        raise RuntimeError(f"could not put the unpacked simulator at {shown(folder)}: {error.strerror}; "
                           "nothing there was changed: give a new or empty folder and run the install again") from None


def install_simulator(target: str | os.PathLike | None = None, *, quiet: bool = False) -> Path:
    """Make sure torch-npu (pinned) is unpacked into ``target`` (default: ``simulator_dir()``).

    Idempotent: with the marker present it returns at once. A folder that already holds a
    complete unpack of the pinned version (but no marker) is accepted and marked. A non-empty folder
    that is neither is refused (RuntimeError naming it): nothing of it is changed.
    Never touches site-packages. Returns the folder.
    """
    given = Path(target) if target is not None else simulator_dir()
    if _marker_ok(given) and not missing_parts(given):
        return given
    refusal = _refusal(given)
    if refusal is not None and missing_parts(given):
        raise RuntimeError(refusal)
    folder = Path(os.path.realpath(given))  # a symlink's target is installed into; the link stays
    folder.parent.mkdir(parents=True, exist_ok=True)
    with _install_lock(folder, quiet):
        if _marker_ok(folder) and not missing_parts(folder):  # another installer finished meanwhile
            return given
        if not missing_parts(folder):  # unpacked, but not compiled for this interpreter (or unmarked)
            compile_bytecode(folder)
            _write_marker(folder)
            return given
        _remove_dead_leftovers(folder)
        refusal = _refusal(folder)
        if refusal is not None:
            raise RuntimeError(refusal)
        if not quiet:
            print(f"op_plugin: unpacking {TORCH_NPU_REQUIREMENT} into {shown(folder)}", file=sys.stderr)
        staging = Path(tempfile.mkdtemp(prefix=f".{folder.name}.partial-", dir=folder.parent))
        try:
            (staging / STAGING_MARKER_NAME).write_text("op_plugin's unpack in progress\n", encoding="utf-8")
            _pip_unpack(staging)
            still_missing = missing_parts(staging)
            if still_missing:
                raise RuntimeError(f"the unpacked torch-npu wheel lacks {still_missing}")
            compile_bytecode(staging)
            _write_marker(staging)
            (staging / STAGING_MARKER_NAME).unlink()
            _swap_in(staging, folder)
        finally:
            if staging.is_dir():  # a failed unpack: only the staging folder, ours, is removed
                shutil.rmtree(staging, ignore_errors=True)
    return given


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
    print(f"op_plugin: simulator ready in {shown(folder)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

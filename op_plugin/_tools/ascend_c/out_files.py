"""Writing generated files into a user's `--out` folder without following links planted there.

`op-plugin opproto` and `op-plugin msopgen` write a handful of files into a folder the user names,
which may already hold files (a previous run) and links (anyone who could write there). Each file
is written to a fresh temporary name in the folder (created exclusively, so an existing file or
link under that name is never opened) and then renamed over its target: a rename replaces a
directory entry, it never writes through a link or into another file's hard link. A target that
is a symbolic link or not a regular file is refused before anything is written, and so is any
existing target on the command line unless --force is given, so a run writes all of its files or
none (up to a failing disk).
"""
from __future__ import annotations

import errno
import os
import secrets
import stat
from pathlib import Path


def write_files(out_dir: str | Path, files: dict[str, str], replace: bool = True) -> list[Path]:
    """Write `files` (file name -> text) into `out_dir`; returns the paths in order.

    Raises OSError naming the path: the folder cannot be made, a name is taken by a link, a folder
    or another non-regular file (or, unless `replace`, by any file: the command line's default, where
    --force replaces), two names differ only in case, or the write fails."""
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise NotADirectoryError(errno.ENOTDIR, "exists and is not a folder", str(out))
    out.mkdir(parents=True, exist_ok=True)
    folded: dict[str, str] = {}
    for name in files:
        if not name or name in (".", "..") or "/" in name or "\\" in name or "\0" in name:
            raise ValueError(f"generated file name {name!r} is not a plain file name")  # a generator bug
        other = folded.setdefault(name.casefold(), name)
        if other != name:  # the same file on a case-insensitive file system
            raise FileExistsError(errno.EEXIST, f"two generated files differ only in case ({other}, {name})",
                                  str(out / name))
    targets = [out / name for name in files]
    for target in targets:
        try:
            mode = os.lstat(target).st_mode
        except FileNotFoundError:
            continue
        if stat.S_ISLNK(mode):
            raise OSError(errno.ELOOP, "is a symbolic link; generated files are not written through links "
                          "(remove it or choose another --out)", str(target))
        if not stat.S_ISREG(mode):
            raise IsADirectoryError(errno.EISDIR, "exists and is not a regular file", str(target))
        if not replace:
            raise FileExistsError(errno.EEXIST, "exists; pass --force to replace it", str(target))
    for target, text in zip(targets, files.values(), strict=True):
        _replace(target, text.encode("utf-8"))
    return targets


def _replace(target: Path, data: bytes) -> None:
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    partial = target.with_name(f".{target.name}.{secrets.token_hex(6)}.tmp")
    fd = os.open(partial, flags, 0o666)  # the umask applies, as for any file the user writes
    try:
        with os.fdopen(fd, "wb") as stream:
            stream.write(data)
        os.replace(partial, target)
    except BaseException:
        try:
            os.unlink(partial)
        except OSError:
            pass
        raise

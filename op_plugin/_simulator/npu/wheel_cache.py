"""Authenticated cache files beside the unpacked wheel: what op_plugin derives from the wheel's files once (the
compiled Meta functions, `wheel_meta`; the registered schemas, `registered_schemas`) and reads back in later
processes.

A file is `MAGIC + HMAC(user's key, cache key + payload) + payload`. It is only used when it carries this user's
HMAC over its key and contents (the key lives in the user's own cache folder, `secret`), so a file someone else put
there is never read as ours; one that is unreadable, unauthenticated or malformed is stale: the caller rebuilds it
and writes it again. Writes go to a private temporary file renamed over the entry (`os.replace` replaces a link
planted at the path, never writes through it); a cache that cannot be written only costs the rebuild next time.
"""
from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import stat
from pathlib import Path

CACHE_DIR = ".op-plugin-cache"
MAGIC = b"op-plugin meta cache 2\n"
_SECRET_BYTES = 32


def secret() -> bytes | None:
    """This user's key for the cache's HMAC: 32 random bytes in a file only the user can read,
    in `$XDG_CACHE_HOME/op-plugin` (default ~/.cache/op-plugin), made on first use. None (no
    cache at all) when it cannot be made or is not private to the user."""
    folder = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "op-plugin"
    path = folder / "meta-cache.key"
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        key = _read_private(path)
        if key is None:
            partial = folder / f".meta-cache.key.{os.getpid()}.{secrets.token_hex(4)}"
            fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
            with os.fdopen(fd, "wb") as stream:
                stream.write(secrets.token_bytes(_SECRET_BYTES))
            try:
                os.link(partial, path)  # fails if another process made one first: theirs is used
            except FileExistsError:
                pass
            finally:
                os.unlink(partial)
            key = _read_private(path)
    except (OSError, RuntimeError):
        return None
    return key


def _read_private(path: Path) -> bytes | None:
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except FileNotFoundError:
        return None
    with os.fdopen(fd, "rb") as stream:
        info = os.fstat(stream.fileno())
        data = stream.read(_SECRET_BYTES + 1)
    if (not stat.S_ISREG(info.st_mode) or (hasattr(os, "getuid") and info.st_uid != os.getuid())
            or info.st_mode & 0o077 or len(data) != _SECRET_BYTES):
        raise RuntimeError(f"{path} is not a private key file of this user")
    return data


def mac(key_bytes: bytes, key: str, payload: bytes) -> bytes:
    return hmac.new(key_bytes, key.encode() + b"\0" + payload, hashlib.sha256).digest()


def read(path: Path, key: str, key_bytes: bytes) -> bytes | None:
    """The payload of the cache file at `path` if this user wrote it for `key`, else None."""
    try:
        data = path.read_bytes()
    except OSError:
        return None
    head = len(MAGIC) + hashlib.sha256().digest_size
    if not data.startswith(MAGIC) or len(data) <= head:
        return None
    payload = data[head:]
    if not hmac.compare_digest(data[len(MAGIC):head], mac(key_bytes, key, payload)):
        return None
    return payload


def write(path: Path, key: str, key_bytes: bytes, payload: bytes) -> None:
    try:
        path.parent.mkdir(exist_ok=True)
        partial = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
        fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o644)
        with os.fdopen(fd, "wb") as stream:
            stream.write(MAGIC + mac(key_bytes, key, payload) + payload)
        os.replace(partial, path)
    except OSError:
        pass

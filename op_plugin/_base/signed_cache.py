"""A folder of cache entries that op_plugin itself wrote, and nobody else: each entry is signed.

An entry is one JSON file named by its key (hex): `{"key": ..., "payload": {...}, "mac": ...}`, the MAC an
HMAC-SHA256 of the key and payload under a per-user secret. The secret lives outside the cache folder
(`<config dir>/op_plugin/cache-secret`, mode 0600), so a folder shared with, or written by, anyone who
cannot read the user's files yields entries that fail the check. A failed check (tampered, truncated,
written by another secret) is a miss with a warning, and the file is removed: nothing read from an entry is
used before its MAC is verified. The payload's contents are the caller's business (compile_cache: TorchAir's
generated source for a lowered graph).

Concurrency: an entry is written to a temporary file in the folder and renamed over its name (atomic on
POSIX), so readers see the whole old entry or the whole new one; two writers of one key write the same
bytes. Size: after a write, entries are removed least recently used first (a hit touches its file) until
the folder holds at most `max_bytes`.

Where this differs from inductor's FX graph cache (whose location and key conventions it otherwise
follows: a folder under the user's cache dir, a key that is a hash over auditable details): inductor trusts
the folder (pickles); this one trusts only what carries the user's MAC.
"""
from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import tempfile
import warnings
from pathlib import Path

from .paths import shown

_SECRET_BYTES = 32


def user_cache_root() -> Path:
    """`$XDG_CACHE_HOME` or ~/.cache, as inductor and pip place theirs."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")


def _user_config_root() -> Path:
    return Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")


def user_secret(path: Path | None = None) -> bytes:
    """The per-user signing secret, created once (0600; a racing creator's file wins)."""
    path = path or _user_config_root() / "op_plugin" / "cache-secret"
    try:
        return bytes.fromhex(path.read_text().strip())
    except (OSError, ValueError):
        pass
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # another process made it first (or it is unreadable: then fail loudly below)
        return bytes.fromhex(path.read_text().strip())
    with os.fdopen(descriptor, "w") as file:
        file.write(secrets.token_hex(_SECRET_BYTES))
    return bytes.fromhex(path.read_text().strip())


class SignedCache:
    """Entries under `folder`, signed with `secret`, at most `max_bytes` in all."""

    def __init__(self, folder: Path, secret: bytes, max_bytes: int):
        self.folder = Path(folder)
        self._secret = secret
        self.max_bytes = max_bytes

    def _mac(self, key: str, payload_text: str) -> str:
        return hmac.new(self._secret, f"{key}\n{payload_text}".encode(), hashlib.sha256).hexdigest()

    def path_of(self, key: str) -> Path:
        if not key.isalnum():
            raise ValueError(f"cache key must be alphanumeric, got {key!r}")
        return self.folder / f"{key}.json"

    def get(self, key: str) -> dict | None:
        """The payload stored under `key`, or None (missing, or refused with a warning and removed)."""
        path = self.path_of(key)
        try:
            text = path.read_text()
        except FileNotFoundError:
            return None
        except OSError as error:
            self._refuse(path, f"unreadable ({error.strerror})")
            return None
        try:
            entry = json.loads(text)
            payload_text, mac = entry["payload"], entry["mac"]
            valid = (isinstance(payload_text, str) and isinstance(mac, str) and entry.get("key") == key
                     and hmac.compare_digest(mac, self._mac(key, payload_text)))
        except (ValueError, KeyError, TypeError):
            valid = False
        if not valid:
            self._refuse(path, "its signature does not match (truncated, edited, or written with another "
                               "user's secret)")
            return None
        try:
            os.utime(path)  # least recently used goes first
        except OSError:
            pass
        return json.loads(payload_text)

    def put(self, key: str, payload: dict) -> None:
        """Store `payload` (JSON-serialisable) under `key`; failures to write are warnings, never errors."""
        payload_text = json.dumps(payload, sort_keys=True)
        text = json.dumps({"key": key, "payload": payload_text, "mac": self._mac(key, payload_text)})
        try:
            self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
            descriptor, temporary = tempfile.mkstemp(dir=self.folder, prefix=".writing-", suffix=".tmp")
            try:
                with os.fdopen(descriptor, "w") as file:
                    file.write(text)
                os.replace(temporary, self.path_of(key))
            except BaseException:
                Path(temporary).unlink(missing_ok=True)
                raise
        except OSError as error:
            warnings.warn(f"op_plugin compile cache: could not write to {shown(str(self.folder))} "
                          f"({error.strerror}); compiling without storing", RuntimeWarning, stacklevel=2)
            return
        self._evict()

    def entries(self) -> list[Path]:
        try:
            return [p for p in self.folder.iterdir() if p.suffix == ".json" and not p.name.startswith(".")]
        except OSError:
            return []

    def _evict(self) -> None:
        sized = []
        for path in self.entries():
            try:
                status = path.stat()
            except OSError:
                continue  # removed by another process meanwhile
            sized.append((status.st_mtime, status.st_size, path))
        total = sum(size for _, size, _ in sized)
        for _, size, path in sorted(sized, key=lambda item: item[0]):
            if total <= self.max_bytes:
                break
            path.unlink(missing_ok=True)
            total -= size

    def _refuse(self, path: Path, why: str) -> None:
        warnings.warn(f"op_plugin compile cache: ignored and removed the entry {shown(str(path))}: {why}",
                      RuntimeWarning, stacklevel=3)
        path.unlink(missing_ok=True)

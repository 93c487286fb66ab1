"""The schemas torch_npu registers for its ``npu::`` ops, read from the wheel's ``lib/libtorch_npu.so`` as text.

The codegen YAML (``wheel_meta.CODEGEN_YAML``) is torch_npu's source for its ops, but torch_npu's codegen
registers other strings with the dispatcher, and those are what an Ascend host's `torch.ops.npu.*` accept:

* a first argument ``Tensor self`` is registered as ``Tensor input`` (136 ops of torch-npu 2.13.0), so
  ``torch.ops.npu.npu_format_cast(input=x, acl_format=2)`` is the call that works on an NPU;
* a multi-output ``.out`` overload takes its outputs as one list, ``Tensor[] out`` (the YAML names each,
  ``Tensor(a!) attention_out, Tensor(b!) softmax_lse``): TorchAir's aclgraph pass and torch_npu's own graph
  handlers call ``npu_fused_infer_attention_score.out(..., workspace=w, out=[attention_out, softmax_lse])``.

The library is never loaded (it needs CANN): its NUL-terminated strings of the form ``name(...) -> ...`` are
found around each ``") -> "`` in a read-only map of the file (0.3 s for its 97 MB). `import op_plugin` defines the
ops on a CPU host, so the map is kept in an authenticated cache file beside the wheel (`wheel_cache`), keyed by the
library's path, size and modification time; a process reads it back in about a millisecond.
"""
from __future__ import annotations

import functools
import hashlib
import json
import mmap
import re
from pathlib import Path

from . import wheel_cache

LIBRARY = "lib/libtorch_npu.so"
_HEAD = re.compile(rb"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_]+)?\(")
_ARROW = b") -> "
_CACHE_VERSION = "1"


def registered_schemas(wheel_root: Path) -> dict[str, str]:
    """{op name with overload: the schema the library registers}; empty when the wheel has no library."""
    path = Path(wheel_root) / LIBRARY
    try:
        stat = path.stat()
    except OSError:
        return {}
    return dict(_schemas(str(path), stat.st_size, stat.st_mtime_ns))


@functools.lru_cache(maxsize=2)
def _schemas(path: str, size: int, mtime_ns: int) -> tuple[tuple[str, str], ...]:
    """The scan of the library, through the cache file (a replaced library has another key)."""
    key = hashlib.sha256(f"{path}|{size}|{mtime_ns}|{_CACHE_VERSION}".encode()).hexdigest()[:32]
    cache = Path(path).parent.parent / wheel_cache.CACHE_DIR / f"schemas-{key}.bin"
    secret = wheel_cache.secret()
    cached = _decoded(wheel_cache.read(cache, key, secret)) if secret is not None else None
    if cached is not None:
        return cached
    found = _scan(path)
    if secret is not None:
        wheel_cache.write(cache, key, secret, json.dumps(found).encode())
    return found


def _decoded(payload: bytes | None) -> tuple[tuple[str, str], ...] | None:
    """A cache file's pairs, or None (stale) unless it is a JSON list of [name, schema] strings."""
    if payload is None:
        return None
    try:
        pairs = json.loads(payload)
    except ValueError:
        return None
    if not isinstance(pairs, list) or not all(_is_pair(pair) for pair in pairs):
        return None
    return tuple((name, schema) for name, schema in pairs)


def _is_pair(pair) -> bool:
    return isinstance(pair, list) and len(pair) == 2 and all(isinstance(item, str) for item in pair)


def _scan(path: str) -> tuple[tuple[str, str], ...]:
    found: dict[str, str] = {}
    with open(path, "rb") as stream, mmap.mmap(stream.fileno(), 0, access=mmap.ACCESS_READ) as data:
        position = 0
        while (arrow := data.find(_ARROW, position)) >= 0:
            start = data.rfind(b"\0", 0, arrow) + 1
            end = data.find(b"\0", arrow)
            if end < 0:
                break
            position = end
            text = data[start:end]
            head = _HEAD.match(text)
            if head and all(32 <= byte < 127 for byte in text):
                found.setdefault(text[:head.end() - 1].decode(), text.decode())
    return tuple(found.items())

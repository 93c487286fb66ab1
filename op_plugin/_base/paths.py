"""Names from the file system in messages, and the kinds of file op_plugin refuses to read.

`shown(name)`: a file name as it may be printed. A name can hold any byte but `/` and NUL: newlines,
terminal escape sequences (ESC), bidirectional-text controls, and bytes that are not UTF-8 (which Python
carries as lone surrogates, and which a UTF-8 stream cannot even encode). Echoed raw, such a name forges
lines or recolours the terminal; so every one of them is shown as a Python-style escape (`\\x1b`,
`\\u202e`), and everything else is left as it is.

`special_kind(mode)`: what a path that is neither a regular file nor a folder is (a FIFO, a device, a
socket), for refusing it before it is opened for reading: a FIFO blocks the open or the read until a
writer comes, a device such as /dev/zero never ends.
"""
from __future__ import annotations

import os
import stat
import unicodedata

# Unicode categories shown escaped: controls, format characters (bidi overrides, zero-width), line and
# paragraph separators, surrogates (undecodable bytes of a file name).
_ESCAPED_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs"})


def _escape(char: str) -> str:
    code = ord(char)
    if 0xDC80 <= code <= 0xDCFF:  # os.fsdecode's stand-in for the byte code - 0xDC00
        return f"\\x{code - 0xDC00:02x}"
    if code <= 0xFF:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def shown(name) -> str:
    """`name` (a str, bytes or path) with every control, format and separator character escaped."""
    text = os.fsdecode(name) if isinstance(name, (bytes, os.PathLike)) else str(name)
    if text.isprintable():  # the common case: nothing to escape
        return text
    return "".join(_escape(c) if unicodedata.category(c) in _ESCAPED_CATEGORIES else c for c in text)


def special_kind(mode: int) -> str | None:
    """'a FIFO (named pipe)', 'a device', 'a socket or other special file' for such a mode; None for a regular
    file or a folder."""
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return None
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "a socket or other special file"


def special_file(path) -> str | None:
    """What `path` is when it exists and is a FIFO, a device or a socket (None otherwise). Asks `stat`, which
    never blocks, so nothing is opened."""
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):  # missing, unreadable, or a name the OS refuses (NUL): not special
        return None
    return special_kind(mode)


__all__ = ["shown", "special_file", "special_kind"]

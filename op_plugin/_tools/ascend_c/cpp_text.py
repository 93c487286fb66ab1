"""Values from a YAML file as C++ source text: string literals, integers, floats and comments.

Everything the generators write into C++ (`op-plugin opproto`, and the defaults msOpGen pastes
from `op-plugin msopgen`'s JSON) goes through here, so nothing a YAML author wrote can end a
literal or a comment early: the result is only ever the value it stands for, and it compiles
without a warning under `-Wall -Wextra` (no trigraph, no "integer constant is so large").
"""
from __future__ import annotations

import math

_PLAIN = frozenset(chr(c) for c in range(0x20, 0x7F)) - {'"', "\\", "?"}
_ESCAPES = {"\\": "\\\\", '"': '\\"', "?": "\\?", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
INT64_MIN = -(1 << 63)


def cpp_string_body(text: str) -> str:
    """`text` as the inside of a C++ string literal (between the quotes): printable ASCII as is,
    other characters as three-digit octal escapes of their UTF-8 bytes (a hex escape would run on
    into a following hex digit), `?` escaped so that `??/` is never a trigraph."""
    out = []
    for char in text:
        if char in _PLAIN:
            out.append(char)
        elif char in _ESCAPES:
            out.append(_ESCAPES[char])
        else:
            out.extend(f"\\{byte:03o}" for byte in char.encode("utf-8", "surrogateescape"))
    return "".join(out)


def cpp_string(text: str) -> str:
    return f'"{cpp_string_body(text)}"'


def cpp_int(value: int) -> str:
    """An int64 literal; INT64_MIN has none (its digits overflow before the minus applies)."""
    return "(-9223372036854775807 - 1)" if value == INT64_MIN else str(value)


def cpp_float(value: float) -> str:
    """A float literal (REG_OP Float attrs are float); inf and nan through std::numeric_limits."""
    value = float(value)
    if math.isnan(value):
        return "std::numeric_limits<float>::quiet_NaN()"
    if math.isinf(value):
        return ("-" if value < 0 else "") + "std::numeric_limits<float>::infinity()"
    return repr(value)


def comment_text(text: str) -> str:
    """`text` for a `//` comment: one line of printable ASCII (line breaks, other control and
    non-ASCII characters escaped as in Python), never ending in a backslash, which would splice
    the next line into the comment."""
    escaped = "".join(char if char in _PLAIN or char in '"?' else
                      char.encode("unicode_escape", "backslashreplace").decode("ascii") if char != "\\" else "\\\\"
                      for char in text)
    return escaped + " " if escaped.endswith("\\") else escaped

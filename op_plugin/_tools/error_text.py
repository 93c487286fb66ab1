"""Error messages for reports (`op-plugin test`): the message a user can act on, without the
tracebacks TorchAir's error wrapper and dynamo paste into their exceptions' text."""
from __future__ import annotations

import re

# Lines TorchAir's pretty_error_msg and dynamo append: a traceback copy, TorchAir's error-code log
# line (ERR03005 GRAPH internal error), dynamo's hints about verbose logs.
_NOISE = (
    re.compile(r"^\s*\[ERROR\] \d{4}-.*\bERR\d+\b.*$"),
    re.compile(r"^Set TORCHDYNAMO_VERBOSE=1.*$"),
    re.compile(r"^.*For even more developer context, set TORCH_LOGS=.*$"),
    re.compile(r"^\s*\(scroll up for stack trace\)\s*$"),
    re.compile(r"^You can suppress this exception and fall back to eager.*$"),
    re.compile(r"^\s*import torch\._dynamo\s*$"),
    re.compile(r"^\s*torch\._dynamo\.config\.suppress_errors = True\s*$"),
)


def clean_message(error: BaseException) -> str:
    """`Type: message` of the innermost cause worth showing, with traceback blocks and log lines
    removed; dynamo's BackendCompilerFailed is unwrapped to the backend's own error."""
    inner = error
    while type(inner).__name__ == "BackendCompilerFailed" and getattr(inner, "inner_exception", None) is not None:
        inner = inner.inner_exception
    lines, in_traceback = [], False
    for line in str(inner).splitlines():
        if line.startswith("Traceback (most recent call last):"):
            in_traceback = True
            continue
        if in_traceback:
            # a traceback block ends at its exception line: `Name: message`, not indented
            if line and not line[0].isspace() and not line.startswith("The above exception"):
                in_traceback = False
            continue
        if line.startswith(("The above exception was the direct cause", "During handling of the above")):
            continue
        if any(p.match(line) for p in _NOISE):
            continue
        lines.append(line.rstrip())
    text = "\n".join(dict.fromkeys(line for line in lines if line.strip()))  # TorchAir repeats its message
    return f"{type(inner).__name__}: {text.strip()}"

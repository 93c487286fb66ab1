"""Error messages for reports (`op-plugin test`): the message a user can act on, without the
tracebacks TorchAir's error wrapper and dynamo paste into their exceptions' text."""
from __future__ import annotations

import re
import traceback
from pathlib import Path

# Lines TorchAir's pretty_error_msg and dynamo append: a traceback copy, TorchAir's error-code log
# line (ERR03005 GRAPH internal error), dynamo's hints about verbose logs.
_NOISE = (
    re.compile(r"^\s*\[ERROR\] \d{4}-.*\bERR\d+\b.*$"),
    re.compile(r"^Set TORCHDYNAMO_VERBOSE=1.*$"),
    re.compile(r"^.*For even more developer context, set TORCH_LOGS=.*$"),
    re.compile(r"^\s*\(scroll up for stack trace\)\s*$"),
    re.compile(r"^You can suppress this exception and fall back to eager.*$"),
    re.compile(r"^Use tlparse to see full graph\..*$"),
    re.compile(r"^\s*import torch\._dynamo\s*$"),
    re.compile(r"^\s*torch\._dynamo\.config\.suppress_errors = True\s*$"),
)


_WHILE_EXECUTING = re.compile(r"^While executing %(\S+) : .*?target=([^\]]+)\]")


def origin(error: BaseException) -> str | None:
    """`file:line` where the error was first raised: the end of its cause/context chain (TorchAir's
    error wrapper re-raises a copy, so the copy's own last frame is the wrapper)."""
    seen, current = set(), error
    while True:
        inner = getattr(current, "inner_exception", None) or current.__cause__ or current.__context__
        if inner is None or id(inner) in seen:
            break
        seen.add(id(inner))
        current = inner
    frames = traceback.extract_tb(current.__traceback__) if current.__traceback__ else []
    return f"{Path(frames[-1].filename).name}:{frames[-1].lineno}" if frames else None


def clean_message(error: BaseException) -> str:
    """`Type: message` of the innermost cause worth showing, with traceback blocks and log lines
    removed; dynamo's BackendCompilerFailed is unwrapped to the backend's own error."""
    inner = error
    while type(inner).__name__ == "BackendCompilerFailed" and getattr(inner, "inner_exception", None) is not None:
        inner = inner.inner_exception
    lines, in_traceback = [], False
    for line in str(inner).splitlines():
        executing = _WHILE_EXECUTING.match(line)
        if executing:  # dynamo's note of the FX node, shortened; its "Original traceback" is dropped
            lines.append(f"(while lowering FX node %{executing.group(1)}: {executing.group(2)})")
            continue
        if line.startswith(("Traceback (most recent call last):", "Original traceback:")):
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

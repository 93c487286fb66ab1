"""Progress display for long work (compare, `op-plugin test`; others may adopt it): tqdm on a
terminal, nothing when stderr is not a TTY (CI logs, pipes) or OP_PLUGIN_PROGRESS=0.

    for item in progress(items, desc="checking", unit="case"):
        ...
    with progress_bar(total, desc="cases") as bar:
        bar.update(1); bar.set_postfix_str("last: ok")
"""
from __future__ import annotations

import os
import sys
from collections.abc import Iterable


def enabled() -> bool:
    setting = os.environ.get("OP_PLUGIN_PROGRESS", "").strip().lower()
    if setting in ("0", "false", "no", "off"):
        return False
    if setting in ("1", "true", "yes", "on"):
        return True
    return bool(getattr(sys.stderr, "isatty", lambda: False)())


def progress(items: Iterable, *, desc: str = "", unit: str = "it", total: int | None = None) -> Iterable:
    """`items`, with a progress bar on stderr when enabled(); short runs (under 2 s) leave none."""
    if not enabled():
        return items
    from tqdm import tqdm

    return tqdm(items, desc=desc, unit=unit, total=total, leave=False, delay=2.0, file=sys.stderr,
                dynamic_ncols=True)


class _Silent:
    def update(self, n: int = 1) -> None:
        pass

    def set_postfix_str(self, text: str) -> None:
        pass

    def write(self, text: str) -> None:
        print(text, file=sys.stderr)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        pass


def progress_bar(total: int, *, desc: str = "", unit: str = "it"):
    """A context manager with update(n) / set_postfix_str(text) / write(text); silent when not enabled()."""
    if not enabled():
        return _Silent()
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit=unit, leave=True, file=sys.stderr, dynamic_ncols=True)

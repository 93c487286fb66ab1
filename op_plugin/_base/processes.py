"""Child processes that end with their parent: `die_with_parent`, and `terminating_signals` for a parent.

A worker or rank process op_plugin starts (the declared-cases workers and the ranks they fork, the
distributed test tier's ranks, the command `op-plugin run` starts) must not outlive the process that
started it, however that one ends: Ctrl-C, SIGTERM from `timeout` or a CI limit, SIGHUP from a closed
terminal, or SIGKILL. A parent's cleanup (killing its children when interrupted) covers the first
three only when it runs, so each child also asks the kernel to signal it when its parent ends
(Linux's `prctl(PR_SET_PDEATHSIG)`, through ctypes). The kernel sends it when the *thread* that started
the child ends, so a child started from a worker thread must not outlive that thread (the declared-cases
pool stops each worker before its thread returns). Elsewhere (no prctl) `die_with_parent` does nothing and
the parents' own cleanup is all there is.
"""
from __future__ import annotations

import ctypes
import os
import signal
import sys

_PR_SET_PDEATHSIG = 1
PARENT_VARIABLE = "OP_PLUGIN_PARENT_PID"  # set by a parent for a child that is a new Python program


def _prctl():
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True).prctl  # libc's, among the program's own symbols
    except (OSError, AttributeError):
        return None


# Resolved once, here: a child just forked from a threaded process should not load anything.
_PRCTL = _prctl()


def die_with_parent(parent: int | None = None, sig: int = signal.SIGKILL) -> bool:
    """Have the kernel send `sig` to this process when its parent ends; True when that is arranged. When
    `parent` (the pid the parent had) is given and the parent has already ended (this process was adopted
    in between), this process ends now with `sig`."""
    if _PRCTL is None or _PRCTL(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0) != 0:
        return False
    if parent is not None and os.getppid() != parent:
        os.kill(os.getpid(), sig)
    return True


def die_with_parent_from_environment(sig: int = signal.SIGKILL) -> bool:
    """`die_with_parent` for a child whose parent put its pid in $OP_PLUGIN_PARENT_PID (no-op without it)."""
    text = os.environ.pop(PARENT_VARIABLE, "")
    if not text.isdigit():
        return False
    return die_with_parent(int(text), sig)


# The signals that end a command-line run from outside, beside Ctrl-C's SIGINT.
TERMINATING_SIGNALS = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name))


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP, raised in the main thread like Ctrl-C's KeyboardInterrupt, so that every cleanup
    written for Ctrl-C (killing worker processes, removing partial files) runs for them too."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _raise_terminated(signum, frame):
    raise Terminated(signum)


class terminating_signals:
    """Within the block, SIGTERM and SIGHUP raise `Terminated` in the main thread (the previous handlers are
    restored after); a no-op outside the main thread."""

    def __enter__(self):
        self._previous = {}
        try:
            for sig in TERMINATING_SIGNALS:
                self._previous[sig] = signal.signal(sig, _raise_terminated)
        except ValueError:  # not the main thread
            pass
        return self

    def __exit__(self, *exc):
        for sig, handler in self._previous.items():
            signal.signal(sig, signal.SIG_DFL if handler is None else handler)
        return False


__all__ = ["PARENT_VARIABLE", "TERMINATING_SIGNALS", "Terminated", "die_with_parent",
           "die_with_parent_from_environment", "terminating_signals"]

"""When the cyclic garbage collector runs during op_plugin's own work (TorchAir's load, a compile).

A full collection walks every object the process tracks: torch's ~316,000 and TorchAir's ~145,000 once it is
loaded. The allocation counts that trigger collections fall due many times in a compile (AOT autograd's trace,
TorchAir's lowering), and each full one walked all of them again: at 12 layers ~0.35 s of GC in a warm-cache
process's first call against aot_eager's ~0.15 s (bench/fresh_process.py). Both windows below are scoped to
op_plugin's call and restore the collector as it was; neither is a process-wide policy such as a lasting
`gc.freeze()`:

* `no_automatic_gc`: no collection at all (TorchAir's import, whose ~145,000 new objects all survive it);
* `old_objects_frozen`: collections still run and reclaim the garbage the block makes, but walk only objects
  made in it: the objects alive when it starts, and those `freeze_new_objects` is called for (TorchAir's, just
  loaded), wait in `gc`'s permanent generation and go back to the oldest generation at its end (`gc.unfreeze`),
  where later full collections walk them as before. Skipped when the process froze objects itself
  (`gc.freeze` before): unfreezing would undo that.
"""
from __future__ import annotations

import contextlib
import gc
import threading

_lock = threading.Lock()
_frozen_windows = [0]  # compiles inside an `old_objects_frozen` block that froze (nested or in other threads)


@contextlib.contextmanager
def no_automatic_gc():
    """No automatic collection in the block; the previous state restored."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


@contextlib.contextmanager
def old_objects_frozen():
    """Collections in the block walk only the objects made in it (module doc)."""
    with _lock:
        if _frozen_windows[0] == 0 and gc.get_freeze_count():
            counted = False  # the process's own frozen objects: left alone
        else:
            counted = True
            if _frozen_windows[0] == 0:
                gc.freeze()
            _frozen_windows[0] += 1
    try:
        yield
    finally:
        if counted:
            with _lock:
                _frozen_windows[0] -= 1
                if _frozen_windows[0] == 0:
                    gc.unfreeze()


def freeze_new_objects() -> None:
    """Inside an `old_objects_frozen` block: the objects made so far are left out of its collections too."""
    with _lock:
        if _frozen_windows[0]:
            gc.freeze()

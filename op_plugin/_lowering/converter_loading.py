"""When TorchAir's own converters are there: loaded with TorchAir, or deferred to the first converter lookup.

TorchAir keeps an op's converter as `op._ge_converter`. On an Ascend host `import torchair` imports its aten and
prims converter modules (~700) and it imports its torch_npu ones (`ge_converter.custom`, ~125) at its first
lookup; op_plugin then completes and corrects some of them (`registry.install_aten_converters`, the schema
defaults). On a CPU host the simulator defers all of them to the first time a converter is looked up
(hosting/loader_deferred.py calls `defer`): a process whose compiles are all compile-cache hits, or that only
runs eager or aclgraph mode, never imports them (~0.15 s of every such process, bench/fresh_process.py).

What makes the deferral invisible:

* **Any read loads them first.** While they are deferred, `_ge_converter` on an op (`OpOverload`,
  `OpOverloadPacket`) is a class-level slot (`_ConverterSlot`): a read that finds no converter on the op loads
  TorchAir's converters, then answers. TorchAir's own `hasattr(target, "_ge_converter")`, a user's, and
  op_plugin's `torchair_api.registered_wrapper` all go through it.
* **The same winner as TorchAir's order.** On an Ascend host TorchAir's converters are registered before any
  other (op_plugin imports `custom` at its install); every later registration replaces them. Here a
  registration made while they are deferred is recorded (`registered_since_deferral`); when they load, their
  registration on such an op is kept aside (`shadowed`) instead of replacing it, and comes back if the later
  one is taken back (`unregistered`).
* **op_plugin's work that needs them** (`when_loaded`) runs as part of the load, after TorchAir's modules: on an
  Ascend host, where nothing is deferred, it runs when asked, as before.

The compile cache keys an op whose converter comes from the deferred modules by those modules' files
(hosting/compile_key.py), so a hit needs none of them imported.
"""
from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import torch

ATTRIBUTE = "_ge_converter"
SLOT_OWNERS = (torch._ops.OpOverload, torch._ops.OpOverloadPacket)

_lock = threading.RLock()
_loader: list = []        # [load] while deferred: the host's function that imports TorchAir's converter modules
_loading = threading.local()  # .active: this thread runs the load (its registrations are TorchAir's)
_queued: list[Callable[[], None]] = []
_since_deferral: set = set()  # ops given a converter while TorchAir's were deferred (or after), by anyone else
_shadowed: dict = {}      # op -> TorchAir's converter a registration in `_since_deferral` keeps replaced
_slot_installed = [False]


def defer(load: Callable[[], None]) -> None:
    """TorchAir's converter modules are not imported yet: `load()` imports them when a converter is first
    looked up (`ensure_loaded`)."""
    with _lock:
        _install_slot()
        _loader[:] = [load]


def pending() -> bool:
    """TorchAir's converters are deferred and not loaded yet."""
    return bool(_loader)


def ensure_loaded() -> None:
    """Load TorchAir's deferred converters, and run what waited for them, if not done yet (no-op on an Ascend
    host and inside the load itself). An error in the load is raised here, and the next lookup tries again."""
    if not _loader or getattr(_loading, "active", False):
        return
    with _lock:
        if not _loader:
            return
        _loading.active = True
        try:
            _loader[0]()
            while _queued:
                _queued.pop(0)()
            _loader.clear()
        finally:
            _loading.active = False


def when_loaded(work: Callable[[], None]) -> None:
    """Run `work` (op_plugin's converters over TorchAir's) once TorchAir's converters are there: now, or as
    part of their deferred load."""
    with _lock:
        if _loader and not getattr(_loading, "active", False):
            _queued.append(work)
            return
    work()


def registered_since_deferral(op: Any) -> bool:
    """`op`'s converter was registered by someone other than TorchAir's deferred modules after they were
    deferred: it is that registration's, whether they have loaded since or not."""
    return op in _since_deferral


def ops_registered_since_deferral() -> frozenset:
    """The ops `registered_since_deferral` is true of, now."""
    with _lock:
        return frozenset(_since_deferral)


def deferral_active() -> bool:
    """This process defers (or deferred) TorchAir's converters: `registered_since_deferral` is tracked."""
    return _slot_installed[0]


def unregistered(op: Any) -> None:
    """A registration made after the deferral was taken back and left `op` with no converter: TorchAir's,
    if its modules have loaded and registered one, is put back (what it would be without the deferral)."""
    with _lock:
        _since_deferral.discard(op)
        converter = _shadowed.pop(op, None)
        if converter is not None and ATTRIBUTE not in op.__dict__:
            op.__dict__[ATTRIBUTE] = converter


class _ConverterSlot:
    """`op._ge_converter` on OpOverload and OpOverloadPacket: the converter kept in the op's `__dict__`,
    where TorchAir and op_plugin read and write it; a miss loads deferred converters first (module doc)."""

    def __get__(self, op, owner=None):
        if op is None:
            return self
        try:
            return op.__dict__[ATTRIBUTE]
        except KeyError:
            pass
        if _loader and not getattr(_loading, "active", False):
            ensure_loaded()
            try:
                return op.__dict__[ATTRIBUTE]
            except KeyError:
                pass
        raise AttributeError(f"{op!r} has no attribute {ATTRIBUTE!r}")

    def __set__(self, op, converter) -> None:
        with _lock:
            if getattr(_loading, "active", False):
                if op in _since_deferral:
                    _shadowed[op] = converter  # a later registration wins, as in TorchAir's order
                    return
            else:
                _since_deferral.add(op)
                _shadowed.pop(op, None)
            op.__dict__[ATTRIBUTE] = converter

    def __delete__(self, op) -> None:
        try:
            del op.__dict__[ATTRIBUTE]
        except KeyError:
            raise AttributeError(ATTRIBUTE) from None


def _install_slot() -> None:
    if _slot_installed[0]:
        return
    for owner in SLOT_OWNERS:
        if ATTRIBUTE in vars(owner):
            raise RuntimeError(f"{owner.__qualname__}.{ATTRIBUTE} is already defined; TorchAir's converters cannot "
                               "be deferred")
    for owner in SLOT_OWNERS:
        setattr(owner, ATTRIBUTE, _ConverterSlot())
    _slot_installed[0] = True

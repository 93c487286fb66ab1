"""GE IR prototypes answered by the simulator's `get_registered_ir_def`.

On an Ascend host the native TorchAir library answers `get_registered_ir_def(op_type)` from the
operator prototypes compiled into CANN (`REG_OP`). Off that host the simulator answers from this
registry (the YAML ops' custom types) and then from CANN's built-in prototypes as TorchAir ships
them (`builtin_prototypes`), so TorchAir's `ge.custom_op` and its auto-converter see the same
prototypes as on the NPU. The answer format is described in `op_plugin._ge.ir`.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass

from ..._base.handles import RegistrationHandle
from ..._ge.ir import IR_DEF_NOT_FOUND, IrPrototype
from ..._ge.builtin_prototypes import builtin_prototype, builtin_prototypes

__all__ = ["builtin_prototype", "builtin_prototypes", "get_registered_ir_def", "register_ir_prototype",
           "registered_ir_prototype"]


@dataclass
class _Entry:
    prototype: IrPrototype
    live_handles: int


_lock = threading.Lock()
_prototypes: dict[str, _Entry] = {}


def register_ir_prototype(prototype: IrPrototype) -> RegistrationHandle:
    """Make `get_registered_ir_def(prototype.op_type)` answer with this prototype.

    Registering an equal prototype again is harmless (it stays until every handle is destroyed);
    a different prototype under a registered type is an error.
    """
    if not isinstance(prototype, IrPrototype):
        raise TypeError(f"expected an IrPrototype, got {type(prototype).__name__}")
    with _lock:
        entry = _prototypes.get(prototype.op_type)
        if entry is None:
            _prototypes[prototype.op_type] = _Entry(prototype, 1)
        elif entry.prototype == prototype:
            entry.live_handles += 1
        else:
            raise ValueError(f"GE IR prototype {prototype.op_type!r} is already registered as {entry.prototype}; "
                             "destroy that registration first")
    return RegistrationHandle(lambda: _unregister(prototype), f"IR prototype {prototype.op_type}")


def _unregister(prototype: IrPrototype) -> None:
    with _lock:
        entry = _prototypes.get(prototype.op_type)
        if entry is not None and entry.prototype == prototype:
            entry.live_handles -= 1
            if entry.live_handles == 0:
                del _prototypes[prototype.op_type]


def registered_ir_prototype(op_type: str) -> IrPrototype | None:
    with _lock:
        entry = _prototypes.get(op_type)
    return None if entry is None else entry.prototype


def get_registered_ir_def(op_type: str) -> tuple[str, list, list, list]:
    """The native library's answer for `op_type`: a registered prototype, else CANN's built-in one."""
    prototype = registered_ir_prototype(op_type) or builtin_prototype(op_type)
    return IR_DEF_NOT_FOUND if prototype is None else prototype.as_ir_def()

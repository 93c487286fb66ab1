"""GE IR prototypes answered by the simulator's ``get_registered_ir_def``.

On an Ascend host the native TorchAir library answers ``get_registered_ir_def(op_type)``
from the operator prototypes compiled into CANN (``REG_OP``). Off that host the simulator
answers from this registry, so TorchAir's ``ge.custom_op`` and its auto-converter see the
same prototypes the YAML declares.

Answer format, as TorchAir's callers unpack it (``ge/ge_custom.py``,
``_ge_concrete_graph/fx2ge_converter.py``, ``custom_op_pre_scan.py``)::

    ("SUCCESS", [(name, "required"|"optional"|"dynamic")...],
                [(name, "required"|"dynamic")...],
                [(name, "VT_INT"|...)...])
    ("ERROR", [], [], [])        # not registered, as the real library says
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

INPUT_KINDS = ("required", "optional", "dynamic")
OUTPUT_KINDS = ("required", "dynamic")
# The attr type names TorchAir understands (torchair/ge/attr.py, _ATTR_TYPE_MAP).
ATTR_TYPES = (
    "VT_INT", "VT_FLOAT", "VT_BOOL", "VT_STRING", "VT_DATA_TYPE",
    "VT_LIST_INT", "VT_LIST_FLOAT", "VT_LIST_BOOL", "VT_LIST_STRING", "VT_LIST_DATA_TYPE",
    "VT_LIST_LIST_INT", "VT_LIST_LIST_FLOAT",
)


@dataclass(frozen=True)
class IrPrototype:
    """One GE operator prototype: ordered inputs, outputs and attrs with their kinds."""

    op_type: str
    inputs: tuple[tuple[str, str], ...] = ()
    outputs: tuple[tuple[str, str], ...] = ()
    attrs: tuple[tuple[str, str], ...] = ()

    def __post_init__(self):
        # Normalise lists to tuples so the prototype stays hashable and immutable.
        for field in ("inputs", "outputs", "attrs"):
            object.__setattr__(self, field, tuple(tuple(item) for item in getattr(self, field)))
        if not self.op_type or not isinstance(self.op_type, str):
            raise ValueError(f"IrPrototype.op_type must be a non-empty string, got {self.op_type!r}")
        _check_pairs(self.op_type, "input", self.inputs, INPUT_KINDS)
        _check_pairs(self.op_type, "output", self.outputs, OUTPUT_KINDS)
        _check_pairs(self.op_type, "attr", self.attrs, ATTR_TYPES)

    def as_ir_def(self) -> tuple[str, list, list, list]:
        return ("SUCCESS", list(self.inputs), list(self.outputs), list(self.attrs))


def _check_pairs(op_type, what, pairs, allowed):
    seen = set()
    for pair in pairs:
        if len(pair) != 2 or not isinstance(pair[0], str) or not pair[0]:
            raise ValueError(f"IR prototype {op_type}: {what} entry {pair!r} must be (name, kind)")
        name, kind = pair
        if kind not in allowed:
            raise ValueError(f"IR prototype {op_type}: {what} {name!r} has kind {kind!r}; expected one of {allowed}")
        if name in seen:
            raise ValueError(f"IR prototype {op_type}: {what} {name!r} is listed twice")
        seen.add(name)


class IrRegistration:
    """Handle returned by ``register_ir_prototype``; ``remove()`` undoes the registration."""

    def __init__(self, prototype: IrPrototype):
        self.prototype = prototype
        self._removed = False

    def remove(self) -> None:
        if self._removed:
            return
        with _lock:
            entry = _prototypes.get(self.prototype.op_type)
            if entry is not None and entry[0] == self.prototype:
                entry[1] -= 1
                if entry[1] == 0:
                    del _prototypes[self.prototype.op_type]
        self._removed = True


_lock = threading.Lock()
# op_type -> [prototype, number of live registrations of it]
_prototypes: dict[str, list] = {}


def register_ir_prototype(prototype: IrPrototype) -> IrRegistration:
    """Make ``get_registered_ir_def(prototype.op_type)`` answer with this prototype.

    Registering an equal prototype again is harmless (it stays until every handle is
    removed); a different prototype under a registered type is an error.
    """
    if not isinstance(prototype, IrPrototype):
        raise TypeError(f"expected an IrPrototype, got {type(prototype).__name__}")
    with _lock:
        entry = _prototypes.get(prototype.op_type)
        if entry is None:
            _prototypes[prototype.op_type] = [prototype, 1]
        elif entry[0] == prototype:
            entry[1] += 1
        else:
            raise ValueError(
                f"GE IR prototype {prototype.op_type!r} is already registered as {entry[0]}; "
                "remove that registration first"
            )
    return IrRegistration(prototype)


def registered_ir_prototype(op_type: str) -> IrPrototype | None:
    with _lock:
        entry = _prototypes.get(op_type)
    return None if entry is None else entry[0]


def get_registered_ir_def(op_type: str) -> tuple[str, list, list, list]:
    """The native library's answer for ``op_type`` (see the module docstring)."""
    prototype = registered_ir_prototype(op_type)
    if prototype is None:
        from ._builtin_ir import builtin_prototype  # CANN's built-in ops, as the real library knows them

        prototype = builtin_prototype(op_type)
    if prototype is None:
        return ("ERROR", [], [], [])
    return prototype.as_ir_def()

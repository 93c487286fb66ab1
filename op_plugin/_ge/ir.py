"""GE IR prototypes: what `get_registered_ir_def(op_type)` answers for a GE op type.

On an Ascend host CANN's op-proto library answers from the compiled `REG_OP` prototypes; the
simulator answers from the same prototypes. The answer format, as TorchAir's callers unpack it
(`ge/ge_custom.py`, `_ge_concrete_graph/fx2ge_converter.py`, `custom_op_pre_scan.py`)::

    ("SUCCESS", [(name, "required"|"optional"|"dynamic")...],
                [(name, "required"|"dynamic")...],
                [(name, "VT_INT"|...)...])
    ("ERROR", [], [], [])        # not registered, as the real library says
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

from .._base.enums import StrEnum


class InputKind(StrEnum):
    """A GE input: REG_OP's INPUT, OPTIONAL_INPUT or DYNAMIC_INPUT."""

    REQUIRED = "required"
    OPTIONAL = "optional"
    DYNAMIC = "dynamic"


class OutputKind(StrEnum):
    """A GE output: REG_OP's OUTPUT or DYNAMIC_OUTPUT."""

    REQUIRED = "required"
    DYNAMIC = "dynamic"


class AttrType(StrEnum):
    """A GE attr's value type, with the names TorchAir understands (`torchair/ge/attr.py`, _ATTR_TYPE_MAP)."""

    INT = "VT_INT"
    FLOAT = "VT_FLOAT"
    BOOL = "VT_BOOL"
    STRING = "VT_STRING"
    DATA_TYPE = "VT_DATA_TYPE"
    LIST_INT = "VT_LIST_INT"
    LIST_FLOAT = "VT_LIST_FLOAT"
    LIST_BOOL = "VT_LIST_BOOL"
    LIST_STRING = "VT_LIST_STRING"
    LIST_DATA_TYPE = "VT_LIST_DATA_TYPE"
    LIST_LIST_INT = "VT_LIST_LIST_INT"
    LIST_LIST_FLOAT = "VT_LIST_LIST_FLOAT"


class _Required:
    """The default of a REQUIRED_ATTR: there is none, the node must carry the attr."""

    def __repr__(self):
        return "REQUIRED"


REQUIRED = _Required()


class IrParam(NamedTuple):
    """One input, output or attr of a prototype: its name and its kind (or value type)."""

    name: str
    kind: InputKind | OutputKind | AttrType


@dataclass(frozen=True)
class IrPrototype:
    """One GE operator prototype: ordered inputs, outputs and attrs with their kinds.

    Pairs may be given as plain `(name, "required")` tuples; they are validated and normalised to
    `IrParam`s with enum kinds, so a bad kind fails here and not inside TorchAir.
    """

    op_type: str
    inputs: tuple[IrParam, ...] = ()
    outputs: tuple[IrParam, ...] = ()
    attrs: tuple[IrParam, ...] = ()
    # (attr name, default) as REG_OP declares them: REQUIRED for a REQUIRED_ATTR; lists as tuples so
    # the prototype stays hashable. Attrs not listed have no known default.
    attr_defaults: tuple[tuple[str, Any], ...] = ()

    def __post_init__(self):
        if not self.op_type or not isinstance(self.op_type, str):
            raise ValueError(f"IrPrototype.op_type must be a non-empty string, got {self.op_type!r}")
        for field, kinds in (("inputs", InputKind), ("outputs", OutputKind), ("attrs", AttrType)):
            object.__setattr__(self, field, _params(self.op_type, field[:-1], getattr(self, field), kinds))

    def as_ir_def(self) -> tuple[str, list, list, list]:
        """The native library's answer, with plain strings as TorchAir compares them."""
        plain = lambda params: [(p.name, p.kind.value) for p in params]  # noqa: E731
        return ("SUCCESS", plain(self.inputs), plain(self.outputs), plain(self.attrs))

    def input_kinds(self) -> dict[str, InputKind]:
        return {p.name: p.kind for p in self.inputs}

    def attr_types(self) -> dict[str, AttrType]:
        return {p.name: p.kind for p in self.attrs}

    def attr_default(self, name: str) -> Any:
        """The REG_OP default of attr `name` (lists as lists), REQUIRED, or KeyError when none is known."""
        for attr, value in self.attr_defaults:
            if attr == name:
                return list(value) if isinstance(value, tuple) else value
        raise KeyError(name)


IR_DEF_NOT_FOUND = ("ERROR", [], [], [])


def _params(op_type: str, what: str, pairs, kinds: type[StrEnum]) -> tuple[IrParam, ...]:
    result, seen = [], set()
    for pair in pairs:
        if not isinstance(pair, tuple | list) or len(pair) != 2 or not isinstance(pair[0], str) or not pair[0]:
            raise ValueError(f"IR prototype {op_type}: {what} entry {pair!r} must be (name, kind)")
        name, kind = pair
        try:
            kind = kinds(kind)
        except ValueError:
            allowed = tuple(k.value for k in kinds)
            raise ValueError(f"IR prototype {op_type}: {what} {name!r} has kind {kind!r}; "
                             f"expected one of {allowed}") from None
        if name in seen:
            raise ValueError(f"IR prototype {op_type}: {what} {name!r} is listed twice")
        seen.add(name)
        result.append(IrParam(name, kind))
    return tuple(result)

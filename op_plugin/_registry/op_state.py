"""Per-op state: the YAML spec and the Python pieces attached by decorators.

Decorators may run before or after the YAML is loaded, so registered kernels look their pieces
up here at call time instead of capturing them at registration.
"""
from __future__ import annotations


from collections.abc import Callable
from dataclasses import dataclass, field

from .._base.enums import StrEnum
from .._base.errors import OpPluginError
from .._base.handles import HandleGroup, RegistrationHandle
from .._spec.model import DEFAULT_NAMESPACE, OpSpec


class Piece(StrEnum):
    """A Python piece a decorator attaches to a YAML op; the value is the decorator's name."""

    REFERENCE = "reference"
    META = "meta"
    BACKWARD = "backward"
    SETUP_CONTEXT = "setup_context"
    CONVERTER = "converter"


@dataclass
class OpState:
    qualname: str
    spec: OpSpec | None = None
    reference: Callable | None = None
    meta: Callable | None = None
    backward: Callable | None = None
    setup_context: Callable | None = None
    converter: Callable | None = None
    # What was registered elsewhere for this op while it is loaded (GE converter, IR prototype, ...);
    # destroyed when the op is unloaded or its load fails.
    handles: HandleGroup = field(default_factory=lambda: HandleGroup("op side registrations"))

    @property
    def name(self) -> str:
        return self.qualname.split("::", 1)[1]

    def piece(self, piece: Piece) -> Callable | None:
        return getattr(self, piece.value)

    def where(self) -> str:
        """`file:line: op 'name': ` of the op's YAML entry, or '' before it is loaded."""
        return f"{self.spec.location}: " if self.spec else ""


_STATES: dict[str, OpState] = {}
# Called with (state, piece) whenever a decorator attaches a piece to an already loaded op.
_piece_listeners: list[Callable[[OpState, Piece], None]] = []


def add_piece_listener(listener: Callable[[OpState, Piece], None]) -> RegistrationHandle:
    """Call `listener(state, piece)` after a decorator attaches a piece to a loaded op."""
    _piece_listeners.append(listener)
    return RegistrationHandle(lambda: _piece_listeners.remove(listener), f"piece listener {listener!r}")


def qualify(name: str) -> str:
    """'npu_x' -> 'npu::npu_x'; 'ns::x' and 'x.overload' are kept as given."""
    if not isinstance(name, str) or not name:
        raise OpPluginError(f"expected an op name such as 'npu_my_op', got {name!r}")
    return name if "::" in name else f"{DEFAULT_NAMESPACE}::{name}"


def state(name: str) -> OpState:
    qualname = qualify(name)
    if qualname not in _STATES:
        _STATES[qualname] = OpState(qualname)
    return _STATES[qualname]


def find(name: str) -> OpState | None:
    return _STATES.get(qualify(name))


def loaded() -> list[OpState]:
    return [s for s in _STATES.values() if s.spec is not None]


def attach(name: str, piece: Piece, fn: Callable) -> Callable:
    """Attach a decorator's function; attaching the same piece twice is an error, not an override."""
    piece = Piece(piece)
    if not callable(fn):
        raise OpPluginError(f"@op_plugin.{piece.value}('{name}') must decorate a function, got {fn!r}")
    st = state(name)
    existing = st.piece(piece)
    if existing is not None and existing is not fn:
        raise OpPluginError(f"{st.where()}{st.qualname} already has a {piece.value} ({_describe(existing)}); "
                            f"remove one of the two @op_plugin.{piece.value} definitions")
    if st.spec is not None:
        check_piece_allowed(st, piece)
    setattr(st, piece.value, fn)
    for listener in list(_piece_listeners):
        listener(st, piece)
    return fn


def check_piece_allowed(st: OpState, piece: Piece) -> None:
    spec = st.spec
    assert spec is not None
    if piece is Piece.META and spec.outputs is not None:
        raise OpPluginError(f"{spec.field('outputs')}: the YAML already gives the output rule; "
                            f"remove `outputs:` or the @op_plugin.meta function ({_describe(st.meta)})")
    if piece in (Piece.BACKWARD, Piece.SETUP_CONTEXT) and not spec.differentiable:
        raise OpPluginError(f"{spec.field('func')}: {spec.qualname} mutates its inputs; in-place ops cannot "
                            "have a backward. Define a functional variant for training.")
    if piece in (Piece.BACKWARD, Piece.SETUP_CONTEXT) and any(a.kwarg_only and a.kind.is_tensor
                                                              for a in spec.schema.args):
        # torch.library.register_autograd does not support them, so the formula would never run.
        raise OpPluginError(f"{spec.field('func')}: {spec.qualname} has keyword-only Tensor arguments, which "
                            "torch.library autograd does not support, so this backward would never be called; "
                            "make those arguments positional (before `*`)")


def detach(name: str, piece: Piece) -> None:
    """Remove a decorator's function (tests and interactive re-definition)."""
    st = find(name)
    if st is not None:
        setattr(st, Piece(piece).value, None)


def _describe(fn: Callable | None) -> str:
    if fn is None:
        return "none"
    code = getattr(fn, "__code__", None)
    where = f" at {code.co_filename}:{code.co_firstlineno}" if code else ""
    return f"{getattr(fn, '__qualname__', fn)}{where}"


def forget(qualname: str) -> None:
    """Drop the spec of an unloaded op and take back its side registrations; decorator pieces stay
    for a later load."""
    st = _STATES.get(qualname)
    if st is not None:
        st.spec = None
        st.handles.destroy()
        st.handles = HandleGroup("op side registrations")

"""Per-op state: the YAML spec and the Python pieces attached by decorators.

Decorators may run before or after the YAML is loaded, so registered kernels look their pieces
up here at call time instead of capturing them at registration.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ._errors import OpPluginError
from ._spec import DEFAULT_NAMESPACE, OpSpec

PIECES = ("reference", "meta", "backward", "setup_context", "converter")


@dataclass
class OpState:
    qualname: str
    spec: OpSpec | None = None
    reference: Callable | None = None
    meta: Callable | None = None
    backward: Callable | None = None
    setup_context: Callable | None = None
    converter: Callable | None = None
    # Undo callbacks for side registrations made for this op (GE converter, IR prototype, ...).
    undo: list[Callable[[], None]] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.qualname.split("::", 1)[1]

    def where(self) -> str:
        """`file:line: ` of the op's YAML entry, or '' before it is loaded."""
        return f"{self.spec.location.file}:{self.spec.location.line}: " if self.spec else ""


_STATES: dict[str, OpState] = {}
# Called with (state, piece) whenever a decorator attaches a piece to an already loaded op.
_piece_listeners: list[Callable[[OpState, str], None]] = []


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


def attach(name: str, piece: str, fn: Callable) -> Callable:
    """Attach a decorator's function; attaching the same piece twice is an error, not an override."""
    if not callable(fn):
        raise OpPluginError(f"@op_plugin.{piece}('{name}') must decorate a function, got {fn!r}")
    st = state(name)
    existing = getattr(st, piece)
    if existing is not None and existing is not fn:
        raise OpPluginError(f"{st.where()}{st.qualname} already has a {piece} ({_describe(existing)}); "
                            f"remove one of the two @op_plugin.{piece} definitions")
    if st.spec is not None:
        check_piece_allowed(st, piece)
    setattr(st, piece, fn)
    for listener in _piece_listeners:
        listener(st, piece)
    return fn


def check_piece_allowed(st: OpState, piece: str) -> None:
    spec = st.spec
    assert spec is not None
    loc = f"{spec.location.file}:{spec.location.line}: op '{spec.name}'"
    if piece == "meta" and spec.outputs is not None:
        raise OpPluginError(f"{loc}: field 'outputs': the YAML already gives the output rule; "
                            f"remove `outputs:` or the @op_plugin.meta function ({_describe(st.meta)})")
    if piece in ("backward", "setup_context") and not spec.differentiable:
        raise OpPluginError(f"{loc}: field 'func': {spec.qualname} mutates its inputs; in-place ops cannot "
                            "have a backward. Define a functional variant for training.")


def detach(name: str, piece: str) -> None:
    """Remove a decorator's function (tests and interactive re-definition)."""
    st = find(name)
    if st is not None:
        setattr(st, piece, None)


def _describe(fn: Callable | None) -> str:
    if fn is None:
        return "none"
    code = getattr(fn, "__code__", None)
    where = f" at {code.co_filename}:{code.co_firstlineno}" if code else ""
    return f"{getattr(fn, '__qualname__', fn)}{where}"


def forget(qualname: str) -> None:
    """Drop the spec of an unloaded op; decorator pieces stay for a later load."""
    st = _STATES.get(qualname)
    if st is not None:
        st.spec = None

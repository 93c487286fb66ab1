"""`install_converters`: op_plugin's GE converters on the TorchAir module of the host, and
`refresh_library_converters` for the library ops that appear later.

`install_converters` runs once per process, when the npugraph backend first needs TorchAir
(importing TorchAir costs seconds, so `import op_plugin` never does it on a CPU host; on an Ascend
host `import op_plugin` runs it). It builds the one `TorchAirApi` of the installation and puts on
the host's TorchAir, as one all-or-nothing group:

- op_plugin's own converters of the registry (`registry`): for the aten ops TorchAir does not
  lower, the completions and the numeric corrections of its converters, and the library ops
  registered by now;
- a converter for every YAML op, now and, through the op registry's hooks, for every op loaded
  or decorated later: an op with `@op_plugin.converter` gets that function; an op with `ge:` the
  converter generated from it (`converters.generated_converter`); an op with neither a converter
  that fails with a message saying what to add.

A host may add its own per-op pieces with `op_hook(state) -> RegistrationHandle | None` (the
simulator registers IR prototypes and executor kernels for custom GE types). If anything fails,
everything done so far is taken back and the next compile tries again.

Who wins when a user registers a TorchAir converter (`torchair.register_fx_node_ge_converter`) on
a YAML op: the user's, on both hosts, with a warning naming both. On an Ascend host op_plugin
installs at import, so a user's registration always comes later and replaces op_plugin's; on a
CPU host the installation may come later (the first npugraph compile), and then it keeps a user's
converter it finds instead of overwriting it. The installation wraps the host TorchAir's
`register_fx_node_ge_converter` to say so when a user's registration replaces op_plugin's.

`refresh_library_converters()` runs at every compile after that: a model library imported since
(transformers' MoE ops) gets its converters then.
"""
from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from typing import Any

from .._base.errors import OpPluginError
from .._base.handles import HandleGroup, RegistrationHandle
from .._registry.library import op_overload
from .._registry.load import add_load_hook
from .._registry.op_state import OpState, Piece, add_piece_listener, loaded
from .converters import generated_converter, missing_mapping_converter
from . import converter_loading
from .registry import install_aten_converters, install_library_converters, swap_converter
from .schema_defaults import install_schema_defaults
from . import collective_converters, torchair_input_fixes
from .torchair_api import TorchAirApi

OpHook = Callable[[OpState], "RegistrationHandle | None"]


class _Installation:
    def __init__(self, torchair: Any, op_hook: OpHook | None):
        self.torchair = torchair
        self.api = TorchAirApi(torchair)  # the one of this installation
        self.op_hook = op_hook
        self.handles: HandleGroup | None = None
        self.schema_defaults = False  # schema_defaults installed (at the first compile)

    def install_op(self, st: OpState) -> HandleGroup:
        """Lower one op; the returned group (also kept in `st.handles`) takes it all back."""
        with st.handles.add(HandleGroup(f"lowering of {st.qualname}")) as group:
            group.add(self.register_converter(st))
            if self.op_hook is not None:
                handle = self.op_hook(st)
                if handle is not None:
                    group.add(handle)
        return group

    def on_piece(self, st: OpState, piece: Piece) -> None:
        if piece is Piece.CONVERTER and st.spec is not None:
            st.handles.add(self.register_converter(st))

    def register_converter(self, st: OpState) -> RegistrationHandle:
        spec = st.spec
        op = op_overload(spec)
        if st.converter is not None:
            fn, what = st.converter, f"@op_plugin.converter {_name(st.converter)}"
        elif spec.ge is not None:
            fn, what = generated_converter(spec, self.torchair), f"the converter generated from `ge:` ({spec.ge.type})"
        else:
            fn, what = missing_mapping_converter(spec), "its missing-mapping converter"
        users = _users_converter(op)
        if users is not None:
            _warn_users_wins(op, users, what)
            return RegistrationHandle(lambda: None, f"GE converter of {spec.qualname} (the user's kept)")
        _OURS[op] = what
        _SWAPPING[0] += 1
        try:
            handle = swap_converter(self.torchair, op, fn, f"GE converter of {spec.qualname}")
        finally:
            _SWAPPING[0] -= 1
        _OURS_CONVERTER[op] = op.__dict__.get("_ge_converter")
        return handle


_OURS: dict[Any, str] = {}            # YAML op -> what op_plugin installed on it
_OURS_CONVERTER: dict[Any, Any] = {}  # YAML op -> the converter object op_plugin put there
_SWAPPING = [0]                       # > 0 while op_plugin itself registers


def _name(fn: Any) -> str:
    fn = getattr(fn, "__wrapped__", fn)
    return f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', repr(fn))}"


def _users_converter(op: Any) -> Any | None:
    """A converter on a YAML op that op_plugin did not put there (a user's), or None."""
    current = op.__dict__.get("_ge_converter")
    if current is None or current is _OURS_CONVERTER.get(op):
        return None
    if str(getattr(getattr(current, "__wrapped__", current), "__module__", "")).startswith("torchair"):
        return None  # TorchAir's own (a torch_npu op's): op_plugin's YAML op replaces it, as before
    return current


def _warn_users_wins(op: Any, users: Any, ours: str) -> None:
    warnings.warn(f"{op}: your TorchAir converter {_name(users)} (torchair.register_fx_node_ge_converter) is "
                  f"used instead of op_plugin's {ours}; the user's converter wins, on a CPU host as on an "
                  "Ascend host", UserWarning, stacklevel=3)


def _wrap_register(torchair: Any) -> None:
    """Make the host TorchAir's `register_fx_node_ge_converter` warn when a user's registration
    replaces op_plugin's converter of a YAML op (the user's then wins, as on an Ascend host)."""
    original = torchair.register_fx_node_ge_converter
    if getattr(original, "_op_plugin_wrapped", False):
        return

    @functools.wraps(original)
    def register_fx_node_ge_converter(aten_op):
        registrar = original(aten_op)
        if _SWAPPING[0] or aten_op not in _OURS:
            return registrar

        def register(fn):
            replaced = aten_op.__dict__.get("_ge_converter") is _OURS_CONVERTER.get(aten_op)
            result = registrar(fn)
            if replaced:
                _warn_users_wins(aten_op, fn, _OURS[aten_op])
            return result

        return register

    register_fx_node_ge_converter._op_plugin_wrapped = True
    torchair.register_fx_node_ge_converter = register_fx_node_ge_converter


def _wrap_custom_op(torchair: Any) -> None:
    """Make the host TorchAir's `ge.custom_op` refuse an attr the type's IR prototype does not have
    (CANN's for a built-in type, the YAML's for a custom one): TorchAir would set it on the node,
    where nothing reads it, and the op would run with the attr's default (wrong numbers, no error)."""
    ge = getattr(torchair, "ge", None)
    original = getattr(ge, "custom_op", None)
    if original is None or getattr(original, "_op_plugin_wrapped", False):
        return

    @functools.wraps(original)
    def custom_op(op_type, *args, inputs=None, outputs=None, attrs=None, node_name=None):
        if attrs:
            from torchair.core import _torchair

            status, _, _, ge_attrs = _torchair.get_registered_ir_def(op_type)
            known = [name for name, _ in ge_attrs] if status == "SUCCESS" else None
            unknown = [] if known is None else sorted(set(attrs) - set(known))
            if unknown:
                raise OpPluginError(f"ge.custom_op({op_type!r}): attr(s) {', '.join(map(repr, unknown))} are not in "
                                    f"{op_type}'s IR prototype, whose attrs are {known}; an attr the prototype "
                                    "lacks is never read (the op would run with its default)")
        return original(op_type, *args, inputs=inputs, outputs=outputs, attrs=attrs, node_name=node_name)

    custom_op._op_plugin_wrapped = True
    ge.custom_op = custom_op


_installed: _Installation | None = None


def install_converters(torchair: Any, op_hook: OpHook | None = None) -> None:
    """Register op_plugin's converters and those of every YAML op on `torchair`, now and for later
    ops (once per process: later calls do nothing)."""
    global _installed
    if _installed is not None:
        return
    installation = _Installation(torchair, op_hook)
    torchair_input_fixes.install(torchair)  # DTensor graph inputs: the same fix on both hosts
    collective_converters.install_torchair_corrections(torchair)  # all_to_all_single's decomposition, both hosts
    _wrap_register(torchair)
    _wrap_custom_op(torchair)
    with HandleGroup("lowering installation") as done:
        # over TorchAir's own converters: now, or when they load (a CPU host defers them: converter_loading)
        converter_loading.when_loaded(lambda: done.add(install_aten_converters(installation.api)))
        converter_loading.when_loaded(lambda: done.add(install_library_converters(installation.api)))
        for st in loaded():
            done.add(installation.install_op(st))
    installation.handles = done
    add_load_hook(installation.install_op)  # lives as long as the process: TorchAir cannot be unloaded
    add_piece_listener(installation.on_piece)
    _installed = installation


def refresh_library_converters() -> int:
    """Install the converters of the library ops registered since the installation (transformers'
    MoE ops, when transformers is imported after the first compile); how many were installed.
    Before `install_converters` there is nothing to refresh."""
    if _installed is None:
        return 0
    if not _installed.schema_defaults:
        # at the first compile, not at install: on an Ascend host install runs at `import op_plugin`,
        # before TorchAir's converter modules are imported (importing them there would cost seconds); on a
        # CPU host when they load (converter_loading: a compile-cache hit does not load them)
        _installed.schema_defaults = True
        handles = _installed.handles
        api = _installed.api
        converter_loading.when_loaded(lambda: handles.add(install_schema_defaults(api)))
    if converter_loading.pending():
        return 0  # the library ops there when TorchAir's converters load get theirs then (install_converters)
    late = install_library_converters(_installed.api)
    if len(late):
        _installed.handles.add(late)
    return len(late)


def installed_handles() -> HandleGroup | None:
    """What the installation registered (destroy() takes it all back), or None before it ran."""
    return None if _installed is None else _installed.handles


def installed_torchair() -> Any | None:
    """The TorchAir module the converters were installed on, or None before the first compile."""
    return None if _installed is None else _installed.torchair

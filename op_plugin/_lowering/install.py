"""`install_lowering`: GE converters for every YAML op, on the TorchAir module of the host.

It runs once per process, when the npugraph backend first needs TorchAir (importing TorchAir costs
seconds, so `import op_plugin` never does it), and covers every loaded op and, through the
registry's hooks, every op loaded or decorated later:

- an op with `@op_plugin.converter` gets that function;
- an op with `ge:` gets the converter generated from it (`converters.generated_converter`);
- an op with neither gets a converter that fails with a message saying what to add.

Before the YAML ops, the same installation puts op_plugin's converters for aten ops TorchAir does
not lower (`aten_converters`) and the numeric corrections of TorchAir's lowering
(`numeric_corrections`) on the host's TorchAir; they belong to the same all-or-nothing group.

A host may add its own per-op pieces with `op_hook(state) -> RegistrationHandle | None` (the
simulator registers IR prototypes and executor kernels for custom GE types). Installation is
all or nothing: if any op fails, everything done so far is taken back and the next compile tries
again.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .._base.handles import HandleGroup, RegistrationHandle
from .._registry.library import op_overload
from .._registry.load import add_load_hook
from .._registry.op_state import OpState, Piece, add_piece_listener, loaded
from .aten_converters import install_aten_converters
from .moe_converters import install_library_converters
from .converters import generated_converter, missing_mapping_converter
from .numeric_corrections import install_numeric_corrections

OpHook = Callable[[OpState], "RegistrationHandle | None"]


class _Installation:
    def __init__(self, torchair: Any, op_hook: OpHook | None):
        self.torchair = torchair
        self.op_hook = op_hook
        self.handles: HandleGroup | None = None

    def install_op(self, st: OpState) -> HandleGroup:
        """Lower one op; the returned group (also kept in `st.handles`) takes it all back."""
        group = st.handles.add(HandleGroup(f"lowering of {st.qualname}"))
        try:
            group.add(self.register_converter(st))
            if self.op_hook is not None:
                handle = self.op_hook(st)
                if handle is not None:
                    group.add(handle)
        except Exception:
            group.destroy()
            raise
        return group

    def on_piece(self, st: OpState, piece: Piece) -> None:
        if piece is Piece.CONVERTER and st.spec is not None:
            st.handles.add(self.register_converter(st))

    def register_converter(self, st: OpState) -> RegistrationHandle:
        spec = st.spec
        op = op_overload(spec)
        if st.converter is not None:
            fn = st.converter
        elif spec.ge is not None:
            fn = generated_converter(spec, self.torchair)
        else:
            fn = missing_mapping_converter(spec)
        self.torchair.register_fx_node_ge_converter(op)(fn)
        wrapped = op.__dict__.get("_ge_converter")  # TorchAir keeps a wrapper of `fn` on the OpOverload

        def unregister():
            # Only take back our own converter: a later registration may have replaced it.
            if op.__dict__.get("_ge_converter") is wrapped:
                op.__dict__.pop("_ge_converter", None)

        return RegistrationHandle(unregister, f"GE converter of {spec.qualname}")


_installed: _Installation | None = None


def install_lowering(torchair: Any, op_hook: OpHook | None = None) -> None:
    """Register the GE converters of every YAML op on `torchair`, now and for later ops (once per process)."""
    global _installed
    if _installed is not None:
        # a model library imported since (transformers' MoE op) gets its converters now
        late = install_library_converters(_installed.torchair)
        if len(late):
            _installed.handles.add(late)
        return
    installation = _Installation(torchair, op_hook)
    done = HandleGroup("lowering installation")
    try:
        done.add(install_aten_converters(torchair))
        done.add(install_library_converters(torchair))
        done.add(install_numeric_corrections(torchair))
        for st in loaded():
            done.add(installation.install_op(st))
    except Exception:
        done.destroy()
        raise
    installation.handles = done
    add_load_hook(installation.install_op)  # lives as long as the process: TorchAir cannot be unloaded
    add_piece_listener(installation.on_piece)
    _installed = installation


def installed_handles() -> HandleGroup | None:
    """What the installation registered (destroy() takes it all back), or None before it ran."""
    return None if _installed is None else _installed.handles


def installed_torchair() -> Any | None:
    """The TorchAir module the converters were installed on, or None before the first compile."""
    return None if _installed is None else _installed.torchair

"""`load_yaml`: read, validate, then register a file's ops, all or none."""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from . import _registry
from ._errors import OpPluginError, YamlSpecError
from ._library import LoadedLibrary, exists_in_dispatcher
from ._spec import OpSpec, parse_document
from ._yaml_source import read_located

_LIBRARIES: dict[str, LoadedLibrary] = {}   # qualname -> the handle of the file that registered it
# Called with each newly registered OpState (e.g. to attach a GE converter); may raise to abort.
_load_hooks: list[Callable[[_registry.OpState], None]] = []


def parse_yaml(path: str | Path) -> tuple[OpSpec, ...]:
    """Validate a YAML file without registering anything (`op-plugin validate`)."""
    return parse_document(read_located(path))


def load_yaml(path: str | Path) -> list[str]:
    """Register every op of a YAML file; return their qualified names, e.g. ["npu::npu_layer_scale"].

    The file is validated completely before anything is registered, and if any registration step
    fails, everything this call registered is removed again: a file registers all its ops or none.
    """
    specs = parse_yaml(path)
    for spec in specs:
        _check_new(spec)
    library = LoadedLibrary(specs[0].namespace, specs)
    library.register_all()
    registered: list[_registry.OpState] = []
    try:
        for spec in specs:
            st = _registry.state(spec.qualname)
            st.spec = spec
            registered.append(st)
            for piece in ("meta", "backward", "setup_context"):
                if getattr(st, piece) is not None:
                    _registry.check_piece_allowed(st, piece)
            for hook in _load_hooks:
                hook(st)
    except Exception:
        for st in registered:
            _undo_side_registrations(st)
            _registry.forget(st.qualname)
        library.remove()
        raise
    for spec in specs:
        _LIBRARIES[spec.qualname] = library
    return [spec.qualname for spec in specs]


def unload(qualname: str) -> None:
    """Remove every op registered together with `qualname` (its whole file)."""
    qualname = _registry.qualify(qualname)
    library = _LIBRARIES.get(qualname)
    if library is None:
        raise OpPluginError(f"{qualname} was not loaded by op_plugin.load_yaml")
    for spec in library.specs:
        st = _registry.find(spec.qualname)
        if st is not None:
            _undo_side_registrations(st)
        _registry.forget(spec.qualname)
        _LIBRARIES.pop(spec.qualname, None)
    library.remove()


def _undo_side_registrations(st: _registry.OpState) -> None:
    while st.undo:
        st.undo.pop()()


def _check_new(spec: OpSpec) -> None:
    existing = _registry.find(spec.qualname)
    loc = spec.location.with_field("func")
    if existing is not None and existing.spec is not None:
        first = existing.spec.location
        raise YamlSpecError(loc, f"{spec.qualname} is already loaded from {first.file}:{first.line}")
    if exists_in_dispatcher(spec):
        raise YamlSpecError(loc, f"{spec.qualname} already exists in the '{spec.namespace}' namespace "
                            "(defined by torch_npu or another library); choose another name")

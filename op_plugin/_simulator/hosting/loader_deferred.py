"""TorchAir's load on a CPU host, made cheaper where op_plugin controls it: work deferred to first use.

1. **Imports of torch._inductor's pattern matcher.** `torchair/npu_fx_compiler.py` imports, at load,
   `_apply_pattern_passes` (torchair.patterns, over inductor's pattern matcher, which imports inductor's
   lowering and kernel templates) and inductor's `remove_noop_ops` (fx_passes.post_grad, the same matcher);
   `torchair/__init__.py` imports `register_replacement` (its public API) from the same pattern modules. The
   two passes run only inside `_optimize_fx`, which a compile reaches after the compile cache's hit/miss
   decision, on a miss. At load they cost ~0.6 s of CPU (with GC) in every process, a warm-cache one
   included, where aot_eager never imports them (bench/fresh_process.py). While TorchAir imports, those
   `from ... import name` statements of those importers (only those: any other importer, any other name,
   gets Python's own import) bind a forwarder. Its first call imports the real module (garbage collection
   held off, as for the load), rebinds the name in the importer to the real function, and calls it:
   TorchAir's passes are exactly its own, run later. Nothing is put in `sys.modules`; after the load the hook
   is gone.
2. **The converter registry's signatures** (`InspectForConverters`): see there.
3. **Garbage collection** is held off during the load (`no_automatic_gc`, _base/gc_scope.py; the compile around
   it walks only the objects it makes: `old_objects_frozen`).
4. **TorchAir's aten and prims converter modules** (~700, ~0.1 s of the load): `ge_converter/__init__` imports
   them with `importlib.import_module`; while TorchAir imports, that module's `import importlib` binds
   `_ImportlibDeferringConverters`, which hands back an empty package for those two and tells
   `_lowering.converter_loading` to import them (with `ge_converter.custom`, the torch_npu ops' converters
   TorchAir imports at its first lookup) when a converter is first looked up: TorchAir's own
   `try_import_submodule`, run later. converter_loading's module doc says why nothing can tell.
"""
from __future__ import annotations

import builtins
import contextlib
import functools
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import inspect
import sys
import threading
import types

import torch

from ..._base.gc_scope import no_automatic_gc
from ..._lowering import converter_loading
from ..._lowering.schema_defaults import signature_from_code

# importer -> {module -> names its module-level `from module import names` binds}
DEFERRED = {
    "torchair": {"torchair.patterns.pattern_pass_manager": ("register_replacement",)},  # its public API
    "torchair.npu_fx_compiler": {
        "torchair.patterns.pattern_util": ("_apply_pattern_passes",),
        "torch._inductor.fx_passes.post_grad": ("remove_noop_ops",),
    },
}
_lock = threading.Lock()


class _Bound:
    """What a deferred `from module import names` receives: a forwarder per name."""

    def __init__(self, importer: str, module: str, names):
        for name in names:
            setattr(self, name, _forwarder(importer, module, name))


def _forwarder(importer: str, module: str, name: str):
    def deferred(*args, **kwargs):
        return resolve(importer, module, name)(*args, **kwargs)

    deferred.__name__ = deferred.__qualname__ = name
    deferred.__doc__ = f"{module}.{name}, imported at its first call (op_plugin's loader_deferred)"
    deferred.op_plugin_deferred = (importer, module, name)
    return deferred


def resolve(importer: str, module: str, name: str):
    """The real `module.name`, imported now if need be; the importer's global is rebound to it."""
    with _lock, no_automatic_gc():
        real = getattr(importlib.import_module(module), name)
        namespace = getattr(sys.modules.get(importer), "__dict__", {})
        if getattr(namespace.get(name), "op_plugin_deferred", None) == (importer, module, name):
            namespace[name] = real
    return real


def is_deferred(value) -> bool:
    """`value` is a forwarder not yet replaced by the function it stands for."""
    return hasattr(value, "op_plugin_deferred")


def _deferrable(importer_globals, name, fromlist, level) -> tuple | None:
    if level or not fromlist or not isinstance(importer_globals, dict):
        return None
    modules = DEFERRED.get(importer_globals.get("__name__"))
    names = (modules or {}).get(name)
    if names is None or not set(fromlist) <= set(names):
        return None
    return names


class _SignatureOnDemand:
    """`inspect.signature(op)`, computed when first read (TorchAir's Converter keeps one per converter and never
    reads it: `Converter._signature`)."""

    __slots__ = ("_of", "_signature")

    def __init__(self, of):
        self._of, self._signature = of, None

    def _real(self) -> inspect.Signature:
        if self._signature is None:
            self._signature = inspect.signature(self._of)
        return self._signature

    def __getattr__(self, name):
        return getattr(self._real(), name)

    def __eq__(self, other):
        return self._real() == (other._real() if isinstance(other, _SignatureOnDemand) else other)

    __hash__ = None

    def __repr__(self):
        return repr(self._real())

    def __str__(self):
        return str(self._real())


class _ParameterNames:
    """What `inspect.signature(fn).parameters` answers to `in` for a plain function, read from its code."""

    __slots__ = ("parameters",)

    def __init__(self, code: types.CodeType):
        names, positional = code.co_varnames, code.co_argcount
        keyword_only = names[positional:positional + code.co_kwonlyargcount]
        rest = positional + code.co_kwonlyargcount
        star = names[rest:rest + 1] if code.co_flags & inspect.CO_VARARGS else ()
        rest += len(star)
        star_star = names[rest:rest + 1] if code.co_flags & inspect.CO_VARKEYWORDS else ()
        self.parameters = names[:positional] + star + keyword_only + star_star  # inspect's order


class InspectForConverters(types.ModuleType):
    """`inspect` as `fx2ge_converter` sees it while TorchAir registers its ~1,900 converters: each registration
    asks `inspect.signature` twice (the op's, kept unread, and `'meta_outputs' in` the converter's parameters),
    ~0.35 s of the load under cProfile and ~19,000 Signature and Parameter objects. The op's is computed when
    read; a plain function's parameter names come from its code (what inspect.signature reads for one); any
    other callable gets inspect's own answer."""

    def __init__(self):
        super().__init__("inspect")

    def __getattr__(self, name):
        return getattr(inspect, name)

    @staticmethod
    def signature(obj, *args, **kwargs):
        if args or kwargs:
            return inspect.signature(obj, *args, **kwargs)
        if isinstance(obj, torch._ops.OpOverload):
            return _SignatureOnDemand(obj)
        if signature_from_code(obj):
            return _ParameterNames(obj.__code__)
        return inspect.signature(obj)


CONVERTER_REGISTRY = "torchair._ge_concrete_graph.fx2ge_converter"
CONVERTER_PACKAGE = "torchair._ge_concrete_graph.ge_converter"
# the packages whose modules `ge_converter/__init__` imports one by one (`try_import_submodule`), in its order
DEFERRED_CONVERTER_PACKAGES = ("prims", "aten")


class _ImportlibDeferringConverters(types.ModuleType):
    """`importlib` as `ge_converter/__init__` sees it while TorchAir imports: `import_module` of one of
    DEFERRED_CONVERTER_PACKAGES returns a package with nothing to import (`__all__` empty) and defers the real
    import (`_load_converter_modules`); everything else is importlib's own."""

    def __init__(self):
        super().__init__("importlib")
        self.deferred: list[str] = []

    def __getattr__(self, name):
        return getattr(importlib, name)

    def import_module(self, name, package=None):
        submodule = name.removeprefix(CONVERTER_PACKAGE + ".")
        # only TorchAir's `try_import_submodule` (a TorchAir that imports them otherwise imports them now)
        if package is None and submodule in DEFERRED_CONVERTER_PACKAGES \
                and callable(getattr(sys.modules.get(CONVERTER_PACKAGE), "try_import_submodule", None)):
            if submodule not in self.deferred:
                self.deferred.append(submodule)
                converter_loading.defer(functools.partial(_load_converter_modules, tuple(self.deferred)))
            return types.SimpleNamespace(__all__=())
        return importlib.import_module(name, package)


# TorchAir's functions that read its whole converter registry, or import `ge_converter.custom` at a miss
_REGISTRY_READERS = ("_get_converter", "_declare_supported_converters")


def _loading_converters_first(reader):
    """`reader` with the deferred converter modules loaded first (`custom` among them, so that its registrations
    are TorchAir's, made before any later one)."""

    @functools.wraps(reader)
    def read(*args, **kwargs):
        converter_loading.ensure_loaded()
        return reader(*args, **kwargs)

    read.op_plugin_loads_converters = True
    return read


def _bind_loading_readers() -> None:
    """After TorchAir's load, while its converter modules are deferred: each of _REGISTRY_READERS, in the
    registry and in every TorchAir module that imported the name (torchair.fx_summary), loads them first."""
    registry = sys.modules.get(CONVERTER_REGISTRY)
    if registry is None or not converter_loading.pending():
        return
    for name in _REGISTRY_READERS:
        reader = getattr(registry, name, None)
        if reader is None or getattr(reader, "op_plugin_loads_converters", False):
            continue
        wrapper = _loading_converters_first(reader)
        for module_name, module in list(sys.modules.items()):
            if module_name.startswith("torchair") and getattr(module, "__dict__", {}).get(name) is reader:
                setattr(module, name, wrapper)


def _load_converter_modules(submodules: tuple[str, ...]) -> None:
    """What `ge_converter/__init__` would have imported at TorchAir's load, imported now by its own
    `try_import_submodule` (the registry's signatures as at the load, no automatic GC), then `custom`, which
    TorchAir imports at its first lookup. A registration made since the deferral keeps its declared cases."""
    package = sys.modules[CONVERTER_PACKAGE]
    registry = sys.modules[CONVERTER_REGISTRY]
    if isinstance(package.__dict__.get("importlib"), _ImportlibDeferringConverters):
        package.importlib = importlib
    declared = registry._DECLARED_SUPPORTED_CONVERTERS
    later = {op: declared[op] for op in converter_loading.ops_registered_since_deferral() if op in declared}
    registry_inspect = registry.__dict__.get("inspect")
    registry.inspect = InspectForConverters()
    try:
        with no_automatic_gc():
            for submodule in submodules:
                package.try_import_submodule(submodule)
            importlib.import_module(CONVERTER_PACKAGE + ".custom")
    finally:
        registry.inspect = registry_inspect
    declared.update(later)


class _AfterExec(importlib.abc.MetaPathFinder):
    """Finds nothing itself: the converter registry's `inspect` is rebound right after the module executes,
    before any converter registers (they import it)."""

    def find_spec(self, fullname, path, target=None):
        if fullname != CONVERTER_REGISTRY:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None:
            return None
        original_exec = spec.loader.exec_module

        def exec_module(module):
            original_exec(module)
            if module.__dict__.get("inspect") is inspect:
                module.inspect = InspectForConverters()

        spec.loader.exec_module = exec_module
        return spec


def restore_inspect() -> None:
    """After the load: later registrations (op_plugin's, a user's) get inspect's own answers."""
    module = sys.modules.get(CONVERTER_REGISTRY)
    if module is not None and isinstance(module.__dict__.get("inspect"), InspectForConverters):
        module.inspect = inspect


@contextlib.contextmanager
def deferring():
    """Within the block (TorchAir's import), the imports listed in DEFERRED bind forwarders, and the converter
    registry asks InspectForConverters for signatures."""
    finder = _AfterExec()
    sys.meta_path.insert(0, finder)
    try:
        with _forwarding_imports():
            yield
    finally:
        sys.meta_path.remove(finder)
        restore_inspect()
        _bind_loading_readers()


@contextlib.contextmanager
def _forwarding_imports():
    below = builtins.__import__
    active = [True]

    def _import(name, globals=None, locals=None, fromlist=(), level=0):
        if active[0] and _deferrable(globals, name, fromlist, level) is not None \
                and importlib.util.find_spec(name) is not None:  # a missing module still raises ImportError now
            return _Bound(globals["__name__"], name, fromlist)
        if active[0] and name == "importlib" and not fromlist and not level \
                and isinstance(globals, dict) and globals.get("__name__") == CONVERTER_PACKAGE:
            return _ImportlibDeferringConverters()
        return below(name, globals, locals, fromlist, level)

    builtins.__import__ = _import
    try:
        yield
    finally:
        active[0] = False  # a hook installed over ours meanwhile keeps it in its chain, passing through
        if builtins.__import__ is _import:
            builtins.__import__ = below

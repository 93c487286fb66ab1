"""op_plugin's own GE converters, in one registry: declared beside their code, installed on the
host's TorchAir, taken back by handle.

A converter is a function `fn(ta, *args, meta_outputs=None, **kwargs)`: TorchAir's converter
signature with a `TorchAirApi` first (`torchair_api`; TorchAir passes `meta_outputs` only to
converters that name it). It is declared with what it is for, and why in its docstring:

    @aten_converter(torch.ops.aten.eye.default, when="missing", cases=[Support(3)])
    def eye(ta, n, m=None, *, dtype=None, ..., meta_outputs=None):
        "TorchAir raises NotImplementedError; XLNet builds its mask with torch.eye (...)."

`when` says where it is installed (checked per op at installation, on the host's TorchAir):

- "missing": only where TorchAir has no converter, or one that only raises NotImplementedError;
  a TorchAir that lowers the op keeps its own;
- "completes": only where TorchAir has a converter, which it receives as `ta.original`: it lowers
  the cases TorchAir's refuses and hands every other to it;
- "corrects": always, replacing TorchAir's converter (`ta.original`, kept for the cases it gets
  right), whose numbers depart from torch_npu's eager.

`@library_converter("transformers::grouped_mm_fallback")` declares a converter of an op a model
library registers when it is imported, possibly after the first compile: installed (where TorchAir
does not lower it, as "missing") by the installation or by the first refresh after the op appears
(`install.refresh_library_converters`, at every compile). Decorators stack, one per op with its
own cases.

Installed, a converter is `fn` with the installation's `TorchAirApi` bound (`ConverterEntry.bind`);
it records the converter it replaced, so `ta.converter(op)` still finds TorchAir's own (the
completion of `_native_batch_norm_legit.no_stats` calls TorchAir's functional batch norm, not the
correction of it).

`cases` are TorchAir-style declared cases (`cases.Support`): `op-plugin declared-cases` runs them
beside TorchAir's, as `<target>#op_plugin-<n>` (`declared_cases()`).

`swap_converter` is the one way op_plugin puts a converter into TorchAir's registry (these and the
YAML ops' converters, `install`): its handle puts back what was there before.
"""
from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Literal

import torch

from .._base.handles import HandleGroup, RegistrationHandle
from . import converter_loading
from .torchair_api import REPLACED, TorchAirApi, converter_table, torchair_converter, torchair_lowers

When = Literal["missing", "completes", "corrects", "library"]
_WHEN = ("missing", "completes", "corrects")
_MISSING = object()


@dataclass(frozen=True)
class ConverterEntry:
    """One declared converter: `fn` for each of `declared` (ops, or "ns::name" of library ops and of ops
    defined after op_plugin's import)."""

    fn: Callable
    declared: tuple
    when: When
    cases: tuple = ()

    @property
    def targets(self) -> tuple:
        """The declared targets, a "ns::name" of a non-library converter as its op once that is defined."""
        if self.when == "library":
            return self.declared
        return tuple((library_op(t) or t) if isinstance(t, str) else t for t in self.declared)

    def bind(self, ta: TorchAirApi) -> Callable:
        """`fn` with `ta` bound: TorchAir's converter signature (its own, less `ta`)."""
        fn = self.fn

        @functools.wraps(fn)
        def convert(*args, **kwargs):
            return fn(ta, *args, **kwargs)

        signature = inspect.signature(fn)
        convert.__signature__ = signature.replace(parameters=list(signature.parameters.values())[1:])
        setattr(convert, REPLACED, ta._original)
        return convert


_ENTRIES: list[ConverterEntry] = []


def aten_converter(*ops: Any, when: When, cases=()) -> Callable[[Callable], Callable]:
    """Declare `fn(ta, ...)` as op_plugin's converter of `ops` (aten ops, or FX targets such as
    `torch.sym_max`, or "ns::name" of an op defined later, resolved at installation: torch_npu's ops
    on a CPU host); `when`: "missing", "completes" or "corrects" (module docstring)."""
    if when not in _WHEN:
        raise ValueError(f"when must be one of {_WHEN}, got {when!r}")
    return _declare(ops, when, cases)


def library_converter(*qualnames: str, cases=()) -> Callable[[Callable], Callable]:
    """Declare `fn(ta, ...)` as op_plugin's converter of library ops ("namespace::name", overload
    `default`) that may be registered after the first compile."""
    return _declare(qualnames, "library", cases)


def _declare(targets: tuple, when: When, cases) -> Callable[[Callable], Callable]:
    def decorate(fn: Callable) -> Callable:
        _ENTRIES.append(ConverterEntry(fn, tuple(targets), when, tuple(cases)))
        return fn

    return decorate


def entries(when: When | None = None) -> list[ConverterEntry]:
    """The declared converters (of one `when`), in declaration order."""
    return [e for e in _ENTRIES if when is None or e.when == when]


def swap_converter(torchair: Any, op: Any, fn: Callable, description: str) -> RegistrationHandle:
    """Register `fn` as `op`'s converter through TorchAir's `register_fx_node_ge_converter`; the
    handle restores the converter that was there before (or none), if `fn`'s is still in place
    (a later registration is left alone)."""
    if not hasattr(op, "__dict__"):
        return _swap_table_converter(torchair, op, fn, description)
    previous = op.__dict__.get("_ge_converter", _MISSING)
    torchair.register_fx_node_ge_converter(op)(fn)
    ours = op.__dict__.get("_ge_converter")

    def restore():
        if op.__dict__.get("_ge_converter") is not ours:
            return  # a later registration replaced ours: leave it
        if previous is _MISSING:
            op.__dict__.pop("_ge_converter", None)
            converter_loading.unregistered(op)  # TorchAir's, if its modules loaded since and registered one
        else:
            op._ge_converter = previous

    return RegistrationHandle(restore, description)


def _swap_table_converter(torchair: Any, op: Any, fn: Callable, description: str) -> RegistrationHandle:
    """`swap_converter` for a target with no attributes (a builtin such as `math.trunc`), whose
    converter TorchAir keeps in its table (`converter_table`)."""
    torchair.register_fx_node_ge_converter(op)  # imports TorchAir's graph module, and so its table
    table = converter_table()
    previous = table.get(op, _MISSING)
    torchair.register_fx_node_ge_converter(op)(fn)
    ours = table.get(op)

    def restore():
        if table.get(op) is not ours:
            return  # a later registration replaced ours: leave it
        if previous is _MISSING:
            table.pop(op, None)
        else:
            table[op] = previous

    return RegistrationHandle(restore, description)


def install_aten_converters(ta: TorchAirApi) -> HandleGroup:
    """op_plugin's "missing", "completes" and "corrects" converters on `ta`'s TorchAir, each where
    its `when` says; destroying the group restores TorchAir's."""
    with HandleGroup("op_plugin's aten converters") as group:
        for when in _WHEN:
            for entry in entries(when):
                for target in entry.declared:
                    op = _npu_target(ta, target) if isinstance(target, str) else target
                    if op is None:
                        continue
                    original = torchair_converter(op)
                    if when == "missing" and torchair_lowers(op):
                        continue  # TorchAir's own converter wins
                    if when == "completes" and original is None:
                        continue  # nothing to complete
                    if when == "missing":
                        original = None  # a stub, if anything: nothing to hand cases to
                    group.add(swap_converter(ta.torchair, op, entry.bind(ta.for_converter(op, original)),
                                             f"op_plugin's converter of {op} ({when})"))
    return group


def _npu_target(ta: TorchAirApi, qualname: str) -> Any | None:
    """The op of a "ns::name" target (defined after op_plugin's import: torch_npu's ops on a CPU
    host), with TorchAir's custom converters imported first (TorchAir imports them lazily, at its
    first lookup), so that a completion finds TorchAir's converter to complete; None if undefined."""
    op = library_op(qualname)
    if op is not None and qualname.startswith("npu::"):  # torch_npu's ops: TorchAir's `custom` package
        ta._module("_ge_concrete_graph.ge_converter.custom")
    return op


_library_handles: dict[str, RegistrationHandle] = {}


def install_library_converters(ta: TorchAirApi) -> HandleGroup:
    """op_plugin's converter of each declared library op that exists by now (and is neither
    installed already nor lowered by TorchAir itself)."""
    with HandleGroup("op_plugin's converters of library ops") as group:
        for entry in entries("library"):
            for qualname in entry.targets:
                installed = _library_handles.get(qualname)
                if installed is not None and not installed.destroyed:
                    continue
                op = library_op(qualname)
                if op is None or torchair_lowers(op):
                    continue  # the library is not imported (yet), or TorchAir lowers its op
                _library_handles[qualname] = group.add(swap_converter(
                    ta.torchair, op, entry.bind(ta.for_converter(op)), f"op_plugin's converter of {op}"))
    return group


def library_op(qualname: str) -> Any | None:
    """The overload "namespace::name.overload" (`default` when "namespace::name"), or None if not registered
    (yet)."""
    namespace, name = qualname.split("::")
    name, _, overload = name.partition(".")
    try:
        return getattr(getattr(getattr(torch.ops, namespace), name), overload or "default")
    except (AttributeError, RuntimeError):
        return None


def declared_cases() -> Iterator[tuple[Any, int, Any]]:
    """(target, n, Support) of every declared case, n counting from 1 per target; library ops
    that are not registered have none."""
    count: dict[Any, int] = {}
    for entry in _ENTRIES:
        for target in entry.declared:
            op = library_op(target) if entry.when == "library" or isinstance(target, str) else target
            if op is None:
                continue
            for support in entry.cases:
                count[op] = count.get(op, 0) + 1
                yield op, count[op], support

"""The schema's defaults for the arguments an FX node leaves out, where TorchAir's converter assumes others.

An FX node drops an argument equal to its schema default, so TorchAir's converter receives it as its
own Python default. Where the two differ, the graph computes something else than eager, on an NPU
too: `npu_group_norm_silu`'s schema says `eps=1e-5`, its converter `eps=0.0001`; `aten._embedding_bag`
says `mode=0` (sum), its converter `mode=1` (mean); `aten.gelu`'s `approximate="none"` against the
converter's `"None"`.

`install_schema_defaults` (at the first compile, `install.refresh_library_converters`) finds every
such converter (aten's and torch_npu's ops, comparing each declared default of the op's schema with
the converter's default for the argument of the same name) and registers in its place a converter
that passes those arguments with the schema's default when the node left them out, then calls
TorchAir's. Found, not listed: a TorchAir with other defaults is
handled alike. `default_mismatches(op)` says what differs (docs/npu-faithful-lowering.md lists it).

The scan costs a warm-cache process's first compile too (the key hashes each op's converter, wrapped or not),
so it reads what `inspect.signature` would: a plain function's defaults from its code, and only the
overloads torch has built so far (a converter is registered on an overload object, so an overload never
looked up has none).
"""
from __future__ import annotations

import functools
import inspect
import math
from collections.abc import Callable, Iterator
from types import FunctionType
from typing import Any

import torch

from .._base.handles import HandleGroup
from .registry import swap_converter
from .torchair_api import TorchAirApi, torchair_converter

_NAMESPACES = ("aten", "npu")


def _same(schema_default: Any, converter_default: Any) -> bool:
    if isinstance(schema_default, bool) or isinstance(converter_default, bool):
        return schema_default is converter_default
    if isinstance(schema_default, (int, float)) and isinstance(converter_default, (int, float)):
        return math.isclose(float(schema_default), float(converter_default), rel_tol=1e-9, abs_tol=0.0)
    if isinstance(schema_default, (list, tuple)) and isinstance(converter_default, (list, tuple)):
        return list(schema_default) == list(converter_default)
    return schema_default == converter_default


def default_mismatches(op: Any, converter: Callable | None = None) -> dict[str, tuple[int | None, Any]]:
    """name -> (positional index or None for a keyword-only argument, the schema's default), for each
    argument whose schema default (other than None) differs from TorchAir's converter's default."""
    converter = converter if converter is not None else torchair_converter(op)
    if converter is None:
        return {}
    defaults = parameter_defaults(converter)
    if not defaults:
        return {}
    found, position = {}, 0
    for arg in op._schema.arguments:
        index = None if arg.kwarg_only else position
        position += 0 if arg.kwarg_only else 1
        if arg.name not in defaults or not arg.has_default_value() or arg.default_value is None:
            continue
        if not _same(arg.default_value, defaults[arg.name]):
            found[arg.name] = (index, arg.default_value)
    return found


def signature_from_code(fn: Callable) -> bool:
    """`inspect.signature(fn)` reads only `fn`'s code and defaults: a plain function with no `__wrapped__` to
    follow and no `__signature__` set, whose parameters can then be read from them directly."""
    return type(fn) is FunctionType and "__wrapped__" not in fn.__dict__ and "__signature__" not in fn.__dict__


def parameter_defaults(fn: Callable) -> dict[str, Any]:
    """name -> default of each parameter of `fn` that has one, as `inspect.signature(fn)` gives them ({} when
    it has no signature). A plain function's come from its code and defaults (what inspect reads, at a
    fraction of the cost: the scan runs over ~1,800 converters)."""
    if signature_from_code(fn):
        code = fn.__code__
        positional = code.co_varnames[:code.co_argcount]
        defaults = fn.__defaults__ or ()
        found = dict(zip(positional[len(positional) - len(defaults):], defaults, strict=True)) if defaults else {}
        found.update(fn.__kwdefaults__ or {})
        return found
    try:
        parameters = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return {}
    return {name: p.default for name, p in parameters.items() if p.default is not inspect.Parameter.empty}


def passing_schema_defaults(converter: Callable, missing: dict[str, tuple[int | None, Any]]) -> Callable:
    def with_schema_defaults(*args, **kwargs):
        for name, (index, default) in missing.items():
            if name not in kwargs and (index is None or index >= len(args)):
                kwargs[name] = default
        return converter(*args, **kwargs)

    # TorchAir reads the converter's signature (meta_outputs); the name and module stay op_plugin's
    functools.update_wrapper(with_schema_defaults, converter, assigned=("__doc__",))
    return with_schema_defaults


def _overloads() -> Iterator[Any]:
    """The overloads of aten's and torch_npu's ops with a TorchAir converter: torch caches each packet and each
    overload object on its first lookup (TorchAir's registration is one), so the cached ones are searched;
    asking every packet for all its overloads built ~750 overloads no converter is registered on."""
    for namespace in _NAMESPACES:
        ops = getattr(torch.ops, namespace)
        for _name, packet in sorted(vars(ops).items()):
            if not isinstance(packet, torch._ops.OpOverloadPacket):
                continue
            for op in list(vars(packet).values()):
                if isinstance(op, torch._ops.OpOverload) and "_ge_converter" in op.__dict__:
                    yield op


def install_schema_defaults(ta: TorchAirApi) -> HandleGroup:
    """TorchAir's converters whose defaults differ from their op's schema, each wrapped to pass the
    schema's default for what the node left out; destroying the group restores TorchAir's."""
    try:
        ta._module("_ge_concrete_graph.ge_converter.custom")  # torch_npu's ops' converters load lazily
    except ImportError:
        pass  # a TorchAir without torch_npu's converters: the aten ones are checked
    with HandleGroup("schema defaults for TorchAir's converters") as group:
        for op in _overloads():
            converter = torchair_converter(op)
            if converter is None or converter.__module__.startswith("op_plugin"):
                continue
            missing = default_mismatches(op, converter)
            if missing:
                group.add(swap_converter(ta.torchair, op, passing_schema_defaults(converter, missing),
                                         f"{op}: the schema's defaults for {sorted(missing)}"))
    return group

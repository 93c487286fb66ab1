"""The key of npugraph's compile cache (hosting/compile_cache.py): what a lowering depends on, hashed.

Auditable: every entry keeps the details its key hashes (`key_details`, JSON data). They are the FX graph's code,
every node's meta (shapes with their symbols, strides, dtypes), the bytes of its constants, each input's spec and
the attrs TorchAir reads from it, the code of the converter of every op in the graph, TorchAir's compile options,
what the caller adds (op_plugin's options, the YAML files loaded and op_plugin's own source: `source_digest`),
and the versions of Python, torch and the wheel.

An op whose converter comes from TorchAir's converter modules, which load at the first converter lookup
(`_lowering/converter_loading.py`), is keyed by those modules' files instead of its converter's code
(`torchair_converters_digest`: the same files register the same converter, completed by the same op_plugin
source), so a hit imports none of them; a graph whose lowering had to add a converter to such an op is not
stored (`lacking_converters`).
"""
from __future__ import annotations

import functools
import hashlib
import json
import marshal
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from types import CodeType, FunctionType, MethodType, ModuleType

import torch

from ..._lowering import converter_loading
from ..._lowering.torchair_api import converter_table

FORMAT = 1  # of the entries (and of the key's details): bumped when either changes


@functools.cache
def source_digest() -> str:
    """A digest of op_plugin's own Python source (the package, its shipped converters and Meta functions): any
    change to op_plugin can change a lowering, as torch's source is in inductor's key. Each file enters by
    name, size and modification time (a stat, not a read: reading all of them cost 0.14 s of a first compile)."""
    import importlib.util

    folders = {Path(__file__).resolve().parents[2]}
    for name in ("op_plugin.converters", "op_plugin.meta_functions"):
        spec = importlib.util.find_spec(name)
        if spec is not None:
            folders.update(Path(location).resolve() for location in spec.submodule_search_locations or [])
    return _files_digest(folders)


@functools.cache
def torchair_converters_digest() -> str:
    """A digest of TorchAir's converter modules (`ge_converter/`, by the same stat as `source_digest`): what an
    op's converter is keyed by when those modules give it (`converter_loading`)."""
    import importlib.util

    spec = importlib.util.find_spec("torchair._ge_concrete_graph.ge_converter")
    return "torchair-converter-modules:" + _files_digest(
        {Path(location).resolve() for location in spec.submodule_search_locations or []})


def _files_digest(folders) -> str:
    entries = []
    for folder in sorted(folders):
        for root, dirs, files in os.walk(folder):
            dirs[:] = [d for d in dirs if d != "__pycache__"]
            for file_name in files:
                if file_name.endswith(".py"):
                    status = os.stat(os.path.join(root, file_name))
                    entries.append(f"{os.path.relpath(os.path.join(root, file_name), folder)}\0{status.st_size}"
                                   f"\0{status.st_mtime_ns}")
    return hashlib.sha256("\n".join(sorted(entries)).encode()).hexdigest()


# ---- the key -------------------------------------------------------------------------------------------

def _describe(value) -> object:
    """A value's spec as JSON data: tensors by dtype, sizes (symbols by name), strides, offset, device."""
    if isinstance(value, torch.Tensor):
        return {"dtype": str(value.dtype), "shape": [str(s) for s in value.shape],
                "stride": [str(s) for s in value.stride()], "offset": str(value.storage_offset()),
                "device": str(value.device), "requires_grad": bool(value.requires_grad),
                "layout": str(value.layout)}
    if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        return {"sym": str(value.node.expr)}
    if isinstance(value, (list, tuple)):
        return [_describe(item) for item in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return {"type": type(value).__qualname__}


def _code_digest(fn, hasher, seen: set, depth: int = 0) -> None:
    """The bytecode (with constants and names) of `fn` and of the functions it closes over or wraps."""
    if depth > 6 or id(fn) in seen:
        return
    seen.add(id(fn))
    if isinstance(fn, MethodType):
        fn = fn.__func__
    code = getattr(fn, "__code__", None)
    if isinstance(code, CodeType):
        hasher.update(marshal.dumps(code))
    if isinstance(fn, FunctionType):
        for cell in fn.__closure__ or ():
            try:
                content = cell.cell_contents
            except ValueError:  # an empty cell
                continue
            if callable(content) and not isinstance(content, (type, ModuleType)):
                _code_digest(content, hasher, seen, depth + 1)
    wrapped = getattr(fn, "__wrapped__", None)
    if wrapped is not None:
        _code_digest(wrapped, hasher, seen, depth + 1)
    if not isinstance(fn, FunctionType) and hasattr(fn, "__dict__"):  # a converter object (TorchAir's wrappers)
        for attribute in vars(fn).values():
            if isinstance(attribute, (FunctionType, MethodType)):
                _code_digest(attribute, hasher, seen, depth + 1)


def _from_converter_modules(target) -> bool:
    """`target`'s converter, if any, is the one TorchAir's converter modules (and op_plugin's corrections of
    them) register: no registration since their load was deferred replaced it (`converter_loading`)."""
    return (converter_loading.deferral_active() and isinstance(target, converter_loading.SLOT_OWNERS)
            and not converter_loading.registered_since_deferral(target))


def _converter_digest(target) -> str | None:
    from torchair._ge_concrete_graph.fx2ge_converter import _get_converter

    if _from_converter_modules(target):
        return torchair_converters_digest()
    # where TorchAir keeps it; TorchAir's own lookup loads its deferred converter modules first
    converter = getattr(target, "__dict__", {}).get("_ge_converter") or converter_table().get(target) \
        or _get_converter(target)
    if converter is None:
        return None
    hasher = hashlib.sha256()
    _code_digest(converter, hasher, set())
    return hasher.hexdigest()


def _tensor_digest(name: str, value: torch.Tensor) -> str:
    """sha256 of a constant's bytes (any dtype torch can view as bytes)."""
    try:
        data = value.detach().contiguous().cpu().reshape(-1)
        raw = data.view(torch.uint8).numpy().tobytes() if data.numel() else b""
    except (RuntimeError, TypeError) as error:  # quantized, sparse, sub-byte dtypes
        raise NotCacheable(f"constant {name} ({value.dtype}) cannot be read as bytes: {error}") from None
    return hashlib.sha256(raw).hexdigest()


def _target_name(target) -> str:
    if isinstance(target, (torch._ops.OpOverload, torch._ops.OpOverloadPacket)):
        return str(target)
    return f"{getattr(target, '__module__', '')}.{getattr(target, '__qualname__', repr(target))}"


def _torchair_options(config) -> object:
    try:
        return [dict(part) for part in config.as_dict()]
    except (TypeError, ValueError, AttributeError):
        return repr(config.as_dict())


class NotCacheable(Exception):
    pass


def key_details(gm: torch.fx.GraphModule, example_inputs, config, caller_details: Mapping) -> dict:
    """What the key hashes, as JSON data; raises NotCacheable with the reason."""
    from torchair.npu_fx_compiler import _get_inputs_custom_attr

    nodes, converters, constants = [], {}, {}
    for node in gm.graph.nodes:
        nodes.append([node.name, _describe(node.meta.get("val"))])
        if node.op == "call_function":
            name = _target_name(node.target)
            if name not in converters:
                if isinstance(node.target, converter_loading.SLOT_OWNERS) or hasattr(node.target, "_ge_converter"):
                    digest = _converter_digest(node.target)
                    if digest is None:
                        raise NotCacheable(f"{name} has no converter")
                    converters[name] = digest
                else:  # operator.getitem and the like: TorchAir handles them itself
                    converters[name] = "builtin"
        elif node.op == "get_attr":
            value = getattr(gm, node.target, None)
            if isinstance(value, torch.Tensor):
                if value.device.type == "meta" or torch._subclasses.fake_tensor.is_fake(value):
                    raise NotCacheable(f"constant {node.target} has no data")
                constants[node.target] = [_describe(value), _tensor_digest(node.target, value)]
            else:
                constants[node.target] = _describe(value)
    custom_attrs = {str(index): {k: repr(v) for k, v in sorted(attrs.items())}
                    for index, attrs in _get_inputs_custom_attr(list(example_inputs)).items()}
    return {
        "format": FORMAT,
        "python": sys.version,
        "torch": torch.__version__,
        "code": gm.code,
        "nodes": nodes,
        "constants": constants,
        "inputs": [_describe(value) for value in example_inputs],
        "input_attrs": custom_attrs,
        "converters": converters,
        "torchair_options": _torchair_options(config),
        "caller": dict(caller_details),
    }


def key_of(details: dict) -> str:
    return hashlib.sha256(json.dumps(details, sort_keys=True, default=str).encode()).hexdigest()


def lacking_converters(details: dict) -> str | None:
    """The first op keyed by TorchAir's converter modules that had no converter of theirs before this lowering
    (the key could not tell: it reads no converter), or None."""
    token = torchair_converters_digest() if converter_loading.deferral_active() else None
    for name, digest in details["converters"].items():
        if digest == token:
            op = _overload_named(name)
            if op is None or not _from_converter_modules(op) or "_ge_converter" not in op.__dict__:
                return name
    return None


def _overload_named(name: str):
    """The OpOverload(Packet) `str(op)` named (`aten.add.Tensor`, `aten.sym_size`), or None."""
    namespace, _, rest = name.partition(".")
    try:
        found = getattr(torch.ops, namespace)
        for part in rest.split("."):
            found = getattr(found, part)
    except (AttributeError, RuntimeError):
        return None
    return found if isinstance(found, converter_loading.SLOT_OWNERS) else None

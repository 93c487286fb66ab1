"""npugraph's persistent compile cache on a CPU host: TorchAir's lowering of an FX graph, done once.

TorchAir's inner compiler (`_NpuFxCompiler._gen_compiled_gm`) turns each AOT graph (forward, backward) into
a GE graph by running its converters. Here, in GE mode, that result is stored as TorchAir itself stores it
for `torchair.inference.cache_compile`: the source `GeConcreteGraph.codegen(enable_cache=True)` writes
(the serialized GE graph and the code that feeds it), plus the FX shapes op_plugin's executor checks
intermediate results against (`fx_meta`). A later compile of the same graph, in this process or another,
runs that code instead of the converters: TorchAir's own load path, the same GE graph, the same executor.

Key (auditable: every entry keeps the details its key hashes): the FX graph's code, every node's meta
(shapes with their symbols, strides, dtypes), the bytes of its constants, each input's spec and the
attrs TorchAir reads from it, the code of the converter of every op in the graph, TorchAir's compile
options, what the caller adds (op_plugin's options, the YAML files loaded and op_plugin's own source),
and the versions of Python, torch and the wheel.

Not cached (compiled as before, said at debug level): graphs with collectives (their process groups are
rebuilt by name), random ops (TorchAir's codegen refuses their RNG inputs), a target without a converter
(TorchAir compiles a callback for it), constants that are not real tensors, graphs whose lowering added a
guard on a dynamic size (a hit would not add it again), and compiles with dumps, data dumps, fx_summary or
run_eagerly. The store is `op_plugin._base.signed_cache` (signed entries: a tampered one is refused, never
run).
"""
from __future__ import annotations

import functools
import hashlib
import json
import logging
import marshal
import os
import sys
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import CodeType, FunctionType, MethodType, ModuleType

import torch
from torch._subclasses.fake_tensor import unset_fake_temporarily

from ..._base.signed_cache import SignedCache, user_cache_root, user_secret
from . import fx_meta

log = logging.getLogger(__name__)

FORMAT = 1
ENV_OFF = "OP_PLUGIN_COMPILE_CACHE"      # "0": off
ENV_DIR = "OP_PLUGIN_CACHE_DIR"          # the cache's folder (default: ~/.cache/op_plugin)
ENV_SIZE = "OP_PLUGIN_CACHE_MAX_MB"      # its size bound (default 1024)


def is_enabled_by_environment() -> bool:
    return os.environ.get(ENV_OFF, "1").strip().lower() not in ("0", "false", "off", "no")


def cache_folder() -> Path:
    root = os.environ.get(ENV_DIR)
    return (Path(root) if root else user_cache_root() / "op_plugin") / f"compile-v{FORMAT}"


@functools.cache
def _store(folder: Path) -> SignedCache | None:
    """The cache in `folder`, or None (said once) when the user's signing secret cannot be read or made."""
    try:
        max_mb = int(os.environ.get(ENV_SIZE, "1024"))
    except ValueError:
        warnings.warn(f"${ENV_SIZE} is not a number of megabytes: the compile cache keeps its default (1024)",
                      RuntimeWarning, stacklevel=3)
        max_mb = 1024
    try:
        secret = user_secret()
    except (OSError, ValueError) as error:
        warnings.warn(f"op_plugin compile cache: off in this process, its signing secret cannot be read or made "
                      f"({error}); set $XDG_CONFIG_HOME to a writable folder, or {ENV_OFF}=0 to silence this",
                      RuntimeWarning, stacklevel=3)
        return None
    return SignedCache(folder, secret, max_mb * 1024 * 1024)


@dataclass(frozen=True)
class Stats:
    hits: int = 0
    misses: int = 0
    stored: int = 0
    uncacheable: int = 0


_stats = {"hits": 0, "misses": 0, "stored": 0, "uncacheable": 0}
# Set on the TorchAir CompilerConfig of a compile that uses the cache: what the caller adds to the key.
_CONFIG_ATTR = "_op_plugin_compile_cache"


def stats() -> Stats:
    """This process's counts (tests and `make bench` read them)."""
    return Stats(**_stats)


def enable_for(compiler_config, caller_details: Mapping) -> None:
    """Cache the GE-mode graphs compiled with this TorchAir CompilerConfig (forward and, later, backward)."""
    # CompilerConfig refuses attributes it does not declare (and is unhashable): set past its __setattr__.
    object.__setattr__(compiler_config, _CONFIG_ATTR, dict(caller_details))


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


def _converter_digest(target) -> str | None:
    from torchair._ge_concrete_graph.fx2ge_converter import _get_converter

    converter = _get_converter(target)
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
        raise _NotCacheable(f"constant {name} ({value.dtype}) cannot be read as bytes: {error}") from None
    return hashlib.sha256(raw).hexdigest()


def _target_name(target) -> str:
    if isinstance(target, torch._ops.OpOverload):
        return str(target)
    return f"{getattr(target, '__module__', '')}.{getattr(target, '__qualname__', repr(target))}"


def _torchair_options(config) -> object:
    try:
        return [dict(part) for part in config.as_dict()]
    except (TypeError, ValueError, AttributeError):
        return repr(config.as_dict())


class _NotCacheable(Exception):
    pass


def key_details(gm: torch.fx.GraphModule, example_inputs, config, caller_details: Mapping) -> dict:
    """What the key hashes, as JSON data; raises _NotCacheable with the reason."""
    from torchair.npu_fx_compiler import _get_inputs_custom_attr

    nodes, converters, constants = [], {}, {}
    for node in gm.graph.nodes:
        nodes.append([node.name, _describe(node.meta.get("val"))])
        if node.op == "call_function":
            name = _target_name(node.target)
            if name not in converters:
                if isinstance(node.target, torch._ops.OpOverload) or hasattr(node.target, "_ge_converter"):
                    digest = _converter_digest(node.target)
                    if digest is None:
                        raise _NotCacheable(f"{name} has no converter")
                    converters[name] = digest
                else:  # operator.getitem and the like: TorchAir handles them itself
                    converters[name] = "builtin"
        elif node.op == "get_attr":
            value = getattr(gm, node.target, None)
            if isinstance(value, torch.Tensor):
                if value.device.type == "meta" or torch._subclasses.fake_tensor.is_fake(value):
                    raise _NotCacheable(f"constant {node.target} has no data")
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


# ---- the hook -------------------------------------------------------------------------------------------

def _config_allows(config) -> str | None:
    if config.mode.value != "max-autotune":
        return f"mode {config.mode.value}"
    if config.debug.graph_dump.enabled or config.debug.data_dump.enabled or config.debug.fx_summary.enabled:
        return "a dump is requested"
    if config.debug.run_eagerly or config.export.export_mode:
        return "run_eagerly or export"
    if config.dump_config.enable_dump.value == "1":
        return "a data dump is requested"
    return None


def _load(payload: dict):
    """The kernel TorchAir's own cache load builds from the stored source, with the FX shapes attached."""
    from torchair.npu_fx_compiler import _compile_py_code

    module = _compile_py_code(payload["py_code"])
    # The generated kernel asserts, at its first run, that each input has the size and stride of the compile's
    # example input; TorchAir's runner, which a miss returns, does not, and takes any strides (a backward graph
    # gets the forward GE graph's contiguous outputs where AOT's fake saved tensors had other strides). A hit
    # behaves as the miss did: the same inputs are accepted.
    if hasattr(module, "assert_size_stride"):
        module.assert_size_stride = _accept_any_strides
    executor = getattr(getattr(module, "ge_graph", None), "_executor", None)
    if executor is not None and hasattr(executor, "fx_meta"):
        executor.fx_meta = fx_meta.record_from_data(payload["fx_meta"])
    return module.kernel


def _accept_any_strides(*_args) -> None:
    return None


def _guard_count(example_inputs) -> int:
    from torch._guards import detect_fake_mode

    fake_mode = detect_fake_mode(list(example_inputs))
    shape_env = getattr(fake_mode, "shape_env", None)
    return -1 if shape_env is None else len(shape_env.guards)


def _store_result(store: SignedCache, runner, key: str, details: dict, guards_before: int,
                  example_inputs) -> str | None:
    """Store `runner`'s generated source; the reason it is not cacheable, or None when stored."""
    from torchair._ge_concrete_graph.fx2ge_converter import GeConcreteGraph

    if not isinstance(runner, GeConcreteGraph):
        return f"TorchAir returned {type(runner).__name__}"
    if runner.graph.used_process_group:
        return "the graph has collectives"
    if _guard_count(example_inputs) != guards_before:
        return "lowering added a guard on a dynamic size"
    try:
        py_code = runner.codegen(extend_config={}, enable_cache=True)
    except AssertionError as error:  # TorchAir: "Cache compile does not support operator that depend on RNG"
        return str(error)
    if not isinstance(py_code, str):
        return "TorchAir's codegen does not support this graph's options"
    unbound = unbound_names(py_code)
    if unbound:  # e.g. a size symbol no input carries: TorchAir's runner computes it, its codegen does not
        return f"TorchAir's generated code names {', '.join(unbound)} without defining them"
    executor = getattr(runner.graph, "_executor", None)
    try:
        record = fx_meta.record_to_data(getattr(executor, "fx_meta", None))
    except fx_meta.UnserializableRecord as error:
        return str(error)
    store.put(key, {"details": details, "py_code": py_code, "fx_meta": record})
    return None


def unbound_names(py_code: str) -> list[str]:
    """Names the generated `kernel` reads as globals that neither the module nor builtins define."""
    import builtins
    import symtable

    module = symtable.symtable(py_code, "<compile cache>", "exec")
    defined = {symbol.get_name() for symbol in module.get_symbols() if symbol.is_assigned() or symbol.is_imported()}
    unbound = set()
    for table in module.get_children():
        if table.get_name() == "kernel":
            unbound |= {name for name in table.get_globals() if name not in defined and not hasattr(builtins, name)}
    return sorted(unbound)


def install(torchair) -> None:
    """Wrap TorchAir's inner compiler (idempotent). Compiles not enabled with `enable_for` are untouched."""
    del torchair
    from torchair import npu_fx_compiler

    compiler = npu_fx_compiler._NpuFxCompiler
    original = compiler._gen_compiled_gm
    if getattr(original, "_op_plugin_compile_cache", False):
        return

    @functools.wraps(original)
    def gen_compiled_gm(self, gm, example_inputs, observer):
        caller = vars(self.config).get(_CONFIG_ATTR)
        if caller is None or not is_enabled_by_environment():
            return original(self, gm, example_inputs, observer)
        reason, details = _config_allows(self.config), None
        try:
            if not reason:
                with unset_fake_temporarily():  # constants are real tensors, read under TorchAir's fake mode
                    details = key_details(gm, example_inputs, self.config, caller)
        except _NotCacheable as error:
            reason = str(error)
        if reason:
            _stats["uncacheable"] += 1
            log.debug("npugraph compile cache: not cached (%s)", reason)
            return original(self, gm, example_inputs, observer)
        key = key_of(details)
        store = _store(cache_folder())
        if store is None:
            return original(self, gm, example_inputs, observer)
        payload = store.get(key)
        if payload is not None:
            _stats["hits"] += 1
            log.debug("npugraph compile cache: hit %s", key)
            return _load(payload)
        _stats["misses"] += 1
        guards_before = _guard_count(example_inputs)
        runner = original(self, gm, example_inputs, observer)
        try:
            reason = _store_result(store, runner, key, details, guards_before, example_inputs)
        except _NotCacheable as error:
            reason = str(error)
        if reason:
            _stats["uncacheable"] += 1
            log.debug("npugraph compile cache: not stored (%s)", reason)
        else:
            _stats["stored"] += 1
        return runner

    gen_compiled_gm._op_plugin_compile_cache = True
    compiler._gen_compiled_gm = gen_compiled_gm

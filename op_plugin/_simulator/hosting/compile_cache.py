"""npugraph's persistent compile cache on a CPU host: TorchAir's lowering of an FX graph, done once.

TorchAir's inner compiler (`_NpuFxCompiler._gen_compiled_gm`) turns each AOT graph (forward, backward) into
a GE graph by running its converters. Here, in GE mode, that result is stored as TorchAir itself stores it
for `torchair.inference.cache_compile`: the source `GeConcreteGraph.codegen(enable_cache=True)` writes
(the serialized GE graph and the code that feeds it), plus the FX shapes op_plugin's executor checks
intermediate results against (`fx_meta`). A later compile of the same graph, in this process or another,
runs that code instead of the converters: TorchAir's own load path, the same GE graph, the same executor.

The key (what a lowering depends on, auditable) is `compile_key.py`'s.

Not cached (compiled as before, said at debug level): graphs with collectives (their process groups are
rebuilt by name), random ops (TorchAir's codegen refuses their RNG inputs), a target without a converter
(TorchAir compiles a callback for it), constants that are not real tensors, graphs whose lowering added a
guard on a dynamic size (a hit would not add it again), and compiles with dumps, data dumps, fx_summary or
run_eagerly. The store is `op_plugin._base.signed_cache` (signed entries: a tampered one is refused, never
run).
"""
from __future__ import annotations

import functools
import logging
import os
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from torch._subclasses.fake_tensor import unset_fake_temporarily

from ..._base.signed_cache import SignedCache, user_cache_root, user_secret
from ..._lowering import converter_loading
from . import fx_meta
from .compile_key import FORMAT, NotCacheable, key_details, key_of, lacking_converters

log = logging.getLogger(__name__)

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
    lacking = lacking_converters(details)
    if lacking:  # keyed by TorchAir's converter modules, which had none for it (the lowering generated one)
        return f"{lacking} had no converter before the lowering"
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


def _lower(original, compiler, gm, example_inputs, observer):
    """TorchAir's lowering, with its converter modules loaded first (TorchAir also looks up targets, such as
    `_sym_sqrt`, that are plain functions, on which a lookup cannot load them)."""
    converter_loading.ensure_loaded()
    return original(compiler, gm, example_inputs, observer)


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
        if self.config.mode.value == "max-autotune":  # GE mode: TorchAir's converters, unless it is a hit
            lower = functools.partial(_lower, original)
        else:
            lower = original
        if caller is None or not is_enabled_by_environment():
            return lower(self, gm, example_inputs, observer)
        reason, details = _config_allows(self.config), None
        try:
            if not reason:
                with unset_fake_temporarily():  # constants are real tensors, read under TorchAir's fake mode
                    details = key_details(gm, example_inputs, self.config, caller)
        except NotCacheable as error:
            reason = str(error)
        if reason:
            _stats["uncacheable"] += 1
            log.debug("npugraph compile cache: not cached (%s)", reason)
            return lower(self, gm, example_inputs, observer)
        key = key_of(details)
        store = _store(cache_folder())
        if store is None:
            return lower(self, gm, example_inputs, observer)
        payload = store.get(key)
        if payload is not None:
            _stats["hits"] += 1
            log.debug("npugraph compile cache: hit %s", key)
            return _load(payload)
        _stats["misses"] += 1
        guards_before = _guard_count(example_inputs)
        runner = lower(self, gm, example_inputs, observer)
        try:
            reason = _store_result(store, runner, key, details, guards_before, example_inputs)
        except NotCacheable as error:
            reason = str(error)
        if reason:
            _stats["uncacheable"] += 1
            log.debug("npugraph compile cache: not stored (%s)", reason)
        else:
            _stats["stored"] += 1
        return runner

    gen_compiled_gm._op_plugin_compile_cache = True
    compiler._gen_compiled_gm = gen_compiled_gm

"""Import TorchAir from the unpacked torch-npu wheel on a CPU host, side effects contained.

``load_torchair()`` puts ``<simulator_dir>/torch_npu/dynamo`` (and nothing else) on
``sys.path`` (first while TorchAir imports, so a user's ``torchair`` folder cannot take its place, last
after), installs the native stand-in as ``torchair.core._torchair``, and imports
``torchair``; TorchAir's ``import torch_npu`` never loads a folder that merely shares the name
(``foreign_modules``). The wheel root is *not* put on ``sys.path``: then ``import torch_npu``
(which TorchAir tries, in ``torchair/__init__.py`` and in its backend) fails cleanly with
ModuleNotFoundError and leaves nothing in ``sys.modules``. With the wheel root on the path
``torch_npu`` would half-import (8 ``torch_npu.*`` submodules stay behind) and TorchAir
switches behaviour on ``'torch_npu' in sys.modules``. After loading,
``'torch_npu' not in sys.modules`` holds. ``torch_npu/dynamo`` also holds
``npugraph_ex``, ``trace_rule`` and ``_deterministic_guard``; they become importable as
top-level names too (nothing imports them on the simulator's path).

Process-wide side effects of importing/using TorchAir, and what this module does:

* ``logging.setLoggerClass(_EventLogger)`` at import (``torchair/core/utils.py``): every
  logger created afterwards anywhere in the process would be TorchAir's class.
  -> The previous logger class is restored right after the import. Loggers TorchAir made
  during the import keep its class (its ``torchair`` logger needs ``.event``).
* ``logging.addLevelName(35, "EVENT")``: a new global level name. -> Left as is (harmless).
* ``logging.getLogger("torchair")`` called by the user before the simulator loads TorchAir (on
  an Ascend host TorchAir is already imported by then) is a plain Logger that TorchAir reuses
  without ``.event``. -> It gets TorchAir's logger class, and keeps the level the user set.
* The ``torchair`` logger gets a StreamHandler on **stdout** (level ERROR, DEBUG with
  TORCH_COMPILE_DEBUG=1). -> Its handler is moved to **stderr**, level unchanged, so program
  output on stdout stays clean. (Lowering it to WARNING would print "Failed to import
  install_npu_deterministic_level_guard" on every first compile on a CPU host.)
* ``atexit.register(finalize_graph_engine)`` and SIGINT/SIGTERM handlers
  (``torchair/core/_backend.py``). Their handler finalizes GE, sets the signal to SIG_IGN
  and re-sends it, so after one Ctrl-C the process would *ignore* SIGINT, and a SIGTERM that
  arrived while TorchAir loads (torchrun stopping a rank) was swallowed: the rank ran on. -> The
  handlers are never installed: while TorchAir imports, ``signal.signal`` calls made by TorchAir's
  modules for SIGINT/SIGTERM are answered without installing anything, so the process's own handlers
  (default: terminate) see every signal at every point of the load. Should a TorchAir handler get in
  anyway, the previous handlers are restored after the import and a signal it swallowed (it leaves
  SIG_IGN behind) is raised again. The atexit hook is unregistered: there is no graph engine to
  finalize on a CPU (the stub's FinalizeGraphEngine does nothing).
* Import-time registrations into torch: ``torch.library`` fragments in the ``air``,
  ``npu_define`` and ``npu_inference`` namespaces with Meta kernels and GE converters,
  and additions to ``torch.distributed._functional_collectives.traceable_collective_remaps``
  (all_gather / all_to_all / broadcast / send / recv remaps). -> Left in place: removing
  them would break TorchAir; none uses the ``npu`` namespace. The ``npu_define`` ops those
  remaps emit get CPU kernels (TorchAir's own NPU ones, plain torch.distributed calls), so
  ``aot_eager`` still runs them on CPU tensors; and in a distributed process TorchAir is loaded
  at dynamo's first trace, so the remaps are in place then, as on an Ascend host
  (``distributed.py``).
* ``get_npu_backend(...)`` -> ``add_npu_patch`` (once per process, ``torchair/_utils``)
  monkey-patches torch **process-wide**, also for other backends:
    - ``adjust_implicit_decomposition``: drops or replaces the Autograd /
      CompositeImplicitAutograd ``py_kernels`` of some aten ops in the decomposition table;
    - ``npu_patch_meta``: replaces the Meta kernels and decomposition-table entries of
      ``aten.native_dropout``, ``aten.native_dropout_backward`` and
      ``aten._native_batch_norm_legit_no_training`` with NPU ones (the batch-norm one
      returns empty save_mean/save_rstd), and replaces
      ``torch._subclasses.fake_tensor.torch_decomp_decompositions``;
    - ``register_matmul_backward_decomp``: python kernels for ``aten.to.other`` and
      ``aten.type_as`` (AutogradPrivateUse1) and ``aten.matmul_backward``
      (CompositeImplicitAutograd);
    - ``npu_patch_break_graph`` (only with $BREAK_GRAPH_OP_LIST): replaces dynamo's
      ``InstructionTranslatorBase.BINARY_SUBSCR/STORE_SUBSCR/CALL_FUNCTION``;
    - ``npu_patch_fx_pass`` (only with ``experimental_config.npu_fx_pass``): clears
      inductor's joint-graph patterns and decomposition table and replaces
      ``joint_graph.lazy_init``;
    - ``npu_patch_register_fast_op_impl``: a no-op with torch >= 2.3.
  -> What ``adjust_implicit_decomposition`` and ``npu_patch_meta`` change (the decomposition
  table, the ops' ``py_kernels``, ``torch_decomp_decompositions``) is swapped in only while
  TorchAir compiles and restored after (``torchair_patches``); the others stay, as documented.
* With TORCH_COMPILE_DEBUG=1 it also wraps ``torch._dynamo.utils.get_debug_dir`` at import.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import logging
import signal
import sys
import threading
from pathlib import Path

import torch

from ..._base.errors import OpPluginError
from ..._base.installed import describe, is_installed_torch_npu
from . import (
    aclgraph_mode, compile_cache, converter_torch_npu, distributed, foreign_modules, fx_meta, graph_passes, install,
    loader_deferred, native_stub, npu_settings, torchair_fixes, torchair_patches,
)
from ..._base.gc_scope import no_automatic_gc as _no_automatic_gc
from ..device.activation import is_active
from ..device.torch_npu_facade import is_facade
from ..device.torchair_branches import native_executor_modules
from ..npu import generator as rng, ops as npu_ops


class SimulatorUnavailable(OpPluginError):
    """The TorchAir simulator (the unpacked torch-npu wheel) is missing or incomplete."""


_lock = threading.RLock()
_loaded = None


def load_torchair():
    """Import TorchAir for the CPU simulator and return the ``torchair`` module (idempotent).

    Raises SimulatorUnavailable (one line, with the install command) when the unpacked
    torch-npu wheel is missing, and RuntimeError when the process already holds a real
    ``torch_npu`` or a ``torchair`` that is not the simulator's.
    """
    global _loaded
    with _lock:
        if _loaded is not None:
            return _loaded
        folder = install.simulator_dir()
        missing = install.missing_parts(folder)
        if missing:
            raise SimulatorUnavailable(
                f"The op_plugin TorchAir simulator (torch-npu=={install.TORCH_NPU_VERSION}, unpacked) is not "
                f"installed in {folder}: {install.INSTALL_HINT}"
            )
        _refuse_foreign_modules()
        # torch_npu's own ops (torch.ops.npu.npu_rms_norm ...) must exist before TorchAir imports its
        # converters for them
        npu_ops.define_npu_ops()
        with _no_automatic_gc():
            _import_what_dynamo_imports_at_its_first_trace()
            _loaded = _import_contained(install.torchair_parent(folder))
        return _loaded


def _import_what_dynamo_imports_at_its_first_trace() -> None:
    """Import, before TorchAir, the module dynamo imports inside its first trace (its builder asks
    `LocalMapWrappedHigherOrderVariable.should_wrap_in_hop`, which imports
    torch.distributed.tensor.experimental._func_map). That import defines two custom ops whose
    `register_fake` looks up its caller's source (inspect.getframeinfo -> inspect.getmodule), which
    resolves the real path of every module imported since the last lookup: after TorchAir's ~1100
    modules, 1587 realpath calls inside dynamo's window on the first npugraph compile, against 452
    under aot_eager. Imported first, it costs what aot_eager pays, outside dynamo's window
    (bench/fresh_process.py counts the realpath calls)."""
    if torch.distributed.is_available():
        importlib.import_module("torch.distributed.tensor.experimental._func_map")


def _refuse_foreign_modules() -> None:
    module = sys.modules.get("torch_npu")
    if module is not None and not is_facade(module):  # the virtual NPU's is no torch_npu
        note = "" if _is_installed(module) else (
            "; it is not the installed torch-npu but something that shares its name: rename or move it, or import "
            "it under another name")
        raise RuntimeError(
            f"{describe(module)} is already imported in this process; the CPU simulator cannot be used "
            f"alongside it (TorchAir changes behaviour when torch_npu is loaded){note}"
        )
    native = sys.modules.get(native_stub.MODULE_NAME)
    if "torchair" in sys.modules and (native is None or not native_stub.is_native_stub(native)):
        raise RuntimeError(
            f"a torchair that is not the simulator's is already imported ({describe(sys.modules['torchair'])}); "
            "the CPU simulator cannot replace it"
        )


def _is_installed(module) -> bool:
    spec = getattr(module, "__spec__", None)
    try:
        return spec is not None and is_installed_torch_npu(spec)
    except OpPluginError:  # another torch_npu hides the installed one: this is not it
        return False


def _import_contained(torchair_parent: Path):
    parent = str(torchair_parent)
    foreign_modules.install()  # TorchAir's `import torch_npu` never loads a folder that merely shares the name
    sys.modules.setdefault(native_stub.MODULE_NAME, native_stub.make_native_module())
    if is_active():  # the virtual NPU: TorchAir's NPU branches import two more native modules
        for name, module in native_executor_modules().items():
            sys.modules.setdefault(name, module)

    previous_logger_class = logging.getLoggerClass()
    previous_signals = _current_signal_handlers()
    user_level = _user_set_level("torchair")
    try:
        # the wheel's folder first while TorchAir imports (no user `torchair` package in its place), last after
        with _torchair_signal_handlers_refused(), foreign_modules.simulator_torchair_first(parent), \
                loader_deferred.deferring():  # inductor's pattern matcher: imported by the first miss, not here
            import torchair
        torchair_logger_class = logging.getLoggerClass()
    finally:
        logging.setLoggerClass(previous_logger_class)
        _restore_signal_handlers(previous_signals)

    _unregister_atexit_finalizer()
    _adopt_early_logger(torchair.logger, torchair_logger_class, user_level)
    _route_logger_to_stderr(torchair.logger)
    fx_meta.install(torchair)  # records each FX node's shape for the executor's intermediate checks
    torchair_patches.install(torchair)  # its process-wide torch patches apply only while it compiles
    torchair_fixes.install(torchair)  # unique node names in O(1): same graphs, linear lowering
    rng.install(torchair)  # random ops: an emulated NPU generator (seed/offset protocol) instead of the CPU one
    distributed.install(torchair)  # its collective npu_define ops on CPU tensors, its send/recv pass without torch_npu
    npu_settings.install(torchair)  # torch.npu.matmul.allow_hf32 (False) for the two converters that read it
    converter_torch_npu.install(torchair)  # `import torch_npu` in a converter: the CPU-host stand-in, during the call
    graph_passes.install(torchair)  # its FX pattern passes take their Ascend-host branches (they test for torch_npu)
    aclgraph_mode.install(torchair)  # mode reduce-overhead / npugraph_ex: the AOT graph, no ACL capture
    compile_cache.install(torchair)  # GE mode: a graph lowered before (this process or another) is not lowered again
    if "torch_npu" in sys.modules and not is_facade(sys.modules["torch_npu"]):  # the boundary; fail loudly
        raise RuntimeError("loading the simulator's TorchAir imported torch_npu; the import boundary is broken")
    return torchair


def _current_signal_handlers() -> dict:
    if threading.current_thread() is not threading.main_thread():
        return {}  # TorchAir installs handlers only from the main thread
    return {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}


_TORCHAIR_SIGNALS = (signal.SIGINT, signal.SIGTERM)


@contextlib.contextmanager
def _torchair_signal_handlers_refused():
    """Within the block (TorchAir's import, on the main thread: only it may set handlers), a
    `signal.signal(SIGINT or SIGTERM, handler)` made by a TorchAir module installs nothing and
    returns the handler in place; every other call is Python's own."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    install = signal.signal

    def refusing(signum, handler):
        caller = sys._getframe(1).f_globals.get("__name__") or ""
        if signum in _TORCHAIR_SIGNALS and (caller == "torchair" or caller.startswith("torchair.")):
            return signal.getsignal(signum)
        return install(signum, handler)

    signal.signal = refusing
    try:
        yield
    finally:
        if signal.signal is refusing:
            signal.signal = install


def _restore_signal_handlers(previous: dict) -> None:
    """Put back the handlers TorchAir's import found; a signal that TorchAir's own handler received
    meanwhile (it sets SIG_IGN and re-sends the signal, which is then lost) is raised again."""
    for signum, handler in previous.items():
        current = signal.getsignal(signum)
        if handler is not None and current is not handler:
            signal.signal(signum, handler)
            if current == signal.SIG_IGN and handler != signal.SIG_IGN:
                signal.raise_signal(signum)  # the previous handler (default: terminate) gets it now


def _unregister_atexit_finalizer() -> None:
    backend = sys.modules.get("torchair.core._backend")
    finalizer = getattr(backend, "finalize_graph_engine", None)
    if finalizer is not None:
        atexit.unregister(finalizer)


def _user_set_level(name: str) -> int | None:
    """The level a user gave the `name` logger before TorchAir was imported (None if none)."""
    existing = logging.Logger.manager.loggerDict.get(name)
    if isinstance(existing, logging.Logger) and existing.level != logging.NOTSET:
        return existing.level
    return None


def _adopt_early_logger(torchair_logger: logging.Logger, event_class: type, user_level: int | None) -> None:
    """A user who called `logging.getLogger("torchair")` before the first compile created a plain
    Logger, which TorchAir then reuses without its `.event` method; on an Ascend host TorchAir is
    imported with torch_npu, before user code. Give that logger TorchAir's class, and keep the
    level the user set rather than the ERROR TorchAir's import resets it to."""
    if not hasattr(torchair_logger, "event") and issubclass(event_class, logging.Logger):
        torchair_logger.__class__ = event_class
    if user_level is not None:
        torchair_logger.setLevel(user_level)


def _route_logger_to_stderr(torchair_logger: logging.Logger) -> None:
    for handler in torchair_logger.handlers:
        if isinstance(handler, logging.StreamHandler) and getattr(handler, "stream", None) is sys.stdout:
            handler.setStream(sys.stderr)

"""``import torch_npu`` inside TorchAir's converters, answered on a CPU host while a converter runs.

About 18 of TorchAir's npu converter modules (``ge_converter/custom/grouped_matmul.py``,
``matmul_all_reduce.py``, ``fused_infer_attention_score_v2.py``, ``npu_moe_init_routing_v2.py``,
``flat_quant.py``, ...) run ``import torch_npu`` (or ``from torch_npu.npu.utils import
_is_gte_cann_version``) inside the converter function, to compare dtype arguments with
``torch_npu.hifloat8``/``float4_e2m1fn_x2``/... or to branch on the CANN version. On a CPU host the
import fails ("No module named 'torch_npu'"), so those converters failed on every input although
they build the graph from host-independent Python.

Here, while TorchAir lowers one FX node (``GeConcreteGraph._parse_node_internal``, the one place it
calls converters, directly or through ``auto_functionalized_v2``), an import of ``torch_npu`` or of
one of its submodules executed inside a *function* of a module under ``CONVERTER_PACKAGE`` gets the
CPU-host stand-in (``npu/torch_npu_standin.py``, the one the wheel-Meta reader uses): the dtype
constants, the CANN version queries (8.5.0) and nothing else; any other name (``torch_npu.npu.NPUGraph``
of a reduce-overhead branch) raises an error naming it. Every other import, on any thread, is
Python's own: the hook is a layer over ``builtins.__import__``, put on top only while some thread is
inside a converter call (and again at the next call if another hook took its place), and it serves
only that thread. ``torch_npu`` never enters ``sys.modules`` (op_plugin
decides "Ascend host" by ``"torch_npu" in sys.modules``), and a module-level ``import torch_npu``
(a module imported during the call) is not served, so no module keeps the stand-in as a global.
Not a ``sys.meta_path`` finder: the import system puts what a finder loads into ``sys.modules``.
"""
from __future__ import annotations

import builtins
import contextlib
import functools
import sys
import threading

from ..npu import torch_npu_standin as standin

CONVERTER_PACKAGE = "torchair._ge_concrete_graph.ge_converter"

_lock = threading.Lock()
_this_thread = threading.local()  # .depth: converter calls this thread is inside
_threads_inside = 0               # a layer of ours is on top of builtins.__import__ while > 0
_installed = None                 # the layer this module put on top for the current calls, if any


# The packages whose functions get the stand-in: the converters, and TorchAir's FX graph passes (their CANN
# version checks: hosting/graph_passes.py runs the passes inside `converter_call`).
SERVED_PACKAGES = (CONVERTER_PACKAGE + ".", "torchair.patterns.")


def _importer_is_a_converter_function(importer_globals) -> bool:
    name = (importer_globals or {}).get("__name__") or ""
    if not name.startswith(SERVED_PACKAGES):
        return False
    frame = sys._getframe(3)
    while frame is not None and frame.f_globals is not importer_globals:  # past hooks stacked over ours
        frame = frame.f_back
    return frame is not None and frame.f_code.co_name != "<module>"  # the import runs inside a function


def _serves(name, globals, level) -> bool:
    return (level == 0 and (name == "torch_npu" or name.startswith("torch_npu."))
            and getattr(_this_thread, "depth", 0) and "torch_npu" not in sys.modules
            and _importer_is_a_converter_function(globals))


def _layer(below):
    """A hook over `below` (the `builtins.__import__` it was installed on): the stand-in for converter
    functions during a call, `below` for everything else. Each layer keeps its own `below`, so a layer
    another hook has wrapped (and that stays in its chain after our calls end) passes through to what
    was under it, whatever is installed later; no layer ever calls another layer's `below`."""

    def _import(name, globals=None, locals=None, fromlist=(), level=0):
        if _serves(name, globals, level):
            return standin.resolve(name) if fromlist else standin.TORCH_NPU
        return below(name, globals, locals, fromlist, level)

    _import.op_plugin_converter_layer = True
    _import.below = below
    return _import


def is_layer(hook) -> bool:
    """`hook` is one of this module's import layers."""
    return getattr(hook, "op_plugin_converter_layer", False)


@contextlib.contextmanager
def converter_call():
    """The stand-in answers ``import torch_npu`` in TorchAir's converter functions on this thread.

    On the first thread to enter, a layer of ours goes on top of whatever ``builtins.__import__`` is
    then (unless a layer of ours is already there); on the last to leave it comes off, if it is still on
    top. Another hook installed over it meanwhile keeps it in its chain (unhooking ours would drop
    theirs); the next call checks the top again, so a hook removed by its owner later, however it
    restores ``builtins.__import__``, never leaves converters without the stand-in."""
    global _threads_inside, _installed
    depth = getattr(_this_thread, "depth", 0)
    if depth:  # nested: a node lowered inside another's lowering
        _this_thread.depth = depth + 1
        try:
            yield
        finally:
            _this_thread.depth = depth
        return
    with _lock:
        current = builtins.__import__
        if not is_layer(current):
            _installed = builtins.__import__ = _layer(current)
        elif _threads_inside == 0:  # ours, left in another hook's chain and put back by its owner: taken off at the end
            _installed = current
        _threads_inside += 1
    _this_thread.depth = 1
    try:
        yield
    finally:
        _this_thread.depth = 0
        with _lock:
            _threads_inside -= 1
            if _threads_inside == 0:
                if _installed is not None and builtins.__import__ is _installed:
                    builtins.__import__ = _installed.below
                _installed = None  # else: another hook is over ours and keeps it in its chain (passing through)


def install(torchair) -> None:
    """Run TorchAir's per-node lowering inside `converter_call` (idempotent)."""
    del torchair
    from torchair._ge_concrete_graph.fx2ge_converter import GeConcreteGraph

    lower = GeConcreteGraph._parse_node_internal
    if getattr(lower, "_op_plugin_torch_npu_stand_in", False):
        return

    @functools.wraps(lower)
    def parse_node_internal(self, *args, **kwargs):
        with converter_call():
            return lower(self, *args, **kwargs)

    parse_node_internal._op_plugin_torch_npu_stand_in = True
    GeConcreteGraph._parse_node_internal = parse_node_internal

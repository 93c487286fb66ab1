"""Stand-in for TorchAir's one native module, ``torchair.core._torchair``.

The real module is a C++ extension that needs CANN (GE runtime, ACL). The simulator
installs this module object under that name in ``sys.modules`` before TorchAir is
imported, so TorchAir's own Python code runs unchanged on a CPU host.

What it provides (the names TorchAir reads on the paths the simulator supports):

* ``TorchNpuGraphBase``: ``load`` parses the serialized ModelDef and keeps
  ``ModelDef.graph[0]``; ``run`` executes it on the CPU with the GE executor.
* ``TorchDataType``: the dtype constants read at import by ``torchair.llm_datadist``.
* ``InitializeGraphEngine`` / ``FinalizeGraphEngine``: nothing to start or stop on a CPU.
* ``get_registered_ir_def``: answered from the simulator's IR-prototype registry.
* ``check_cann_compat``: every optional input/attr is "compatible" (returns "").
* ``SetDebugLogPath``: remembers the path (TORCH_COMPILE_DEBUG=1); the native log has no CPU counterpart.
* ``AclmdlSetDump``: takes the model-dump options file TorchAir writes for a data dump
  (``ge_dump_data_json/dump_options_*.json``) as ACL's ``aclmdlSetDump`` does: read and kept
  (``data_dump.set_dump_file``), so an emulated dump logs no error. What is dumped comes from the GE
  options of ``InitializeGraphEngine`` (``data_dump.configure``).

It is strict: any other name raises ``AttributeError`` naming the attribute, so a TorchAir
path the simulator does not cover fails loudly instead of receiving junk.

Every loaded graph is recorded for inspection: ``capture_graphs()`` collects the GraphDefs
loaded inside a ``with`` block, and ``loaded_graphs()`` returns the most recent ones.
"""

from __future__ import annotations

import collections
import contextlib
import importlib.machinery
import threading
import types

import torch

from ..._base.dispatch_modes import dispatch_modes_active, outside_python_dispatch_modes
from . import ir_registry

MODULE_NAME = "torchair.core._torchair"

_RECENT_LIMIT = 32  # bounded, so a long-running process does not keep every graph alive
_recent_graphs: collections.deque = collections.deque(maxlen=_RECENT_LIMIT)
_capture_lists: list[list] = []
_capture_lock = threading.Lock()
_debug_log_path: list[str] = []


def _record_loaded_graph(graph_def) -> None:
    with _capture_lock:
        _recent_graphs.append(graph_def)
        for sink in _capture_lists:
            sink.append(graph_def)


@contextlib.contextmanager
def capture_graphs():
    """Collect every GE GraphDef loaded (first call of a compiled graph) inside the block."""
    sink: list = []
    with _capture_lock:
        _capture_lists.append(sink)
    try:
        yield sink
    finally:
        with _capture_lock:
            _capture_lists.remove(sink)


def loaded_graphs() -> list:
    """The most recently loaded GE GraphDefs (oldest first, at most 32)."""
    with _capture_lock:
        return list(_recent_graphs)


def _parse_model_def(serialized: bytes):
    # Imported late: TorchAir picks the protobuf module matching the installed protobuf version.
    from torchair._ge_concrete_graph import ge_ir_pb2

    model = ge_ir_pb2.ModelDef()
    model.ParseFromString(serialized)
    if len(model.graph) != 1:
        raise RuntimeError(f"CPU simulator: expected a ModelDef with one graph, got {len(model.graph)}")
    return model.graph[0]


class TorchNpuGraphBase:
    """Python counterpart of the native graph wrapper that ``torchair.core._backend.TorchNpuGraph`` extends."""

    def __init__(self, name: str = ""):
        self.name = str(name)
        self.graph_def = None
        self.options: dict = {}
        self.hint_shapes = None
        self._plan = None
        # What the FX graph said about this graph's tensors, recorded while TorchAir lowered it
        # (`op_plugin._simulator.hosting.fx_meta`); the executor checks intermediate shapes against it.
        self.fx_meta = None

    def load(self, serialized, options=None, input_placements=(), output_dtypes=(), executor_type=0):
        self.graph_def = _parse_model_def(serialized)
        self.options = dict(options or {})
        self.input_placements = list(input_placements)
        self.output_dtypes = list(output_dtypes)
        self.executor_type = executor_type
        self._plan = None
        _record_loaded_graph(self.graph_def)

    def set_hint_shape(self, input_shapes, output_shapes):
        self.hint_shapes = (input_shapes, output_shapes)

    def compile(self):
        if self.graph_def is None:
            raise RuntimeError(f"CPU simulator: graph {self.name!r} compiled before it was loaded")
        if self._plan is None:
            from ..._base.gc_scope import old_objects_frozen
            from ..interpreter.executor import compile_graph

            # TorchAir compiles a graph at its first run, after the backend call's GC window has closed: a
            # full collection falling here walked all of torch's and TorchAir's objects (0.19 s at 12 layers).
            # On an NPU the compile is native, below the dispatcher, as the run is (`run`): AOT's aliasing
            # check around a compiled function's first call saw each Const's decoding (40% of it at 12 layers).
            with old_objects_frozen(), outside_python_dispatch_modes():
                self._plan = compile_graph(self.graph_def, fx_meta=self.fx_meta)

    def auto_tune(self, args):
        # AOE tuning searches for fast NPU kernels; on the CPU there is nothing to tune.
        del args

    def run(self, args):
        inputs, assigned_outputs, _stream = args
        plan = self._plan
        if plan is None:
            if self.graph_def is None:
                raise RuntimeError(f"CPU simulator: graph {self.name!r} run before it was loaded")
            self.compile()
            plan = self._plan
        dumping, host_inputs, device_outputs = _RUN_HELPERS or _run_helpers()
        # npu inputs (the virtual NPU) run as CPU views of their memory; the results go back as npu tensors.
        host, placement = host_inputs(inputs, self.name)
        dump = dumping(self, host)  # TorchAir's data dump (dump_config), honoured by data_dump.py
        if dump.__class__ is contextlib.nullcontext and not dispatch_modes_active():
            outputs = device_outputs(plan.run(host), placement)  # the steady call: nothing to enter or leave
        else:
            with dump, outside_python_dispatch_modes():
                outputs = device_outputs(plan.run(host), placement)
        # An assigned output is an input tensor that GE writes the result into (output aliases input).
        for index, target in enumerate(assigned_outputs or ()):
            if target is not None:
                target.copy_(outputs[index])
                outputs[index] = target
        return outputs


_RUN_HELPERS: tuple = ()


def _run_helpers() -> tuple:
    """(dumping, host_inputs, device_outputs), imported on the first run (not at import: the device package
    loads the virtual NPU's pieces) and kept, so a steady call pays no import statement."""
    global _RUN_HELPERS
    from ..device.graph_io import device_outputs, host_inputs
    from .data_dump import dumping

    _RUN_HELPERS = (dumping, host_inputs, device_outputs)
    return _RUN_HELPERS




# A native method is opaque to dynamo: called from code dynamo is tracing (a compiled function that
# calls loss.backward(), which loads and runs the lazily compiled backward graph), it graph-breaks
# and runs for real. The Python stand-ins must behave the same, not be traced with fake tensors.
for _name in ("load", "set_hint_shape", "compile", "auto_tune", "run"):
    setattr(TorchNpuGraphBase, _name, torch._dynamo.disable(getattr(TorchNpuGraphBase, _name)))
del _name


class TorchDataType:
    """The native dtype enum, read at import by ``torchair.llm_datadist._tensor_utils``.

    Only the names matter on the simulator's paths; the values follow the GE enum.
    """

    FLOAT32 = 0
    FLOAT16 = 1
    INT8 = 2
    INT32 = 3
    UINT8 = 4
    INT16 = 6
    UINT16 = 7
    UINT32 = 8
    INT64 = 9
    UINT64 = 10
    FLOAT64 = 11
    BOOL = 12
    COMPLEX64 = 16
    COMPLEX128 = 17
    BF16 = 27
    STRING = 13


def InitializeGraphEngine(options):
    # No graph engine to start on the CPU; its data-dump options are honoured (data_dump.py).
    from .data_dump import configure

    configure(options)


def FinalizeGraphEngine():
    pass  # nothing to release


def check_cann_compat(op_type, runtime_optional_inputs, runtime_optional_attrs):
    # The executor's kernels implement the full prototype, so every optional input/attr is supported.
    del op_type, runtime_optional_inputs, runtime_optional_attrs
    return ""


def SetDebugLogPath(path):
    _debug_log_path[:] = [str(path)]


def AclmdlSetDump(path):
    # TorchAir calls it after InitializeGraphEngine with the dump_options_*.json it wrote; without it here
    # TorchAir logged "[ERROR] ... AclmdlSetDump failed" on every successful dump. A file ACL could not read
    # is still refused (TorchAir logs that, as on an NPU).
    from .data_dump import set_dump_file

    set_dump_file(path)


class ExportNeedsCann(RuntimeError):
    """`torchair.dynamo_export` on a CPU host: its .air file is GE's own serialization."""


def export(serialized_graph, options):
    """TorchAir's export hands its GE graph to GE (`ge::Graph::SaveToFile`, torchair/concrete_graph/export.cpp),
    which parses it into GE's own graph and writes GE's model serialization: the .air file is GE's bytes, not
    TorchAir's, and this host has no GE to make them. Refused, saying what TorchAir has already written."""
    del serialized_graph
    folder, name = options.get("export_path_dir", "."), options.get("export_name", "export.air")
    raise ExportNeedsCann(
        f"torchair.dynamo_export: the .air file ({folder}/{name}) is written by CANN's GE (ge::Graph::SaveToFile "
        "re-serializes the graph GE parses), which a CPU host does not have; TorchAir has already written the GE "
        f"graph it built as text ({folder}/dynamo.pbtxt) and its options ({folder}/options.json). Run the export on "
        "an Ascend host; on this host, the graph's numbers are checked with torch.compile(backend=\"npugraph\")")


class _StrictModule(types.ModuleType):
    """A module whose unknown attributes raise a clear error instead of returning junk."""

    def __getattr__(self, name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        raise AttributeError(
            f"module {MODULE_NAME!r} has no attribute {name!r}: the op_plugin CPU simulator does not "
            f"provide {name!r} from TorchAir's native library (it needs an Ascend host with CANN)"
        )


_EXPORTS = {
    "TorchNpuGraphBase": TorchNpuGraphBase,
    "TorchDataType": TorchDataType,
    "InitializeGraphEngine": InitializeGraphEngine,
    "FinalizeGraphEngine": FinalizeGraphEngine,
    "get_registered_ir_def": ir_registry.get_registered_ir_def,
    "check_cann_compat": check_cann_compat,
    "SetDebugLogPath": SetDebugLogPath,
    "AclmdlSetDump": AclmdlSetDump,
    "export": export,
}


def make_native_module() -> types.ModuleType:
    """A fresh ``torchair.core._torchair`` stand-in, ready to go into ``sys.modules``."""
    module = _StrictModule(MODULE_NAME, __doc__)
    module.__spec__ = importlib.machinery.ModuleSpec(MODULE_NAME, loader=None, origin="op_plugin CPU simulator")
    module.__file__ = __file__
    module.__op_plugin_simulator__ = True
    for name, value in _EXPORTS.items():
        setattr(module, name, value)
    return module


def is_native_stub(module) -> bool:
    return getattr(module, "__op_plugin_simulator__", False) is True

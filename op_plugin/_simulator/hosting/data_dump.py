"""TorchAir's data dump (`CompilerConfig().dump_config`) honoured by the simulator.

How the options arrive: with `dump_config.enable_dump = True` in max-autotune (GE) mode, TorchAir's
`_DataDumpConfig.as_dict` puts `ge.exec.enableDump=1`, `ge.exec.dumpPath` (the configured
`dump_path` + `worldsize1_global_rank0`, created by TorchAir), `ge.exec.dumpMode`
(input/output/all), `ge.exec.dumpStep` ("0|2-4"), `ge.exec.dumpLayer` (GE op names, space
separated) and `ge.exec.dumpData` (tensor/stats) into the *global* options, which reach
`InitializeGraphEngine(options)` of the native module once per process (GE is initialised once;
TorchAir refuses a second, different set). `configure(options)` reads them there.

What is written, per GE graph run ("step": the n-th run of that graph, from 0), per kernel node,
in the directory layout CANN documents for a model dump:

    {dumpPath}/{YYYYMMDDHHMMSS}/{device 0}/{model name = GE graph name}/{model id}/{step}/
        {op_type}.{op_name}.{task_id}.{stream_id}.{timestamp}.{input|output}.{index}.npy

The file names are those `msaccucmp.py convert` gives when it turns an NPU dump file (a binary
protobuf `DumpData`) into numpy: the simulator writes the numpy form directly, since the binary form
needs CANN's tools to read anyway. task_id is the node's position in the executed order, stream_id
0, the timestamp microseconds since the epoch (16 digits); bfloat16 tensors are written as float32
(numpy has no bfloat16). `dumpData=stats` is refused with a clear error (not implemented here).
Inputs of a node are the outputs of its producers in the same run, the graph inputs for Data
nodes and the decoded value of Const nodes.

Which nodes: those of a `torchair.scope.data_dump()` scope (TorchAir writes the attr `torchair_enable_data_dump`
on each node made inside it) and those `ge.exec.dumpLayer` names, the union, as TorchAir documents the scope
(docs/zh/ascend_ir/api/scope/data_dump.md: the scope and dump_layer both apply, the dump covers both); every
node of a graph with neither. Read from the nodes themselves, per graph: TorchAir's per-graph layer list in the
options file below holds the scoped nodes' types, not their names, so it names a scoped node only when its
name happens to be its type.

TorchAir also writes the model-dump options file (`ge_dump_data_json/dump_options_*.json`: the dump
options and, per GE graph, its layer list) and hands it to ACL's `aclmdlSetDump`; the native stand-in's
`AclmdlSetDump` gives it to `set_dump_file`, which reads and keeps it (`dump_file()`), refusing a file
that is not that JSON. The dump itself follows the GE options and the scope's node attrs above.
"""
from __future__ import annotations

import bisect
import contextlib
import itertools
import json
import os
import re
import time
from dataclasses import dataclass

import torch

from ..._ge.graph import DataRef, parse_input
from ..._ge.values import decode_attr


@dataclass(frozen=True)
class StepRanges:
    """GE's dumpStep as the ranges it names, sorted and merged: membership costs a search, never
    a set of every step ("0-4000000000" is one range, not four billion numbers)."""

    ranges: tuple[tuple[int, int], ...]   # (first, last), inclusive, disjoint, ascending

    def __contains__(self, step: object) -> bool:
        if not isinstance(step, int):
            return False
        index = bisect.bisect_right(self.ranges, (step, float("inf"))) - 1
        return index >= 0 and self.ranges[index][0] <= step <= self.ranges[index][1]


@dataclass(frozen=True)
class DumpSettings:
    path: str
    mode: str                       # "input", "output" or "all"
    steps: StepRanges | None        # None: every step
    layers: frozenset | None        # None: every op
    data: str                       # "tensor" (written) or "stats" (refused)


_settings: DumpSettings | None = None
_run_stamp: str | None = None
_model_ids = itertools.count()
_STEP_PART = re.compile(r"^\s*(\d+)\s*(?:-\s*(\d+)\s*)?$")


def parse_steps(text: str) -> StepRanges | None:
    """GE's dumpStep: "0|3|5-7" -> the ranges (0, 0), (3, 3), (5, 7); empty -> None (all steps).
    A part that is not N or N-M (N <= M) is a ValueError naming it."""
    if not text:
        return None
    ranges = []
    for part in text.split("|"):
        if not part:
            continue
        match = _STEP_PART.match(part)
        if match is None or (match.group(2) is not None and int(match.group(2)) < int(match.group(1))):
            raise ValueError(f"dump_step {text!r}: {part!r} is not a step N or a range N-M with N <= M "
                             "(steps are separated by |)")
        low = int(match.group(1))
        ranges.append((low, int(match.group(2) or low)))
    merged: list[tuple[int, int]] = []
    for low, high in sorted(ranges):
        if merged and low <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], high))
        else:
            merged.append((low, high))
    return StepRanges(tuple(merged))


def configure(options: dict) -> None:
    """Read the dump options GE gets at initialisation (see the module docstring)."""
    global _settings
    options = options or {}
    if str(options.get("ge.exec.enableDump", "0")) != "1":
        _settings = None
        return
    layers = frozenset(p for p in str(options.get("ge.exec.dumpLayer", "")).split(" ") if p)
    _settings = DumpSettings(path=str(options.get("ge.exec.dumpPath", "./")),
                             mode=str(options.get("ge.exec.dumpMode", "output")),
                             steps=parse_steps(str(options.get("ge.exec.dumpStep", ""))),
                             layers=layers or None, data=str(options.get("ge.exec.dumpData", "tensor")))


def settings() -> DumpSettings | None:
    return _settings


_dump_file: dict | None = None


def set_dump_file(path) -> None:
    """ACL's `aclmdlSetDump(path)` as TorchAir calls it (see the module docstring): the file is read and
    kept; one that cannot be read, or is not `{"dump": {...}}` JSON, is an error naming it."""
    global _dump_file
    try:
        with open(path, encoding="utf-8") as handle:
            content = json.load(handle)
    except (OSError, ValueError) as error:
        raise RuntimeError(f"CPU simulator: cannot read the dump options file {path}: {error}") from error
    if not isinstance(content, dict) or not isinstance(content.get("dump"), dict):
        raise RuntimeError(f"CPU simulator: {path} is not a model-dump options file (no \"dump\" object)")
    _dump_file = content


def dump_file() -> dict | None:
    """The model-dump options TorchAir last handed to AclmdlSetDump, or None."""
    return _dump_file


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]", "_", name)


def _save(tensor: torch.Tensor, path: str) -> None:
    import numpy

    value = tensor.detach().cpu()
    if value.dtype == torch.bfloat16:
        value = value.float()
    numpy.save(path, value.contiguous().numpy())


class _GraphDump:
    """The dump state of one loaded graph (a `TorchNpuGraphBase`): its model id and step count."""

    def __init__(self, name: str):
        self.name = _safe(name or "graph")
        self.model_id = next(_model_ids)
        self.step = 0


def dumping(graph, inputs):
    """A context for one run of `graph` (the native stand-in): dumps per `settings()`, or nothing."""
    if _settings is None:
        return contextlib.nullcontext()
    state = getattr(graph, "_op_plugin_data_dump", None)
    if state is None:
        state = graph._op_plugin_data_dump = _GraphDump(graph.name)
    step = state.step
    state.step += 1
    if _settings.steps is not None and step not in _settings.steps:
        return contextlib.nullcontext()
    if _settings.data != "tensor":
        raise RuntimeError(f"CPU simulator: TorchAir dump_config.dump_data={_settings.data!r} is not implemented; "
                           "use 'tensor'")
    return _dump_run(state, step, list(inputs))


@contextlib.contextmanager
def _dump_run(state: _GraphDump, step: int, inputs: list):
    global _run_stamp
    from ..interpreter.executor import observing

    if _run_stamp is None:
        _run_stamp = time.strftime("%Y%m%d%H%M%S")
    folder = os.path.join(_settings.path, _run_stamp, "0", state.name, str(state.model_id), str(step))
    os.makedirs(folder, exist_ok=True)
    produced: dict[tuple[str, int], torch.Tensor] = {}
    task_ids = itertools.count()
    settings_now = _settings

    def observer(plan, op, outputs):
        task_id = next(task_ids)
        for index, tensor in enumerate(outputs):
            produced[(op.name, index)] = tensor.detach().clone()
        if not _selected(plan, op, settings_now.layers):
            return
        stem = f"{_safe(op.type)}.{_safe(op.name)}.{task_id}.0.{time.time_ns() // 1000:016d}"
        if settings_now.mode in ("input", "all"):
            for index, tensor in enumerate(_node_inputs(plan, op, produced, inputs)):
                if tensor is not None:
                    _save(tensor, os.path.join(folder, f"{stem}.input.{index}.npy"))
        if settings_now.mode in ("output", "all"):
            for index, tensor in enumerate(outputs):
                _save(tensor, os.path.join(folder, f"{stem}.output.{index}.npy"))

    with observing(observer):
        yield


SCOPE_ATTR = "torchair_enable_data_dump"  # what torchair.scope.data_dump() writes on each node of its scope


def _selected(plan, op, layers: frozenset | None) -> bool:
    """Whether `op` is dumped: a node of a `torchair.scope.data_dump()` scope or one dumpLayer names (the union,
    as TorchAir documents); every node when the graph has neither."""
    scoped = _scoped_names(plan)
    if layers is None and not scoped:
        return True
    return op.name in scoped or (layers is not None and op.name in layers)


def _scoped_names(plan) -> frozenset:
    cached = getattr(plan, "_op_plugin_dump_scope", None)
    if cached is None:
        cached = frozenset(op.name for op in plan.graph_def.op if SCOPE_ATTR in op.attr)
        plan._op_plugin_dump_scope = cached
    return cached


def _node_inputs(plan, op, produced, graph_inputs) -> list:
    ops = _ops_by_name(plan)
    values = []
    for ref in op.input:
        parsed = parse_input(ref)
        if not isinstance(parsed, DataRef):  # a control edge
            if parsed is None:
                values.append(None)  # an optional input left unfed
            continue
        source, index = parsed.node, parsed.index
        producer = ops.get(source)
        if (source, index) in produced:
            values.append(produced[(source, index)])
        elif producer is not None and producer.type == "Data" and "index" in producer.attr:
            value = graph_inputs[producer.attr["index"].i]
            values.append(value if isinstance(value, torch.Tensor) else torch.tensor(value))
        elif producer is not None and producer.type in ("Const", "Constant") and "value" in producer.attr:
            values.append(decode_attr(producer.attr["value"]))
        else:
            values.append(None)
    return values


def _ops_by_name(plan) -> dict:
    cached = getattr(plan, "_op_plugin_ops_by_name", None)
    if cached is None:
        cached = {op.name: op for op in plan.graph_def.op}
        plan._op_plugin_ops_by_name = cached
    return cached

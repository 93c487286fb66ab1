"""Run a GE GraphDef on the CPU, node by node, checking every result against the graph.

``execute_graph(graph_def, inputs)`` walks the graph in topological order:

* ``Data``: the graph input at its ``index`` attr (checked against the Data desc);
* ``Const``: its ``value`` TensorDef decoded (dtype, shape, raw bytes);
* ``NetOutput``: its data inputs, in order, are the graph outputs;
* anything else: the kernel registered for its type (``_ge_registry``).

Inputs named ``"node:-1"`` are control edges (ordering only); ``""`` is an optional input
left unfed (the kernel gets ``None``). Output shapes come from the computed tensors, so
``-1`` dims and dynamic shapes need no shape inference.

TorchAir itself checks only the number of outputs, so every node output is checked here
against its output desc (dtype and shape; ``-1`` matches any size, ``[-2]`` any shape) and
the graph outputs against the NetOutput descs and the ``_output_dtypes`` graph attr.
What a desc declares: TorchAir fills unknown output dtypes with DT_FLOAT
(``_normalize_ge_graph``) and leaves intermediate shapes unset, so a DT_FLOAT desc is
trusted only when it carries TorchAir's ``_meta`` attr (set from the FX node's meta), and a
shape only when the desc's ``shape`` field is present.
"""

from __future__ import annotations

import collections
import heapq

import torch

from . import _ge_kernels, _ge_kernels_fused, _ge_kernels_math, _ge_kernels_nn  # noqa: F401  (register the built-in kernels)
from . import _ge_registry
from ._ge_types import (
    PROTO_DT_FLOAT, PROTO_DT_UNDEFINED, UNKNOWN_DIM, UNKNOWN_RANK,
    decode_attrs, decode_tensor_def, ge_dtype_to_torch, proto_dtype_to_torch,
)


class GeExecutionError(RuntimeError):
    """The GE graph cannot be executed, or a node produced a result that contradicts the graph."""


_Ref = collections.namedtuple("_Ref", "node index")  # a data input: producer name and output index
_Control = collections.namedtuple("_Control", "node")  # a control edge: ordering only, no value


class _Step:
    """One node, with everything that does not depend on the inputs worked out once: its decoded
    attrs, its kernel (or Const value), and the dtype/shape each output must have."""

    __slots__ = ("op", "inputs", "attrs", "kernel", "const", "checks")

    def __init__(self, op, inputs, attrs):
        self.op = op
        self.inputs = inputs
        self.attrs = attrs
        self.kernel = None
        self.const = None
        self.checks = [_expectation(desc, f"node {op.name!r} ({op.type}) output {i}", trust_float=False)
                       for i, desc in enumerate(op.output_desc)]


def _parse_input(text: str):
    """``"name:i"`` -> _Ref; ``"name:-1"`` -> _Control; ``""`` -> None (unfed optional input)."""
    if text == "":
        return None
    name, sep, index = text.rpartition(":")
    if not sep:
        return _Ref(text, 0)
    if index == "-1":
        return _Control(name)
    return _Ref(name, int(index))


def topological_order(ops) -> list:
    by_name = {op.name: op for op in ops}
    if len(by_name) != len(ops):
        raise GeExecutionError("GE graph has several nodes with the same name")
    waiting_on = {}
    users = collections.defaultdict(list)
    for op in ops:
        producers = set()
        for text in op.input:
            parsed = _parse_input(text)
            if parsed is None:
                continue
            name = parsed.node
            if name not in by_name:
                raise GeExecutionError(f"node {op.name!r} ({op.type}) reads {text!r}, but the graph has no node {name!r}")
            producers.add(name)
        waiting_on[op.name] = len(producers)
        for name in producers:
            users[name].append(op.name)
    # Ready nodes are taken in graph order (a heap on position), so the run order is deterministic
    # and close to TorchAir's, in O(n log n) for large graphs.
    position = {op.name: i for i, op in enumerate(ops)}
    ready = [(position[name], name) for name, count in waiting_on.items() if count == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        _, name = heapq.heappop(ready)
        order.append(by_name[name])
        for user in users[name]:
            waiting_on[user] -= 1
            if waiting_on[user] == 0:
                heapq.heappush(ready, (position[user], user))
    if len(order) != len(ops):
        stuck = sorted(name for name, count in waiting_on.items() if count > 0)
        raise GeExecutionError(f"GE graph has a cycle; nodes never ready: {stuck}")
    return order


class GraphPlan:
    """A GraphDef prepared once (order, parsed inputs, decoded attrs) and run many times."""

    def __init__(self, graph_def):
        self.graph_def = graph_def
        self.name = graph_def.name
        self.steps = []
        self.outputs = None
        self.num_data = 0
        for op in topological_order(list(graph_def.op)):
            refs = [_parse_input(text) for text in op.input]
            data_refs = [ref for ref in refs if not isinstance(ref, _Control)]
            step = _Step(op, data_refs, decode_attrs(op))
            self.steps.append(step)
            if op.type == "Const":
                step.const = decode_tensor_def(op.attr["value"].t, where=f"Const node {op.name!r}: ")
            elif op.type not in ("Data", "RefData", "NetOutput"):
                step.kernel = _kernel_for(op)
            if op.type == "NetOutput":
                if self.outputs is not None:
                    raise GeExecutionError(f"GE graph {self.name!r} has more than one NetOutput")
                self.outputs = op
            elif op.type in ("Data", "RefData"):
                self.num_data += 1
        if self.outputs is None:
            raise GeExecutionError(f"GE graph {self.name!r} has no NetOutput node")
        self.output_dtypes = list(graph_def.attr["_output_dtypes"].list.i) if "_output_dtypes" in graph_def.attr else None

    def run(self, inputs: list) -> list:
        if len(inputs) != self.num_data:
            raise GeExecutionError(f"GE graph {self.name!r} has {self.num_data} Data nodes but got {len(inputs)} inputs")
        values = {}
        for step in self.steps:
            op = step.op
            if op.type in ("Data", "RefData"):
                values[(op.name, 0)] = _data_value(op, step.attrs, inputs)
            elif op.type == "Const":
                values[(op.name, 0)] = step.const
            elif op.type == "NetOutput":
                return self._collect_outputs(step, values, inputs)
            else:
                args = [None if ref is None else _lookup(values, ref, op) for ref in step.inputs]
                for index, tensor in enumerate(_run_kernel(step, args)):
                    values[(op.name, index)] = tensor
        raise GeExecutionError(f"GE graph {self.name!r}: NetOutput was never reached")  # unreachable

    def _collect_outputs(self, step, values, inputs) -> list:
        op = step.op
        outputs = []
        seen_storages = {t.untyped_storage().data_ptr() for t in inputs if isinstance(t, torch.Tensor)}
        for index, ref in enumerate(step.inputs):
            if ref is None:
                raise GeExecutionError(f"GE graph {self.name!r}: NetOutput input {index} is empty")
            tensor = _lookup(values, ref, op).contiguous()
            # GE writes every output into its own buffer: never hand back an alias of an input or another output.
            storage = tensor.untyped_storage().data_ptr()
            if storage in seen_storages and tensor.numel() > 0:
                tensor = tensor.clone()
            seen_storages.add(tensor.untyped_storage().data_ptr())
            where = f"graph {self.name!r} output {index} (from {ref.node}:{ref.index})"
            if index < len(op.input_desc):
                _check_tensor(tensor, op.input_desc[index], where, trust_float=True)
            if self.output_dtypes is not None:
                expected = ge_dtype_to_torch(self.output_dtypes[index], where=f"{where}: ")
                if tensor.dtype != expected:
                    raise GeExecutionError(f"{where}: dtype mismatch, graph attr _output_dtypes expects {expected}, got {tensor.dtype}")
            outputs.append(tensor)
        if self.output_dtypes is not None and len(self.output_dtypes) != len(outputs):
            raise GeExecutionError(
                f"graph {self.name!r}: NetOutput has {len(outputs)} inputs but _output_dtypes lists {len(self.output_dtypes)}"
            )
        return outputs


def _data_value(op, attrs, inputs) -> torch.Tensor:
    index = attrs.get("index")
    if index is None or not 0 <= index < len(inputs):
        raise GeExecutionError(f"Data node {op.name!r} has index {index!r}; the graph got {len(inputs)} inputs")
    tensor = inputs[index]
    if not isinstance(tensor, torch.Tensor):
        tensor = torch.tensor(tensor)  # a Python scalar for a symbolic size
    desc = op.output_desc[0] if len(op.output_desc) else (op.input_desc[0] if len(op.input_desc) else None)
    if desc is not None:
        _check_tensor(tensor, desc, f"graph input {index} (Data node {op.name!r})", trust_float=True)
    return tensor


def _lookup(values, ref, op):
    try:
        return values[(ref.node, ref.index)]
    except KeyError:
        raise GeExecutionError(
            f"node {op.name!r} ({op.type}) reads {ref.node}:{ref.index}, which that node does not produce"
        ) from None


def _kernel_for(op):
    kernel = _ge_registry.lookup_kernel(op.type)
    if kernel is None:
        raise GeExecutionError(
            f"GE op type {op.type!r} (node {op.name!r}) has no CPU kernel in the op_plugin simulator. "
            f"Add one with op_plugin._simulator.register_ge_kernel({op.type!r}, fn), where "
            "fn(inputs, attrs, node) returns the list of output tensors"
        )
    return kernel


def _run_kernel(step: _Step, args) -> list:
    op = step.op
    try:
        outputs = step.kernel(args, step.attrs, op)
    except GeExecutionError:
        raise
    except Exception as error:  # name the node: a bare torch error says nothing about the graph
        raise GeExecutionError(f"GE kernel for {op.type} failed on node {op.name!r}: {error}") from error
    if isinstance(outputs, torch.Tensor) or not isinstance(outputs, (list, tuple)):
        raise GeExecutionError(f"GE kernel for {op.type} (node {op.name!r}) must return a list of tensors, got {type(outputs).__name__}")
    outputs = list(outputs)
    if step.checks and len(outputs) != len(step.checks):
        raise GeExecutionError(
            f"node {op.name!r} ({op.type}): the graph declares {len(step.checks)} outputs, the kernel returned {len(outputs)}"
        )
    for index, tensor in enumerate(outputs):
        if not isinstance(tensor, torch.Tensor):
            raise GeExecutionError(f"node {op.name!r} ({op.type}) output {index}: the kernel returned "
                                   f"{type(tensor).__name__}, not a tensor")
        if index < len(step.checks):
            _check_expectation(tensor, step.checks[index])
    return outputs


def _expectation(desc, where: str, *, trust_float: bool) -> tuple:
    """(where, dtype or None, shape or None) that a tensor described by `desc` must have."""
    shape = [int(dim) for dim in desc.shape.dim] if desc.HasField("shape") else None
    return where, _declared_dtype(desc, trust_float), shape


def _check_expectation(tensor: torch.Tensor, expectation: tuple) -> None:
    where, expected_dtype, declared = expectation
    if expected_dtype is not None and tensor.dtype != expected_dtype:
        raise GeExecutionError(f"{where}: dtype mismatch, expected {expected_dtype}, got {tensor.dtype}")
    if declared is not None and not _shape_matches(declared, list(tensor.shape)):
        raise GeExecutionError(f"{where}: shape mismatch, expected {declared}, got {list(tensor.shape)}")


def _declared_dtype(desc, trust_float: bool):
    number = desc.dtype
    if number == PROTO_DT_UNDEFINED:
        return None
    if number == PROTO_DT_FLOAT and not trust_float and "_meta" not in desc.attr:
        return None  # possibly TorchAir's default fill for an unknown dtype
    return proto_dtype_to_torch(number)


def _shape_matches(declared: list, actual: list) -> bool:
    if declared == [UNKNOWN_RANK]:
        return True
    if len(declared) != len(actual):
        return False
    return all(want in (UNKNOWN_DIM, UNKNOWN_RANK) or want == got for want, got in zip(declared, actual))


def _check_tensor(tensor: torch.Tensor, desc, where: str, *, trust_float: bool) -> None:
    _check_expectation(tensor, _expectation(desc, where, trust_float=trust_float))


def compile_graph(graph_def) -> GraphPlan:
    """Prepare a GraphDef for repeated runs (topological order, decoded attrs)."""
    return GraphPlan(graph_def)


def execute_graph(graph_def, inputs: list) -> list:
    """Run ``graph_def`` on the CPU with ``inputs`` in Data-index order; one tensor per NetOutput input."""
    return GraphPlan(graph_def).run(list(inputs))

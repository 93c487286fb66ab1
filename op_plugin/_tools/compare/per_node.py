"""`op_plugin.compare`: per FX node, where graph mode departs from eager.

The model is compiled with the npugraph backend on the simulator. While `compare` runs (and only
then), TorchAir's `_NpuFxCompiler.__call__` is wrapped so that every graph it compiles (forward,
and backward when AOT compiles it lazily at `backward()`) is replaced by a runner that, per call:

1. runs the GE graph on the simulator under `executor.observing`, keeping a copy of every GE
   tensor that TorchAir named after an FX node (`_fx_tensor_name` = "<node>-<target>.OUTPUT.<i>");
2. runs the FX graph TorchAir lowered (`GeConcreteGraph.fx_graph`, after TorchAir's FX passes)
   node by node in eager mode on copies of the same inputs, twice: from the graph inputs
   ("chained"), and with each node fed the GE values of its inputs where the GE graph has them
   ("local": the node's own error, independent of what went wrong upstream);
3. hands back the GE results, so the model goes on exactly as it would in graph mode.

The wrapper is undone when `compare` returns. Random ops (tagged nondeterministic_seeded) are not
compared; the local run carries their GE values on, so nodes after them are still compared.
"""
from __future__ import annotations

import contextlib

import torch
from torch.fx.node import map_arg

from ... import _simulator
from ..._backend import NpuGraphConfig, compile_graph
from .report import CompareReport, CompareRow, error_of, known_difference, within
from ..inspect.graph_classes import data_inputs
from .._shared.progress import progress
from .._shared.tolerances import tolerances

_OUTPUT = ".OUTPUT."


def compare(model_or_fn, *inputs, dynamic: bool = False, backward: bool | None = None, seed: int = 0,
            no_grad: bool = False, **backend_options) -> CompareReport:
    """Compile with npugraph (simulator), run once on `inputs` (and backward, when an output requires
    grad and `backward` is not False, with a seeded random cotangent), and compare every FX node's GE
    result with eager. `no_grad=True` runs (and so traces) the model under torch.no_grad(), as an
    inference model runs: its ops need no backward, and nothing is compared backward.
    `backend_options` are the npugraph backend's (NpuGraphConfig's fields).
    Returns a CompareReport (`first_divergent`, `rows`, `str()`, `to_json()`, `picture()`)."""
    report = CompareReport()
    config = NpuGraphConfig.from_options(backend_options)

    def backend(gm, example_inputs):
        return compile_graph(gm, example_inputs, config, force_simulator=True)

    compiled = torch.compile(model_or_fn, backend=backend, dynamic=dynamic)
    grad_mode = torch.no_grad() if no_grad else contextlib.nullcontext()
    with _comparing(report), _simulator.capture_graphs():
        with grad_mode:
            outputs = compiled(*inputs)
        tensors = [t for t in torch.utils._pytree.tree_leaves(outputs)
                   if isinstance(t, torch.Tensor) and t.requires_grad and t.is_floating_point()]
        if tensors and backward is not False:
            generator = torch.Generator().manual_seed(seed)
            grads = [torch.randn(t.shape, generator=generator).to(t.dtype) for t in tensors]
            torch.autograd.backward(tensors, grads)
    report.outputs = outputs
    return report


@contextlib.contextmanager
def _comparing(report: CompareReport):
    torchair = _simulator.load_torchair()
    del torchair
    from torchair import npu_fx_compiler

    compiler_cls = npu_fx_compiler._NpuFxCompiler
    original = compiler_cls.__call__
    counter = {"graphs": 0}

    def comparing_call(self, gm, example_inputs):
        compiled = original(self, gm, example_inputs)
        lowered = getattr(getattr(compiled, "runner", None), "fx_graph", None)
        if not isinstance(lowered, torch.fx.GraphModule):
            return compiled  # not a GE graph (e.g. a debug fallback): nothing to compare
        kind = "backward" if any(n.op == "placeholder" and n.name.startswith("tangents")
                                 for n in lowered.graph.nodes) else "forward"
        label = f"{kind} {counter['graphs']}"
        counter["graphs"] += 1
        report.fx_graphs[label] = lowered
        return _ComparingRunner(compiled, lowered, label, report)

    compiler_cls.__call__ = comparing_call
    try:
        yield
    finally:
        compiler_cls.__call__ = original


class _ComparingRunner:
    """Stands where TorchAir's compiled graph stood; compares each call (see the module docstring)."""

    def __init__(self, compiled, lowered, label, report):
        self._compiled, self._gm, self._label, self._report = compiled, lowered, label, report

    def __getattr__(self, name):
        return getattr(self._compiled, name)

    def __call__(self, *args, **kwargs):
        eager_args = [a.detach().clone() if isinstance(a, torch.Tensor) else a for a in args]
        seen: dict[str, tuple] = {}   # fx tensor name -> (GE node, cone types, tensor copy)
        cones: dict[int, dict] = {}

        def observe(plan, op, outputs):
            for index, desc in enumerate(op.output_desc):
                if "_fx_tensor_name" in desc.attr and index < len(outputs):
                    graph_def = plan.graph_def
                    cone = cones.setdefault(id(graph_def), _producer_types(graph_def))
                    self._report.ge_graphs[self._label] = graph_def
                    seen[desc.attr["_fx_tensor_name"].s.decode()] = (op.name, cone.get(op.name, [op.type]),
                                                                     outputs[index].detach().clone())

        with _observing(observe):
            result = self._compiled(*args, **kwargs)
        _replay(self._gm, eager_args, seen, self._label, self._report)
        return result


def _observing(observer):
    from ..._simulator.interpreter.executor import observing

    return observing(observer)


def _producer_types(graph_def) -> dict[str, list[str]]:
    """GE node -> op types of the nodes a converter built to compute it: walking back through inputs,
    stopping at Data, Const and nodes whose outputs carry another FX node's name."""
    ops = {op.name: op for op in graph_def.op}
    named = {op.name for op in graph_def.op if any("_fx_tensor_name" in d.attr for d in op.output_desc)}
    result = {}
    for name in named:
        types, stack, visited = [], [name], set()
        while stack:
            current = stack.pop()
            if current in visited or current not in ops:
                continue
            visited.add(current)
            op = ops[current]
            if op.type in ("Data", "Const", "Constant") or (current in named and current != name):
                continue
            types.append(op.type)
            stack.extend(source for _, source, _ in data_inputs(op))
        result[name] = list(dict.fromkeys(reversed(types)))
    return result


def _split_name(fx_tensor_name: str) -> tuple[str, str]:
    prefix, _, path = fx_tensor_name.rpartition(_OUTPUT)
    return prefix.partition("-")[0], path


def _at_path(value, path: str):
    if path in ("", "0") and not isinstance(value, (list, tuple, dict)):
        return value
    for part in path.split("."):
        if isinstance(value, (list, tuple)) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        elif isinstance(value, dict) and part in value:
            value = value[part]
        else:
            return None
    return value


def _target_name(node) -> str:
    target = node.target
    if isinstance(target, torch._ops.OpOverload):
        return f"{target.namespace}.{target._opname}.{target._overloadname}"
    return getattr(target, "__name__", str(target))


def _replay(gm, args, seen, label, report) -> None:
    """Run `gm` eagerly node by node (chained and local) and add a row per named GE tensor."""
    by_node: dict[str, list[tuple[str, tuple]]] = {}
    for name, record in seen.items():
        node_name, path = _split_name(name)
        by_node.setdefault(node_name, []).append((path, record))
    chained, local = {}, {}
    placeholders = iter(args)
    nodes = list(gm.graph.nodes)
    for node in progress(nodes, desc=f"compare {label}", unit="node"):
        if node.op == "placeholder":
            value = next(placeholders, None)
            chained[node] = value
            local[node] = value.clone() if isinstance(value, torch.Tensor) else value
            continue
        if node.op == "output":
            break
        if node.op == "get_attr":
            chained[node] = local[node] = getattr(gm, node.target)
            continue
        chained[node] = _run(node, chained, gm)
        local_value = _run(node, local, gm)
        records = by_node.get(node.name, [])
        random = (isinstance(node.target, torch._ops.OpOverload)
                  and torch.Tag.nondeterministic_seeded in node.target.tags)
        for path, (ge_node, ge_types, ge_tensor) in sorted(records):
            expected = _at_path(local_value, path)
            drift_from = _at_path(chained[node], path)
            report.rows.append(_row(label, node, path, ge_node, ge_types, ge_tensor, expected, drift_from, random))
            local_value = _replace(local_value, path, ge_tensor, expected)
        local[node] = local_value


def _run(node, env, gm):
    if isinstance(env.get(node), Exception):
        return env[node]
    args = map_arg(node.args, lambda n: env[n])
    kwargs = map_arg(node.kwargs, lambda n: env[n])
    failed = next((a for a in torch.utils._pytree.tree_leaves((args, kwargs)) if isinstance(a, Exception)), None)
    if failed is not None:
        return failed
    try:
        if node.op == "call_function":
            return node.target(*args, **kwargs)
        if node.op == "call_method":
            return getattr(args[0], node.target)(*args[1:], **kwargs)
        if node.op == "call_module":
            return gm.get_submodule(node.target)(*args, **kwargs)
    except Exception as error:  # reported on the node's row
        return RuntimeError(f"eager {node.name} failed: {error}")
    return RuntimeError(f"unsupported FX node kind {node.op}")


def _replace(value, path, ge_tensor, expected):
    """The local run goes on with the GE value where it has the eager value's dtype and shape."""
    if not isinstance(expected, torch.Tensor) or expected.shape != ge_tensor.shape or expected.dtype != ge_tensor.dtype:
        return value
    if isinstance(value, torch.Tensor) and path in ("", "0"):
        return ge_tensor
    if isinstance(value, (list, tuple)) and path.isdigit() and int(path) < len(value):
        items = list(value)
        items[int(path)] = ge_tensor
        return type(value)(items) if isinstance(value, list) else tuple(items)
    return value


def _row(label, node, path, ge_node, ge_types, ge_tensor, expected, chained, random) -> CompareRow:
    target = _target_name(node)
    tol = tolerances(ge_tensor.dtype)
    row = CompareRow(graph=label, node=node.name, target=target, ge_types=list(ge_types), ge_node=ge_node,
                     output=path or "0", dtype=str(ge_tensor.dtype).replace("torch.", ""),
                     shape=list(ge_tensor.shape), max_abs=None, max_rel=None, chained_abs=None,
                     atol=tol["atol"], rtol=tol["rtol"], ok=True)
    if isinstance(expected, Exception):
        row.note = f"not compared: {expected}"
        return row
    if not isinstance(expected, torch.Tensor):
        if isinstance(expected, (int, float, bool)) and ge_tensor.numel() == 1:
            expected = torch.tensor(expected, dtype=ge_tensor.dtype).reshape(ge_tensor.shape)
        else:
            row.note = f"not compared: eager gives {type(expected).__name__}"
            return row
    if random:
        row.note = "not compared: random op (nondeterministic_seeded); its GE value is carried on"
        return row
    if expected.shape != ge_tensor.shape or expected.dtype != ge_tensor.dtype:
        row.ok = False
        row.note = f"GE gives {ge_tensor.dtype}{list(ge_tensor.shape)}, eager {expected.dtype}{list(expected.shape)}"
        return row
    row.max_abs, row.max_rel = error_of(ge_tensor, expected)
    if isinstance(chained, torch.Tensor) and chained.shape == ge_tensor.shape:
        row.chained_abs = error_of(ge_tensor, chained)[0]
    row.ok = within(ge_tensor, expected, **tol)
    if not row.ok:
        reason = known_difference(ge_types, target)
        if reason:
            row.note = f"known difference: {reason}"
    return row


__all__ = ["CompareReport", "CompareRow", "compare"]

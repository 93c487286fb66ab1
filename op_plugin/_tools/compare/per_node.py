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

Every FX node TorchAir lowered gets its own row. A converter that computes nothing returns its input's
GE tensor (TorchAir's `aten.expand` when the sizes already match, views): TorchAir then renames that
tensor after the later FX node, and the node that computed it would have no row, its GE node reported
on the pass-through's. While `compare` runs, the earlier names are kept on the GE tensor
(`_op_plugin_fx_tensor_names`): the computing node keeps its row, GE node and op types, and the
pass-through gets a row of its own with no GE op types and a note naming the node it passes on.

An op without a backward (none written, an in-place op, one of torch_npu's ops on the simulator) makes
the backward impossible, not the comparison: when `backward` is not True, the model is compared forward
only, run again under torch.no_grad() as inference runs it, with a note in the report that says why
(`report.notes`). A model in eval mode is compared forward and backward like any other when its ops have
backwards (an eval model can be differentiated: frozen batch norm, input gradients); `no_grad=True`
(`--no-grad`) compares an inference model's forward only from the start.
"""
from __future__ import annotations

import contextlib
import warnings

import torch
import torch._dynamo  # reset() below may run before any torch.compile has imported it
from torch.fx.node import map_arg

from ... import _simulator
from ..._backend import NpuGraphConfig, compile_graph
from ..._base.errors import MissingBackwardError, NoBackwardError, option_fix, options_given_as
from .report import CompareReport, CompareRow, error_of, known_difference, within
from ..inspect.graph_classes import data_inputs
from .._shared.progress import progress
from .._shared.tolerances import tolerances

_OUTPUT = ".OUTPUT."
_EARLIER_NAMES = "_op_plugin_fx_tensor_names"   # earlier FX names of a GE tensor a later FX node passed through


def compare(model_or_fn, *inputs, dynamic: bool = False, backward: bool | None = None, seed: int = 0,
            no_grad: bool = False, **backend_options) -> CompareReport:
    """Compile with npugraph (simulator), run once on `inputs` (and backward, when an output requires
    grad and `backward` is not False, with a seeded random cotangent), and compare every FX node's GE
    result with eager. `no_grad=True` runs (and so traces) the model under torch.no_grad(), as an
    inference model runs: its ops need no backward, and nothing is compared backward. When an op has
    no backward and `backward` is not True, the forward is compared that way, with a note saying why
    (`report.notes`); `backward=True` makes that an error.
    `backend_options` are the npugraph backend's (NpuGraphConfig's fields).
    Returns a CompareReport (`first_divergent`, `rows`, `notes`, `str()`, `to_json()`, `picture()`)."""
    # Lowered here, never taken from the compile cache: the tool reads what the lowering builds.
    config = NpuGraphConfig.from_options({**backend_options, "compile_cache": False})
    with options_given_as(without=("mode",)):   # compare checks the GE graph: a fix never says mode aclgraph
        if no_grad:
            return _compare_once(model_or_fn, inputs, config, dynamic, backward, seed, no_grad)
        # what the attempt warns about (under the filters in force) is kept back until it is known to stand
        with warnings.catch_warnings(record=True) as said:
            try:
                report = _compare_once(model_or_fn, inputs, config, dynamic, backward, seed, no_grad)
                error = None
            except Exception as raised:   # re-raised below unless it is a missing backward
                error, report = raised, None
        reason = None if error is None else _no_backward(error)
        if error is None or reason is None:
            for warning in said:   # the attempt stands: what it warned about is said now
                warnings.warn_explicit(warning.message, warning.category, warning.filename, warning.lineno)
            if error is not None:
                raise error
            return report
        # the failed attempt's warnings (autograd's anomaly traceback of the missing backward) are dropped
        if backward is True:
            raise NoBackwardError(f"compare(backward=True): {reason}; write the backward, or compare the forward "
                                  f"only: {option_fix('backward', None)} (the default: the backward is skipped "
                                  f"with a note) or {option_fix('no_grad')}") from error
        torch._dynamo.reset()   # the failed compile traced with grad; the forward is traced again without
        report = _compare_once(model_or_fn, inputs, config, dynamic, False, seed, True)
        report.notes.append(f"backward not compared: {reason}; the forward was compared under torch.no_grad(), as "
                            f"inference runs it ({option_fix('no_grad')} does this from the start)")
        return report


def _compare_once(model_or_fn, inputs, config, dynamic, backward, seed, no_grad) -> CompareReport:
    report = CompareReport()

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


# torch_npu's ops on the simulator refuse a gradient with this (`_simulator/npu/ops.py`, NotImplementedError)
_TORCH_NPU_NO_BACKWARD = "has no backward on the CPU simulator"


def _no_backward(error: BaseException) -> str | None:
    """Why the model has no backward, when that is what `error` (or an error it wraps: dynamo's,
    AOT's, TorchAir's) says: its first clause ("….yaml:6: op 'x': npu::x has no backward"), with the
    decorator that adds one; else None."""
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if isinstance(error, NoBackwardError) or (isinstance(error, NotImplementedError)
                                                  and _TORCH_NPU_NO_BACKWARD in str(error)):
            reason = str(error).strip().splitlines()[0].split("; ")[0]
            if isinstance(error, MissingBackwardError):
                reason += " (@op_plugin.backward adds one)"
            return reason
        error = error.__cause__ or error.__context__
    return None


@contextlib.contextmanager
def _comparing(report: CompareReport):
    torchair = _simulator.load_simulated_torchair()
    del torchair
    from torchair import npu_fx_compiler

    from torchair._ge_concrete_graph import fx2ge_converter

    compiler_cls = npu_fx_compiler._NpuFxCompiler
    original = compiler_cls.__call__
    set_names = fx2ge_converter._set_fx_tensor_names
    counter = {"graphs": 0}

    def keeping_earlier_names(ge_outputs, fx_tensor_prefix):
        # A converter that returns its input's GE tensor (expand to the same sizes, a view) makes TorchAir
        # rename it after the later FX node: keep the names it had, so each FX node keeps its own row.
        for tensor in _ge_tensors(ge_outputs):
            attrs = tensor.desc.attr
            if "_fx_tensor_name" in attrs and not attrs["_fx_tensor_name"].s.startswith(fx_tensor_prefix.encode()):
                attrs[_EARLIER_NAMES].list.s.append(attrs["_fx_tensor_name"].s)
        return set_names(ge_outputs, fx_tensor_prefix)

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
    fx2ge_converter._set_fx_tensor_names = keeping_earlier_names
    try:
        yield
    finally:
        compiler_cls.__call__ = original
        fx2ge_converter._set_fx_tensor_names = set_names


def _ge_tensors(value):
    """The GE tensors (objects with an output `desc`) in a converter's nested result."""
    if hasattr(value, "desc") and hasattr(value.desc, "attr"):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _ge_tensors(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _ge_tensors(item)


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
                    value = outputs[index].detach().clone()
                    names = [*(s.decode() for s in _earlier_names(desc)), desc.attr["_fx_tensor_name"].s.decode()]
                    # the first name is the FX node that computed the tensor; later ones passed it through
                    seen[names[0]] = (op.name, cone.get(op.name, [op.type]), value, "")
                    for name in names[1:]:
                        seen[name] = (op.name, [], value,
                                      f"no GE op of its own: TorchAir's converter passes on the GE value of "
                                      f"{_split_name(names[0])[0]} (GE node {op.name})")

        with _observing(observe):
            result = self._compiled(*args, **kwargs)
        _replay(self._gm, eager_args, seen, self._label, self._report)
        return result


def _earlier_names(desc) -> list:
    return list(desc.attr[_EARLIER_NAMES].list.s) if _EARLIER_NAMES in desc.attr else []


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
        for path, (ge_node, ge_types, ge_tensor, note) in sorted(records, key=lambda record: record[0]):
            expected = _at_path(local_value, path)
            drift_from = _at_path(chained[node], path)
            row = _row(label, node, path, ge_node, ge_types, ge_tensor, expected, drift_from, random)
            row.note = "; ".join(part for part in (note, row.note) if part)
            report.rows.append(row)
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

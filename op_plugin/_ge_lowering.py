"""GE lowering of YAML ops: converters registered with TorchAir, generated from the `ge:` mapping.

`install_lowering(torchair, simulator=...)` runs once per process when the npugraph backend first
needs TorchAir (importing TorchAir costs seconds, so `import op_plugin` never does it). It covers
every loaded op and, through hooks, every op loaded or decorated later:

- an op with `@op_plugin.converter` gets that function;
- an op with `ge:` gets a converter emitting `torchair.ge.custom_op(type, inputs, outputs, attrs)`
  with typed `ge.attr.*` attrs;
- an op with neither gets a converter that fails with a message saying what to add.

On the simulator it also answers `get_registered_ir_def` for the YAML's custom GE types and
registers their executor kernels (the op's reference kernel). Built-in types (RmsNorm, AddN, ...)
keep CANN's prototype and the executor's own GE kernel, so the YAML mapping onto them is checked
against GE semantics rather than against itself.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from . import _load, _registry
from ._binding import bind
from ._errors import OpPluginError
from ._spec import OpSpec

_installed: dict[str, Any] = {}   # "torchair" -> module, "simulator" -> bool


def install_lowering(torchair: Any, *, simulator: bool) -> None:
    if _installed:
        return
    _installed.update(torchair=torchair, simulator=simulator)
    for st in _registry.loaded():
        _install_op(st)
    _load._load_hooks.append(_install_op)
    _registry._piece_listeners.append(_on_piece)


def _on_piece(st: _registry.OpState, piece: str) -> None:
    if piece == "converter" and st.spec is not None:
        _register_converter(st)


def _install_op(st: _registry.OpState) -> None:
    _register_converter(st)
    spec = st.spec
    if _installed["simulator"] and spec.ge is not None and st.converter is None:
        from . import _simulator
        from ._simulator._builtin_ir import builtin_prototype

        builtin = builtin_prototype(spec.ge.type)
        if builtin is not None:
            _check_against_builtin(spec, builtin)
        else:
            handle = _simulator.register_ir_prototype(ir_prototype(spec))
            st.undo.append(handle.remove)
            kernel = _simulator.register_ge_kernel(spec.ge.type, _reference_ge_kernel(spec))
            st.undo.append(kernel.remove)


def overload_of(spec: OpSpec) -> torch._ops.OpOverload:
    packet = getattr(getattr(torch.ops, spec.namespace), spec.name)
    return getattr(packet, spec.schema.overload or "default")


def _register_converter(st: _registry.OpState) -> None:
    spec = st.spec
    op = overload_of(spec)
    if st.converter is not None:
        fn = st.converter
    elif spec.ge is not None:
        fn = generated_converter(spec, _installed["torchair"])
    else:
        fn = _missing_mapping_converter(spec)
    _installed["torchair"].register_fx_node_ge_converter(op)(fn)
    st.undo.append(lambda: op.__dict__.pop("_ge_converter", None))


def ge_outputs(spec: OpSpec) -> list[str]:
    """The GE output names: the returns, then a ref output for each mutated input not returned."""
    names = list(spec.ge.outputs)
    returned = {spec.schema.aliased_arg(r).name for r in spec.schema.returns if r.alias_set}
    for arg in spec.schema.args:
        if arg.mutated and arg.name not in returned:
            names.append(next(i.ge_name for i in spec.ge.inputs if i.arg == arg.name))
    return names


def generated_converter(spec: OpSpec, torchair: Any) -> Callable:
    ge = torchair.ge
    attr_types = ge.attr._ATTR_TYPE_MAP
    to_ge_dtype = torchair.ge._ge_graph.torch_type_to_ge_type
    outputs = ge_outputs(spec)
    n_returns = len(spec.schema.returns)

    def convert(*args, **kwargs):
        _, _, bound = bind(spec, args, kwargs)
        inputs = {i.ge_name: bound.get(i.arg) for i in spec.ge.inputs}
        attrs = {}
        for a in spec.ge.attrs:
            value = a.value(bound)
            if a.value_type == "VT_DATA_TYPE":
                value = to_ge_dtype(value)
            attrs[a.ge_name] = attr_types[a.value_type](value)
        result = ge.custom_op(spec.ge.type, inputs=inputs, outputs=outputs, attrs=attrs)
        results = list(result) if isinstance(result, (list, tuple)) else [result]
        # ref outputs of mutated-but-not-returned inputs are in the IR, not in the FX node's result
        results = results[:n_returns]
        return results[0] if n_returns == 1 else tuple(results)

    convert.__name__ = f"convert_{spec.name}"
    convert.__qualname__ = convert.__name__
    return convert


def _missing_mapping_converter(spec: OpSpec) -> Callable:
    def convert(*args, **kwargs):
        loc = spec.location
        raise OpPluginError(f"{loc.file}:{loc.line}: op '{spec.name}': field 'ge': {spec.qualname} has no GE "
                            f"mapping; add `ge:` to its YAML entry or @op_plugin.converter('{spec.qualname}'), "
                            "or compile with mode='aclgraph', which needs only the Meta function")

    return convert


def ir_prototype(spec: OpSpec):
    """The IR prototype a YAML op declares for its (custom) GE type."""
    from ._simulator import IrPrototype

    refs = set(ge_outputs(spec)) - set(spec.ge.outputs)
    return IrPrototype(
        spec.ge.type,
        inputs=tuple((i.ge_name, i.kind) for i in spec.ge.inputs),
        outputs=tuple((name, "required") for name in list(spec.ge.outputs) + sorted(refs)),
        attrs=tuple((a.ge_name, a.value_type) for a in spec.ge.attrs),
    )


def _check_against_builtin(spec: OpSpec, builtin) -> None:
    """A mapping onto a built-in op must use its real input, attr and output names and kinds."""
    loc = f"{spec.location.file}:{spec.location.line}: op '{spec.name}': field 'ge'"
    real_inputs, real_attrs = dict(builtin.inputs), dict(builtin.attrs)
    real_outputs = [name for name, _ in builtin.outputs]
    for i in spec.ge.inputs:
        if real_inputs.get(i.ge_name) != i.kind:
            raise OpPluginError(f"{loc}: built-in {spec.ge.type} has inputs {builtin.inputs}; "
                                f"'{i.ge_name}' ({i.kind}) does not match")
    for a in spec.ge.attrs:
        if real_attrs.get(a.ge_name) != a.value_type:
            raise OpPluginError(f"{loc}: built-in {spec.ge.type} has attrs {builtin.attrs}; "
                                f"'{a.ge_name}' ({a.value_type}) does not match")
    if list(spec.ge.outputs) != real_outputs[: len(spec.ge.outputs)]:
        raise OpPluginError(f"{loc}: built-in {spec.ge.type} has outputs {real_outputs}, not {list(spec.ge.outputs)}")


def _reference_ge_kernel(spec: OpSpec) -> Callable:
    """Executor kernel for a custom GE type: the op's reference kernel on the node's inputs and attrs."""
    from ._simulator._ge_types import ge_dtype_to_torch

    st = _registry.state(spec.qualname)
    n_outputs = len(ge_outputs(spec))
    promised = _MetaCache(spec)

    def kernel(inputs: list, attrs: dict, node) -> list:
        names = [desc.name for desc in node.input_desc]
        by_arg: dict[str, Any] = {}
        for ge_input in spec.ge.inputs:
            if ge_input.kind == "dynamic":
                by_arg[ge_input.arg] = [t for n, t in zip(names, inputs)
                                        if n.startswith(ge_input.ge_name) and n[len(ge_input.ge_name):].isdigit()]
            else:
                by_arg[ge_input.arg] = next((t for n, t in zip(names, inputs) if n == ge_input.ge_name), None)
        for a in spec.ge.attrs:
            if a.arg is not None:
                value = attrs[a.ge_name]
                # ScalarType attrs travel as GE dtype numbers; the reference kernel wants a torch.dtype
                by_arg[a.arg] = ge_dtype_to_torch(value) if a.value_type == "VT_DATA_TYPE" else value
        args = [by_arg[arg.name] for arg in spec.schema.args if not arg.kwarg_only and arg.name in by_arg]
        kwargs = {arg.name: by_arg[arg.name] for arg in spec.schema.args if arg.kwarg_only and arg.name in by_arg}
        with torch.no_grad():
            result = st.reference(*args, **kwargs)
        results = list(result) if isinstance(result, (list, tuple)) else [result]
        _check_against_meta(spec, node, results, promised(args, kwargs))
        mutated = [by_arg[a.name] for a in spec.schema.args if a.mutated
                   and a.name not in {spec.schema.aliased_arg(r).name for r in spec.schema.returns if r.alias_set}]
        return (results + mutated)[:n_outputs]

    return kernel


class _MetaCache:
    """What the op's Meta function promises for given input shapes, dtypes and attrs: computed on
    meta tensors (no data) once per distinct signature, since steady-state calls repeat them."""

    _LIMIT = 256

    def __init__(self, spec: OpSpec):
        self.spec = spec
        self.cache: dict = {}

    def __call__(self, args: list, kwargs: dict) -> list:
        key = self._key((args, kwargs))
        if key not in self.cache:
            if len(self.cache) >= self._LIMIT:
                self.cache.clear()
            meta_args, meta_kwargs = torch.utils._pytree.tree_map_only(
                torch.Tensor, lambda t: t.to("meta"), (args, kwargs))
            out = overload_of(self.spec)(*meta_args, **meta_kwargs)
            self.cache[key] = list(out) if isinstance(out, (list, tuple)) else [out]
        return self.cache[key]

    @staticmethod
    def _key(tree) -> tuple:
        leaves, structure = torch.utils._pytree.tree_flatten(tree)
        return str(structure), tuple((tuple(x.shape), x.dtype) if isinstance(x, torch.Tensor) else x for x in leaves)


def _check_against_meta(spec: OpSpec, node, results: list, expected: list) -> None:
    """A reference kernel that contradicts the Meta function would make graph mode lie; refuse it."""
    from ._simulator import GeExecutionError

    for i, (got, want) in enumerate(zip(results, expected)):
        if got.shape != want.shape or got.dtype != want.dtype:
            raise GeExecutionError(
                f"node '{node.name}' ({node.type}, reference kernel of {spec.qualname}) output {i}: "
                f"got {got.dtype} {list(got.shape)} but the Meta function says {want.dtype} {list(want.shape)}; "
                "the reference kernel and the YAML `outputs:` rule (or Meta function) disagree")

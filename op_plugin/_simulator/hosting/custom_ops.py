"""The simulator's side of a YAML op's lowering: its custom GE type answered and executed.

`lowering_hook(state)` is the `op_hook` the backend hands to `install_converters` on a CPU host:

- an op mapped onto a CANN built-in type (RmsNorm, AddN, ...) keeps CANN's prototype and the
  executor's own kernel; its mapping is checked against the real prototype's names and kinds;
- an op with a custom GE type gets its IR prototype registered (so TorchAir's `ge.custom_op`
  finds it) and an executor kernel that runs the op's reference kernel on the node's inputs and
  attrs, whose results are checked against the op's Meta function;
- an op with a hand-written converter and a custom `ge.type` gets them too, so its converter can
  emit that type with `ge.custom_op` (unless another op owns the type); with a built-in type, or
  none, it needs nothing here.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ..._base.errors import OpPluginError
from ..._base.handles import HandleGroup, RegistrationHandle
from ..._ge.ir import AttrType
from ..._ge.values import ge_dtype_to_torch
from ..._lowering.mapping import check_against_builtin
from ..._registry.binding import bind
from ..._registry.library import op_overload
from ..._registry.op_state import OpState, loaded, state
from ..._spec.ge_prototype import ge_outputs, ir_prototype
from ..._spec.model import OpSpec
from ..interpreter.executor import GeExecutionError
from .ir_registry import builtin_prototype, register_ir_prototype, registered_ir_prototype
from ..interpreter.kernels import register_ge_kernel


def lowering_hook(st: OpState) -> RegistrationHandle | None:
    spec = st.spec
    if spec.ge is None:
        return None
    builtin = builtin_prototype(spec.ge.type)
    if builtin is not None:
        if st.converter is None:
            check_against_builtin(spec, builtin)
        return None
    owner = _other_owner(spec)
    if st.converter is not None:
        # A hand-written converter may emit the declared custom type itself (`ge.custom_op`), as
        # TorchAir users wrap their own Ascend C op: the type keeps its prototype and kernel, as
        # CANN would have them on an Ascend host. Unless another op already owns the type.
        if owner is not None or registered_ir_prototype(spec.ge.type) is not None:
            return None
    elif owner is not None:
        raise OpPluginError(f"{spec.field('ge.type')}: custom GE type {spec.ge.type} is already the type of "
                            f"{owner.qualname} ({owner.location.file_line}); a custom GE type runs one kernel, so "
                            "it belongs to one op: give this op its own `ge.type`")
    with HandleGroup(f"simulator pieces of {spec.qualname}") as group:
        group.add(register_ir_prototype(ir_prototype(spec)))
        group.add(register_ge_kernel(spec.ge.type, reference_ge_kernel(spec), prototype=ir_prototype(spec)))
    return group


def _other_owner(spec: OpSpec) -> OpSpec | None:
    """Another loaded op whose custom GE type is `spec`'s (with no hand-written converter of its own)."""
    for st in loaded():
        other = st.spec
        if other is not spec and other.ge is not None and other.ge.type == spec.ge.type and st.converter is None:
            return other
    return None


def reference_ge_kernel(spec: OpSpec) -> Callable:
    """Executor kernel for a custom GE type: the op's reference kernel on the node's inputs and attrs."""
    st = state(spec.qualname)
    n_outputs = len(ge_outputs(spec))
    promised = _MetaPromise(spec)
    returned = {spec.schema.aliased_arg(r).name for r in spec.schema.returns if r.alias_set}
    mutated_not_returned = [a.name for a in spec.schema.args if a.mutated and a.name not in returned]
    mutated_args = [a.name for a in spec.schema.args if a.mutated]
    read_only_args = [a.name for a in spec.schema.args if not a.mutated]

    def kernel(*, node, **named) -> list:
        # The interpreter binds the node to this op's prototype: every GE input arrives by its
        # name (a dynamic one as a list, an unfed optional one as None) and so does every attr.
        by_arg: dict[str, Any] = {ge_input.arg: named.get(ge_input.ge_name) for ge_input in spec.ge.inputs}
        for a in spec.ge.attrs:
            if a.arg is not None:
                value = named[a.ge_name]
                # ScalarType attrs travel as GE dtype numbers; the reference kernel wants a torch.dtype
                by_arg[a.arg] = ge_dtype_to_torch(value) if a.value_type is AttrType.DATA_TYPE else value
        # Bound by name: an argument without a GE attr takes its schema default (the converter has
        # refused any other value), so later arguments never shift into its place.
        args, kwargs, _ = bind(spec, (), by_arg)
        read_only = _read_only_tensors(by_arg, read_only_args, mutated_args)
        versions = [t._version for _, t in read_only]
        with torch.no_grad():
            result = st.reference(*args, **kwargs)
        _check_read_only(spec, node, read_only, versions)
        results = _as_list(result)
        _check_against_meta(spec, node, results, promised(args, kwargs))
        return (results + [by_arg[name] for name in mutated_not_returned])[:n_outputs]

    return kernel


def _read_only_tensors(by_arg: dict, read_only: list, mutated: list) -> list:
    """(argument name, tensor) for every tensor the schema declares read-only (a tensor list's items too),
    but those sharing memory with a declared write (the same tensor passed for both)."""
    written = {_storage(t) for name in mutated for t in _tensors(by_arg.get(name))}
    return [(name, t) for name in read_only for t in _tensors(by_arg.get(name))
            if _storage(t) not in written and not t.is_inference()]  # inference tensors count no versions


def _tensors(value) -> list:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [v for v in value if isinstance(v, torch.Tensor)]
    return []


def _storage(tensor: torch.Tensor) -> int:
    return tensor.untyped_storage().data_ptr() if tensor.numel() else id(tensor)


def _check_read_only(spec: OpSpec, node, read_only: list, versions: list) -> None:
    """A reference kernel that writes an argument its schema declares read-only (`w.add_(1)` on `Tensor w`)
    is refused, naming the op, the node and the argument: in a graph that argument may be a value the plan
    keeps between calls (a constant), or one other nodes read after this one."""
    for (name, tensor), version in zip(read_only, versions, strict=True):
        if tensor._version != version:
            raise GeExecutionError(
                f"node '{node.name}' ({node.type}): the reference kernel of {spec.qualname} wrote into argument "
                f"'{name}', which the schema declares read-only (`Tensor {name}`; a write is declared "
                f"`Tensor(a!) {name}`). Write into a copy ({name}.clone()) or declare the write; eagerly, "
                "`op-plugin test` reports it as opcheck's test_schema")


def _as_list(result) -> list:
    """A kernel's result as a list of returns: None (an op returning `()`) is none."""
    if result is None:
        return []
    return list(result) if isinstance(result, (list, tuple)) else [result]


class _MetaPromise:
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
            out = op_overload(self.spec)(*meta_args, **meta_kwargs)
            self.cache[key] = _as_list(out)
        return self.cache[key]

    @staticmethod
    def _key(tree) -> tuple:
        leaves, structure = torch.utils._pytree.tree_flatten(tree)
        return str(structure), tuple((tuple(x.shape), x.dtype) if isinstance(x, torch.Tensor) else x for x in leaves)


def _check_against_meta(spec: OpSpec, node, results: list, expected: list) -> None:
    """A reference kernel that contradicts the Meta function would make graph mode lie; refuse it."""
    for i, (got, want) in enumerate(zip(results, expected, strict=True)):
        if got.shape != want.shape or got.dtype != want.dtype:
            raise GeExecutionError(
                f"node '{node.name}' ({node.type}, reference kernel of {spec.qualname}) output {i}: "
                f"got {got.dtype} {list(got.shape)} but the Meta function says {want.dtype} {list(want.shape)}; "
                "the reference kernel and the YAML `outputs:` rule (or Meta function) disagree")

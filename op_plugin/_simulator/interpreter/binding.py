"""A kernel bound to one GE node: its inputs grouped by the prototype, its attrs resolved once.

`bind(entry, op, attrs)` returns a `BoundKernel`: `call(args) -> list[Tensor]`, where `args` are the
node's data inputs in GE order (None for an optional input left unfed), and `call_for(specs)`, the call
a plan runs for inputs of given specs (`prepared`). Everything that depends only on the
node is worked out here, when the plan is built: which inputs form a dynamic input's list, each
attr's value (the node's, else CANN's default), the dtype rules to apply. An attr on the node that the
prototype does not name is refused unless `unnamed_attrs` accepts it (bookkeeping, proven inert).
"""
from __future__ import annotations

import functools
import inspect
import keyword
from collections.abc import Callable
from dataclasses import dataclass

import torch

from ..._base.numerics import HALF_PRECISION, opmath
from ..._ge.builtin_prototypes import builtin_prototype
from ..._ge.ir import REQUIRED, InputKind, IrPrototype
from . import unnamed_attrs
from .errors import GeExecutionError, KernelError, refuse
from .prepared import InputSpec, direct_specs, prepare_of
from .registry import KernelEntry

NODE_PARAMETER = "node"


@dataclass(frozen=True)
class KernelSignature:
    """What a kernel function declares, under GE's names: input parameters (positional), attr
    parameters (keyword-only: GE name, Python name, default or inspect.Parameter.empty), whether it
    takes `node`, `*rest` or `**named`."""

    inputs: tuple[str, ...]
    attrs: tuple[tuple[str, object], ...]  # (GE name, default or inspect.Parameter.empty)
    attr_parameters: tuple[tuple[str, str], ...]  # (GE name, the Python parameter it is passed as)
    wants_node: bool
    var_positional: bool
    var_keyword: bool


def ge_name(parameter_name: str) -> str:
    """The GE name a kernel parameter stands for: `else_` is GE's input `else`, a Python keyword."""
    stem = parameter_name[:-1]
    return stem if parameter_name.endswith("_") and keyword.iskeyword(stem) else parameter_name


@functools.lru_cache(maxsize=None)
def kernel_signature(fn: Callable) -> KernelSignature:
    inputs, attrs, passed_as, wants_node, var_positional, var_keyword = [], [], [], False, False, False
    for param in inspect.signature(fn).parameters.values():
        name = ge_name(param.name)
        if param.name == NODE_PARAMETER and param.kind is param.KEYWORD_ONLY:
            wants_node = True
        elif param.kind in (param.POSITIONAL_ONLY, param.POSITIONAL_OR_KEYWORD):
            inputs.append(name)
        elif param.kind is param.VAR_POSITIONAL:
            var_positional = True
        elif param.kind is param.KEYWORD_ONLY:
            attrs.append((name, param.default))
            passed_as.append((name, param.name))
        else:
            var_keyword = True
    return KernelSignature(tuple(inputs), tuple(attrs), tuple(passed_as), wants_node, var_positional, var_keyword)


def prototype_of(entry: KernelEntry, op_type: str) -> IrPrototype | None:
    if entry.prototype is not None:
        return entry.prototype
    try:
        return builtin_prototype(op_type)
    except OSError:  # the wheel is not unpacked: the kernel's own signature is all there is
        return None


def bind(entry: KernelEntry, op, attrs: dict, data_count: int | None = None) -> BoundKernel:
    """`BoundKernel` (`call(args) -> list`) for `entry` on node `op` (decoded `attrs`); raises GeExecutionError
    naming the node when the node cannot be bound (a required attr missing, an input count the
    prototype does not allow). `data_count`: how many data inputs the node has, when its `input`
    list does not say (a node built by hand for a direct call)."""
    where = f"node {getattr(op, 'name', '?')!r} ({op.type})"
    if data_count is None:
        data_count = sum(1 for text in op.input if not text.endswith(":-1"))
    signature = kernel_signature(entry.fn)
    prototype = prototype_of(entry, op.type)
    if prototype is not None:  # an attr the prototype does not name would never reach the kernel
        unnamed_attrs.check(op, prototype, attrs, where)
    if signature.var_keyword:
        if prototype is None:
            raise GeExecutionError(f"{where}: the kernel takes **named inputs but {op.type} has no prototype")
        return _bind_by_name(entry.fn, prototype, op, attrs, where, signature.wants_node, data_count)
    python_name = dict(signature.attr_parameters)
    kwargs = {python_name[name]: attr_value(name, default, prototype, attrs, where)
              for name, default in signature.attrs}
    if signature.wants_node:
        kwargs[NODE_PARAMETER] = op
    rules = entry.rules if entry.rules else None
    if prototype is None or signature.var_positional:
        return BoundKernel(entry.fn, kwargs, None, where, rules, signature.inputs)
    groups = _input_groups(prototype, op, where, data_count)
    if len(groups) != len(signature.inputs):
        raise GeExecutionError(f"{where}: the kernel {entry.fn.__name__} takes {len(signature.inputs)} inputs "
                               f"{list(signature.inputs)} but the prototype declares {len(groups)} "
                               f"{[p.name for p in prototype.inputs]}")
    return BoundKernel(entry.fn, kwargs, groups, where, rules, signature.inputs)


class BoundKernel:
    """A kernel bound to one node: its attrs resolved, its inputs grouped, its dtype rules applied.

    `groups` (None: the args as they come) says, per kernel parameter, which of the node's data
    inputs it takes: an arg index, a (start, stop) range for a dynamic input's list, or None for an
    optional input left unfed. `call_for(specs)` is the call for inputs of those specs (grouped, see
    `..prepared`): the kernel's prepared call, or the kernel with its attrs bound; it takes the
    grouped inputs by position. The dtype rules' checks read only dtypes, so they run there, once per
    specs; widening is part of the call. `self(args)` prepares and calls (a node run on its own)."""

    __slots__ = ("fn", "kwargs", "groups", "where", "prepare", "_check", "_widen", "_plain", "_plain_widened",
                 "_identity")

    def __init__(self, fn, kwargs: dict, groups: list | None, where: str, rules=None, input_names=()):
        self.fn, self.kwargs, self.groups, self.where = fn, kwargs, groups, where
        self.prepare = prepare_of(fn)
        self._check = _dtype_check(rules, input_names) if rules is not None else None
        self._widen = rules is not None and rules.widen
        self._plain = functools.partial(fn, **kwargs) if kwargs else fn
        self._plain_widened = functools.partial(_widened(fn), **kwargs) if self._widen else None
        self._identity = groups is not None and all(isinstance(g, int) and g == i for i, g in enumerate(groups))

    def grouped(self, args: list) -> list:
        """`args` (one per data input, in GE order) as the kernel's parameters take them."""
        if self.groups is None:
            return list(args)
        if self._identity:
            return _padded(args, len(self.groups))
        return _grouped(args, self.groups)

    def call_for(self, specs: list):
        """The call for grouped inputs of these specs: `call(*grouped inputs) -> result`."""
        if self._check is not None:
            self._check(specs)
        widen = self._widen and _any_half(specs)  # without a 16-bit float input, widening changes nothing
        if self.prepare is None:
            return self._plain_widened if widen else self._plain
        if widen:
            specs = [s.widened() if isinstance(s, InputSpec) else s for s in specs]
            return _widened(self.prepare(*specs, **self.kwargs))
        return self.prepare(*specs, **self.kwargs)

    def __call__(self, args: list) -> list:
        grouped = self.grouped(args)
        return as_outputs(self.call_for(direct_specs(grouped))(*grouped), self.where)


def _bind_by_name(fn, prototype: IrPrototype, op, attrs: dict, where: str, wants_node: bool, data_count: int):
    groups = _input_groups(prototype, op, where, data_count)
    names = [p.name for p in prototype.inputs]
    named_attrs = {}
    for param in prototype.attrs:
        try:
            named_attrs[param.name] = attr_value(param.name, inspect.Parameter.empty, prototype, attrs, where)
        except GeExecutionError:
            continue  # a custom type's attr the node does not carry: the kernel decides
    if wants_node:
        named_attrs[NODE_PARAMETER] = op

    def by_name(*grouped):
        return fn(**dict(zip(names, grouped, strict=True)), **named_attrs)

    return BoundKernel(by_name, {}, groups, where)


def attr_value(name: str, kernel_default, prototype: IrPrototype | None, attrs: dict, where: str):
    if name in attrs:
        return attrs[name]
    if prototype is not None:
        try:
            default = prototype.attr_default(name)
        except KeyError:
            default = kernel_default
        if default is REQUIRED:
            raise GeExecutionError(f"{where} has no attr {name!r}, which CANN's prototype requires (REQUIRED_ATTR)")
    else:
        default = kernel_default
    if default is inspect.Parameter.empty:
        raise GeExecutionError(f"{where} has no attr {name!r} and its prototype gives no default")
    return default


def _input_groups(prototype: IrPrototype, op, where: str, data_count: int) -> list:
    """Per prototype input: the index of its arg, a (start, stop) range of a dynamic input's args,
    or None for an optional input past the end of the node's inputs."""
    names = [desc.name for desc in getattr(op, "input_desc", ())]
    if len(names) != data_count or not _named_as(prototype, names):
        names = []  # descs not named as TorchAir names them (a hand-built node): group by position
    if names:
        return _groups_by_name(prototype, names, where)
    dynamic = [p for p in prototype.inputs if p.kind is InputKind.DYNAMIC]
    fixed = len(prototype.inputs) - len(dynamic)
    groups, position = [], 0
    for param in prototype.inputs:
        if param.kind is InputKind.DYNAMIC:
            if len(dynamic) == 1:
                stop = position + max(0, data_count - fixed)
            else:
                raise GeExecutionError(f"{where}: the node's inputs have no names, so its dynamic inputs "
                                       f"{[p.name for p in dynamic]} cannot be told apart")
            groups.append((position, stop))
            position = stop
        else:
            if position >= data_count:
                if param.kind is InputKind.REQUIRED:
                    raise GeExecutionError(f"{where}: required input {param.name!r} is missing "
                                           f"(the node has {data_count} inputs)")
                groups.append(None)
            else:
                groups.append(position)
            position += 1
    if position < data_count:
        raise GeExecutionError(f"{where}: the node has {data_count} inputs but the prototype declares "
                               f"{[p.name for p in prototype.inputs]}")
    return groups


def _groups_by_name(prototype: IrPrototype, names: list[str], where: str) -> list:
    """Groups read from the descs' names, not their positions: a builder may leave an unfed optional
    input out altogether (TorchAir's `compat_ir.ge_op` does) rather than keep its slot empty."""
    at = {name: i for i, name in enumerate(names)}
    fixed_names = {p.name for p in prototype.inputs if p.kind is not InputKind.DYNAMIC}
    groups, used = [], set()
    for param in prototype.inputs:
        if param.kind is InputKind.DYNAMIC:
            members = []
            while f"{param.name}{len(members)}" in at and f"{param.name}{len(members)}" not in fixed_names:
                members.append(at[f"{param.name}{len(members)}"])
            if members and members != list(range(members[0], members[0] + len(members))):
                raise GeExecutionError(f"{where}: the inputs of dynamic input {param.name!r} are not consecutive")
            groups.append((members[0], members[0] + len(members)) if members else (0, 0))
            used.update(members)
        elif param.name in at:
            groups.append(at[param.name])
            used.add(at[param.name])
        elif param.kind is InputKind.REQUIRED:
            raise GeExecutionError(f"{where}: required input {param.name!r} is missing (the node's inputs are "
                                   f"{names})")
        else:
            groups.append(None)
    extra = [name for i, name in enumerate(names) if i not in used]
    if extra:
        raise GeExecutionError(f"{where}: the node has inputs {extra} that the prototype does not declare "
                               f"({[p.name for p in prototype.inputs]})")
    return groups


def _named_as(prototype: IrPrototype, names: list[str]) -> bool:
    """Whether the descs carry the prototype's input names (`x`, a dynamic `x0`, `x1`, ...)."""
    expected = {p.name for p in prototype.inputs if p.kind is not InputKind.DYNAMIC}
    dynamic = [p.name for p in prototype.inputs if p.kind is InputKind.DYNAMIC]
    return all(n in expected or any(n.startswith(d) and n[len(d):].isdigit() for d in dynamic) for n in names)


def _padded(args: list, count: int) -> list:
    return args if len(args) >= count else list(args) + [None] * (count - len(args))


def _grouped(args: list, groups: list) -> list:
    return [None if g is None else args[g] if isinstance(g, int) else list(args[g[0]:g[1]]) for g in groups]


def as_outputs(result, where: str) -> list:
    """A kernel's result as a list of outputs (one tensor, or a tuple of them)."""
    if isinstance(result, torch.Tensor):
        return [result]
    if isinstance(result, (list, tuple)):
        return list(result)
    raise GeExecutionError(f"GE kernel for {where} must return a tensor or a tuple of tensors, "
                           f"got {type(result).__name__}")


def _any_half(specs) -> bool:
    return any(s.dtype in HALF_PRECISION for spec in specs
               for s in (spec if isinstance(spec, list) else (spec,)) if isinstance(s, InputSpec))


def _widened(fn):
    """`fn` computing in float32 on 16-bit float inputs, its float outputs cast back to the first
    input's dtype (the `widen` rule: as NPU vector and cube units compute). Applied only where an
    input is a 16-bit float."""

    def widened(*args, **kwargs):
        first = next((a for a in args if isinstance(a, torch.Tensor)), None)
        wide = [opmath(a) if isinstance(a, torch.Tensor) else a for a in args]
        result = fn(*wide, **kwargs)
        if first is None or not first.dtype.is_floating_point:
            return result
        dtype = first.dtype
        narrow = lambda t: (t.to(dtype) if isinstance(t, torch.Tensor) and t.dtype.is_floating_point  # noqa: E731
                            and t.dtype != dtype else t)
        return narrow(result) if isinstance(result, torch.Tensor) else type(result)(narrow(t) for t in result)

    widened.__name__ = getattr(fn, "__name__", "kernel")
    return widened


@functools.lru_cache(maxsize=None)
def _dtype_check(rules, input_names: tuple[str, ...]):
    """The check of the rules `one_dtype` and `accepts` on a kernel's grouped inputs (tensors or
    specs: it reads dtypes only), or None where the rules make none. Made once per kernel (rules and
    names are frozen), not per node or per direct call."""
    index = {name: i for i, name in enumerate(input_names)}
    same = [index[ge_name(name)] for name in rules.one_dtype]
    accepts = [(index[ge_name(name)], ge_name(name), dtypes) for name, dtypes in rules.accepts]
    if not same and not accepts:
        return None

    def check(args):
        if same:
            dtypes = {args[i].dtype for i in same if i < len(args) and args[i] is not None}
            if len(dtypes) > 1:
                refuse(f"needs inputs of one dtype (GE does not promote), got "
                       f"{', '.join(sorted(str(d) for d in dtypes))}")
        for i, name, allowed in accepts:
            value = args[i] if i < len(args) else None
            if value is not None and value.dtype not in allowed:
                refuse(f"{name} has dtype {_short(value.dtype)}; the GE prototype takes "
                       f"{', '.join(_short(d) for d in allowed)}")

    return check


def _short(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


__all__ = ["BoundKernel", "KernelError", "KernelSignature", "as_outputs", "attr_value", "bind", "ge_name",
           "kernel_signature", "prototype_of", "refuse"]

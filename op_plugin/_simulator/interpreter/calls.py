"""A GE op's kernel called directly, as a graph node of that type would run it.

On an NPU an eager torch_npu op and its GE type in a graph run the same CANN kernel. The simulator
keeps that: torch_npu's eager ops (`..npu`) are adapters that map their arguments onto a GE op's
inputs and attrs and call ``ge_op("DynamicQuant")(x, smooth_scales, dst_type=2)``, which runs the
kernel registered for the type exactly as a node runs it: attrs not given take CANN's defaults from
the op's prototype, the kernel's dtype rules apply (`widen`, `one_dtype`, `accepts`), a prepared
kernel prepares for the inputs' specs. Inputs are passed as the kernel's parameters take them: a
dynamic input as a list, an optional input left unfed as None. The result is the kernel's: one
tensor, or a tuple with one per output.

`layouts` gives the input layouts a kernel reads from the node's input descs (a Conv2D in "NHWC");
unnamed inputs are "ND", as TorchAir writes when a converter sets none.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

from .binding import NODE_PARAMETER, BoundKernel, attr_value, kernel_signature, prototype_of
from .errors import GeExecutionError
from .prepared import direct_specs, index_like
from .registry import lookup_kernel


@dataclass(frozen=True)
class _Desc:
    name: str = ""
    layout: str = "ND"


@dataclass(frozen=True)
class _DirectNode:
    """The node a directly called kernel sees: its type, a name for messages, its input layouts."""

    type: str
    name: str
    input_desc: tuple = ()
    output_desc: tuple = ()
    input: tuple = ()
    attr: dict = field(default_factory=dict)


class GeOp:
    """The active kernel of one GE op type, callable as `op(*inputs, layouts=None, **attrs)`."""

    def __init__(self, op_type: str):
        entry = lookup_kernel(op_type)
        if entry is None:
            raise GeExecutionError(f"GE op type {op_type!r} has no kernel in the op_plugin simulator")
        self.op_type = op_type
        self.entry = entry
        signature = kernel_signature(entry.fn)
        if signature.var_keyword:
            raise GeExecutionError(f"the kernel of {op_type} takes its inputs by name: call it through a graph")
        self._signature = signature
        self._python_name = dict(signature.attr_parameters)
        self._prototype = prototype_of(entry, op_type)
        self._calls: dict = {}  # _call_key -> prepared call

    def __repr__(self):
        return f"ge_op({self.op_type!r})"

    def __call__(self, *inputs, layouts: dict[int, str] | None = None, **attrs):
        if len(inputs) > len(self._signature.inputs) and not self._signature.var_positional:
            raise TypeError(f"{self.op_type} takes {len(self._signature.inputs)} inputs "
                            f"{list(self._signature.inputs)}, got {len(inputs)}")
        padded = list(inputs) + [None] * (len(self._signature.inputs) - len(inputs))
        key = _call_key(attrs, layouts, padded)
        call = self._calls.get(key) if key is not None else None
        if call is None:
            call = self._bind(attrs, layouts).call_for(direct_specs(padded))
            if key is not None:
                if len(self._calls) >= _CALLS_KEPT:
                    self._calls.pop(next(iter(self._calls)))  # the oldest: a bounded cache
                self._calls[key] = call
        return call(*padded)

    def _bind(self, attrs: dict, layouts: dict[int, str] | None) -> BoundKernel:
        """The kernel bound to these attrs (CANN's defaults for the others) and input layouts."""
        where = f"{self.op_type} (called directly)"
        unknown = sorted(set(attrs) - set(self._python_name))
        if unknown:
            raise TypeError(f"{self.op_type} has no attr {', '.join(map(repr, unknown))}; its attrs are "
                            f"{sorted(self._python_name)}")
        kwargs = {self._python_name[name]: attr_value(name, default, self._prototype, attrs, where)
                  for name, default in self._signature.attrs}
        if self._signature.wants_node:
            descs = tuple(_Desc(name, (layouts or {}).get(i, "ND")) for i, name in enumerate(self._signature.inputs))
            kwargs[NODE_PARAMETER] = _DirectNode(self.op_type, where, descs)
        entry = self.entry
        return BoundKernel(entry.fn, kwargs, None, where, entry.rules if entry.rules else None,
                           self._signature.inputs)


# A direct call's prepared call is kept per (attrs, layouts, input dtypes and shapes), as a graph's plan keeps one
# per signature: the eager ops of the virtual NPU call the same few signatures again and again.
_CALLS_KEPT = 256


def _frozen(value):
    """A hashable stand-in for an attr value, or _UNKEYED (tensors and other mutable values are never keys)."""
    if isinstance(value, (bool, int, float, str, type(None), torch.dtype)):
        return value
    if isinstance(value, (list, tuple)):
        items = tuple(_frozen(item) for item in value)
        return _UNKEYED if _UNKEYED in items else (type(value).__name__, items)
    return _UNKEYED


def _input_key(value):
    if isinstance(value, torch.Tensor):
        if value.is_floating_point():  # the common case, decided without index_like's checks
            return value.dtype, value.shape
        # an index-like input's value reaches the prepare phase (direct_specs): such a call is not kept
        return _UNKEYED if index_like(value) else (value.dtype, value.shape)
    if value is None:
        return None
    if isinstance(value, (list, tuple)):
        items = tuple(_input_key(item) for item in value)
        return _UNKEYED if _UNKEYED in items else items
    return _frozen(value)


def _call_key(attrs: dict, layouts: dict | None, inputs: list):
    """The key of a direct call's prepared call, None when some input or attr cannot be part of one."""
    named = tuple((name, _frozen(value)) for name, value in sorted(attrs.items())) if attrs else ()
    given = tuple(_input_key(value) for value in inputs)
    if _UNKEYED in given or any(value is _UNKEYED for _, value in named):
        return None
    return named, tuple(sorted(layouts.items())) if layouts else (), given


_UNKEYED = object()


_ops: dict[str, GeOp] = {}


def ge_op(op_type: str) -> GeOp:
    """The kernel of `op_type` as a directly callable GE op: the active kernel (a replaced built-in
    runs its replacement, as a graph would)."""
    if not _ops:
        # The built-in kernels register when their package is imported; torch_npu's eager ops need them
        # only when first called, so `import op_plugin` loads none.
        from . import kernels  # noqa: F401
    op = _ops.get(op_type)
    if op is None or op.entry is not lookup_kernel(op_type):
        op = _ops[op_type] = GeOp(op_type)
    return op


__all__ = ["GeOp", "ge_op"]

"""TorchAir converters generated from a YAML `ge:` mapping, and the one for an op without it."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .._base.errors import OpPluginError, option_fix
from .._ge.ir import AttrType
from .._registry.binding import bind
from .._spec.ge_prototype import ge_outputs
from .._spec.model import OpSpec


def generated_converter(spec: OpSpec, torchair: Any) -> Callable:
    """A converter emitting `torchair.ge.custom_op(type, inputs, outputs, attrs)` with typed attrs."""
    ge = torchair.ge
    attr_types = ge.attr._ATTR_TYPE_MAP
    to_ge_dtype = torchair.ge._ge_graph.torch_type_to_ge_type
    outputs = ge_outputs(spec)
    n_returns = len(spec.schema.returns)
    mapped = {a.arg for a in spec.ge.attrs} | {i.arg for i in spec.ge.inputs}
    unmapped = {a.name: a.default_value for a in spec.schema.torch_schema.arguments if a.name not in mapped}

    def convert(*args, **kwargs):
        _, _, bound = bind(spec, args, kwargs)
        _check_unmapped_defaults(spec, bound, unmapped)
        inputs = {i.ge_name: bound.get(i.arg) for i in spec.ge.inputs}
        attrs = {}
        for a in spec.ge.attrs:
            value = a.value(bound)
            if a.value_type is AttrType.DATA_TYPE:
                value = to_ge_dtype(value)
            attrs[a.ge_name] = attr_types[a.value_type.value](value)
        result = ge.custom_op(spec.ge.type, inputs=inputs, outputs=outputs, attrs=attrs)
        results = list(result) if isinstance(result, (list, tuple)) else [result]
        # ref outputs of mutated-but-not-returned inputs are in the IR, not in the FX node's result
        results = results[:n_returns]
        if n_returns == 0:
            return None   # as the op's kernel does; auto_functionalized_v2 then yields (None, *bases)
        return results[0] if n_returns == 1 else tuple(results)

    convert.__name__ = f"convert_{spec.name}"
    convert.__qualname__ = convert.__name__
    return convert


def _check_unmapped_defaults(spec: OpSpec, bound: dict, unmapped: dict) -> None:
    """An argument with no GE attr cannot reach the GE op: only its default value is allowed."""
    for name, default in unmapped.items():
        value = bound[name]
        same = (list(value) == list(default) if isinstance(value, (list, tuple)) and default is not None
                else value == default)
        if not same:
            raise OpPluginError(f"{spec.field('ge.attrs')}: {spec.qualname} is called with {name}={value!r}, but "
                                f"'{name}' is not mapped to a GE attr, so the GE graph could only compute with its "
                                f"default {default!r}; map it in `ge.attrs`")


def missing_mapping_converter(spec: OpSpec) -> Callable:
    """A converter that says what to add, for an op with neither `ge:` nor @op_plugin.converter."""
    def convert(*args, **kwargs):
        aclgraph = option_fix("mode", "aclgraph")   # as the user gives options; None where the tool lacks it
        raise OpPluginError(f"{spec.field('ge')}: {spec.qualname} has no GE mapping; add `ge:` to its YAML "
                            f"entry or @op_plugin.converter('{spec.qualname}')"
                            + (f", or compile with {aclgraph}, which needs only the Meta function" if aclgraph else ""))

    return convert

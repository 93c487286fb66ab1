"""A YAML `ge:` mapping checked against the prototype of the built-in GE op it names."""
from __future__ import annotations

from .._base.errors import OpPluginError
from .._ge.ir import InputKind, IrPrototype
from .._spec.model import OpSpec


def check_against_builtin(spec: OpSpec, builtin: IrPrototype) -> None:
    """A mapping onto a built-in op must use its real input, attr and output names and kinds."""
    where = spec.field("ge")
    real_inputs, real_attrs = builtin.input_kinds(), builtin.attr_types()
    real_outputs = [p.name for p in builtin.outputs]
    for i in spec.ge.inputs:
        if real_inputs.get(i.ge_name) != InputKind(i.kind):
            raise OpPluginError(f"{where}: built-in {spec.ge.type} has inputs {_plain(builtin.inputs)}; "
                                f"'{i.ge_name}' ({i.kind.value}) does not match")
    for a in spec.ge.attrs:
        if real_attrs.get(a.ge_name) != a.value_type:
            raise OpPluginError(f"{where}: built-in {spec.ge.type} has attrs {_plain(builtin.attrs)}; "
                                f"'{a.ge_name}' ({a.value_type.value}) does not match")
    if list(spec.ge.outputs) != real_outputs[: len(spec.ge.outputs)]:
        raise OpPluginError(f"{where}: built-in {spec.ge.type} has outputs {real_outputs}, not {list(spec.ge.outputs)}")


def _plain(params) -> list[tuple[str, str]]:
    return [(p.name, p.kind.value) for p in params]

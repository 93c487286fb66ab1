"""What a YAML `ge:` mapping means in GE IR terms, independent of any host."""
from __future__ import annotations

from .._base.errors import OpPluginError
from .._ge.ir import InputKind, IrPrototype, OutputKind
from .._spec.model import OpSpec


def ge_outputs(spec: OpSpec) -> list[str]:
    """The GE output names: the returns, then a ref output for each mutated input not returned."""
    names = list(spec.ge.outputs)
    returned = {spec.schema.aliased_arg(r).name for r in spec.schema.returns if r.alias_set}
    for arg in spec.schema.args:
        if arg.mutated and arg.name not in returned:
            names.append(next(i.ge_name for i in spec.ge.inputs if i.arg == arg.name))
    return names


def ir_prototype(spec: OpSpec) -> IrPrototype:
    """The IR prototype a YAML op declares for its (custom) GE type."""
    refs = set(ge_outputs(spec)) - set(spec.ge.outputs)
    return IrPrototype(
        spec.ge.type,
        inputs=tuple((i.ge_name, i.kind) for i in spec.ge.inputs),
        outputs=tuple((name, OutputKind.REQUIRED) for name in list(spec.ge.outputs) + sorted(refs)),
        attrs=tuple((a.ge_name, a.value_type) for a in spec.ge.attrs),
    )


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

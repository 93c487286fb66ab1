"""Every built-in GE kernel's signature matches its op's REG_OP prototype, statically.

Inputs are the positional parameters, by name and in order; every attr is a keyword-only
parameter without a default (the binder supplies CANN's), or declared layout-only with a reason.
An attr the kernel forgot to take, a renamed input, or a default copied by hand fails here, before
any graph runs. The prototype comes from the pinned wheel, not from the kernel.
"""
import inspect

import pytest

from op_plugin._ge.builtin_prototypes import builtin_prototype
from op_plugin._simulator.interpreter.binding import kernel_signature, prototype_of
from op_plugin._simulator.interpreter.kernels import builtin_entries

ENTRIES = builtin_entries()


def signature_problems(entry, op_type) -> list[str]:
    prototype = prototype_of(entry, op_type)
    if prototype is None:
        return [f"{op_type} has no prototype: CANN's table does not name it and the kernel declares none"]
    signature = kernel_signature(entry.fn)
    problems = []
    inputs = [p.name for p in prototype.inputs]
    if list(signature.inputs) != inputs:
        problems.append(f"inputs {list(signature.inputs)} != prototype inputs {inputs}")
    attrs = {p.name for p in prototype.attrs}
    taken = {name for name, _ in signature.attrs}
    layout_only = dict(entry.layout_only)
    for name in sorted(attrs - taken - set(layout_only)):
        problems.append(f"attr {name!r} is neither a parameter nor declared layout-only")
    for name in sorted(taken - attrs):
        problems.append(f"parameter {name!r} is not an attr of the prototype")
    for name in sorted(taken & set(layout_only)):
        problems.append(f"attr {name!r} is both a parameter and declared layout-only")
    for name in sorted(set(layout_only) - attrs):
        problems.append(f"layout-only {name!r} is not an attr of the prototype")
    for name, reason in layout_only.items():
        if not reason.strip():
            problems.append(f"layout-only {name!r} has no reason")
    for name, default in signature.attrs:
        if default is not inspect.Parameter.empty and name in attrs:
            problems.append(f"attr {name!r} has a default in the kernel; the prototype's is used")
    if signature.var_positional or signature.var_keyword:
        problems.append("a built-in kernel takes named inputs, not *args/**kwargs")
    return problems


@pytest.mark.parametrize("op_type", sorted(ENTRIES))
def test_kernel_signature_matches_prototype(op_type):
    assert signature_problems(ENTRIES[op_type], op_type) == []


def test_a_forgotten_attr_is_caught():
    """The bug class: a kernel ignoring an attr (Log once ignored base/scale/shift)."""
    from op_plugin._simulator.interpreter.registry import KernelEntry

    def log_ignoring_attrs(x):
        return x.log()

    problems = signature_problems(KernelEntry("Log", log_ignoring_attrs, builtin=True), "Log")
    assert any("'base'" in p for p in problems) and any("'scale'" in p for p in problems)


def test_a_hand_copied_default_is_caught():
    from op_plugin._simulator.interpreter.registry import KernelEntry

    def swish(x, *, scale=1.0):
        return x

    assert builtin_prototype("Swish") is not None
    assert signature_problems(KernelEntry("Swish", swish, builtin=True), "Swish") == [
        "attr 'scale' has a default in the kernel; the prototype's is used"]


def test_builtin_prototypes_parsed_per_type_equal_the_whole_table_parsed_at_once():
    """`builtin_prototype(type)` parses one REG_OP text when asked: the same prototypes as parsing each file whole,
    the first file naming a type winning (the oracle: parse_reg_ops over the files, as before)."""
    from op_plugin._base.wheel import simulator_dir
    from op_plugin._ge import builtin_prototypes as shipped
    from op_plugin._ge.reg_op import parse_dtype_enum, parse_reg_ops

    folder = simulator_dir()
    numbers = parse_dtype_enum((folder / shipped.DTYPE_HEADER).read_text(encoding="utf-8"))
    whole: dict = {}
    for name in shipped.PROTOTYPE_FILES:
        for op_type, prototype in parse_reg_ops((folder / name).read_text(encoding="utf-8"), numbers).items():
            whole.setdefault(op_type, prototype)
    assert shipped.builtin_prototypes() == whole and len(whole) > 1000
    assert builtin_prototype("MatMulV2") == whole["MatMulV2"] and builtin_prototype("NoSuchOp") is None

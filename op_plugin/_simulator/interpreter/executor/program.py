"""A verified signature's call as straight-line Python: one generated function per plan and signature.

Once an input signature has passed every node check (`plan.GraphPlan`), a call with that signature
only has to run the unfolded kernels in order. The generated `program(inputs)` names every value as
a local variable: each graph input read straight from `inputs` (converted as the signature says:
a Python scalar to a tensor, a one-element array fed to a scalar Data node to 0-d), each Const and
each folded node's output bound once in the function's globals, and each kernel call written out
with its arguments (a dynamic input's list as a list display, an unfed optional as None, each attr
as a keyword bound once), so a node costs one Python call plus a type test of its result. Where
the signature's first call found a fast call for a node (`..fast_calls`: the bare aten call the
kernel makes on that path, verified bit for bit against the kernel on that call), the program calls
that instead of the kernel. It returns the values NetOutput reads.

What it does is what `GraphPlan._run_checked` does, step for step: the same kernels (or their
verified fast calls) with the same arguments in the same order, ref ops writing the caller's
tensors at the same point, values dropped after their last reader, and a failing kernel named by its
node. The dtype checks of a kernel's declared dtype rules are left out (`BoundKernel.unchecked`):
they read only input dtypes, which the verified signature fixes, and they ran on its first call.
"""
from __future__ import annotations

import keyword

import torch

from ..binding import BoundKernel, as_outputs
from ..errors import GeExecutionError

_HEADER = "def program(inputs):\n"


def build_program(plan, inputs: list, folded_values: dict, fast: dict | None = None):
    """`program(inputs) -> list`: `plan`'s unfolded kernel steps on graph inputs of the signature of
    `inputs`, with `folded_values` (slot -> value) for that signature and `fast` (step -> fast call)."""
    steps = plan._unfolded_steps
    fast = fast or {}
    namespace = {"_Tensor": torch.Tensor, "_as_outputs": as_outputs, "_GeExecutionError": GeExecutionError,
                 "_fail": _failure(steps), "_write": plan._write_inputs, "_tensor": torch.tensor}
    fixed = {slot: value for slot, value in enumerate(plan._template) if value is not None}
    fixed.update(folded_values)
    for slot, value in fixed.items():
        namespace[f"c{slot}"] = value
    lines = [f"    v{data.slot} = {_data_read(data, inputs[data.index])}" for data in plan._data_inputs
             if data.slot is not None]
    lines.append("    n = -1")
    lines.append("    try:")
    for position, step in enumerate(steps):
        lines.extend("        " + line for line in _step_lines(position, step, namespace, fixed, fast.get(step)))
    if not steps:  # every node folded, or the outputs are inputs and constants
        lines.append("        pass")
    lines.append("    except _GeExecutionError:")
    lines.append("        raise")
    lines.append("    except Exception as error:")
    lines.append("        raise _fail(n, error) from error")
    lines.append(f"    return [{', '.join(_read(slot, fixed) for slot in plan._output_step.arg_slots)}]")
    source = _HEADER + "\n".join(lines) + "\n"
    code = compile(source, f"<GE program of graph {plan.name!r}>", "exec")
    exec(code, namespace)  # noqa: S102  (source generated above from the plan's slots)
    program = namespace["program"]
    program.source = source
    program.fast_nodes = sum(1 for step in steps if step in fast)
    return program


def _data_read(data, example) -> str:
    """How the program reads graph input `data.index`, given the input of this signature's first call."""
    if not isinstance(example, torch.Tensor):
        return f"_tensor(inputs[{data.index}])"  # a Python scalar for a symbolic size
    if data.scalar and example.shape == (1,):
        # TorchAir's generated input code feeds a SymInt as `numpy.array([v])` to a Data declared as a
        # scalar (its `_ValueInput.__call__` gives the 0-d value): same value.
        return f"inputs[{data.index}].reshape(())"
    return f"inputs[{data.index}]"


def _read(slot: int, fixed: dict) -> str:
    if slot == 0:
        return "None"
    return f"c{slot}" if slot in fixed else f"v{slot}"


def _step_lines(position: int, step, namespace: dict, fixed: dict, fast) -> list[str]:
    kernel = step.kernel
    name = f"k{position}"
    args = [_read(slot, fixed) for slot in step.arg_slots]
    lines = [f"n = {position}"]
    if fast is not None:
        namespace[name] = fast
        lines.append(f"r = {name}({', '.join(grouped_args(args, kernel.groups))})")
        namespace[f"w{position}"] = kernel.where
        convert = f"_as_outputs(r, w{position})"
    elif isinstance(kernel, BoundKernel) and _plain_keywords(kernel.kwargs):
        namespace[name] = kernel.unchecked
        call_args = grouped_args(args, kernel.groups)
        for key, value in kernel.kwargs.items():
            namespace[f"a{position}_{key}"] = value
            call_args.append(f"{key}=a{position}_{key}")
        lines.append(f"r = {name}({', '.join(call_args)})")
        namespace[f"w{position}"] = kernel.where
        convert = f"_as_outputs(r, w{position})"
    else:  # bound by name (**named inputs) or a kernel set by hand: its own call(args) -> list
        namespace[name] = kernel
        lines.append(f"r = {name}([{', '.join(args)}])")
        convert = "r"
    outs = step.out_slots
    if step.writes_inputs:
        namespace[f"s{position}"] = step
        lines.append(f"r = {convert}")
        lines.append(f"_write(s{position}, r, inputs)")
        lines.extend(f"v{slot} = r[{index}]" for index, slot in outs)
    elif len(outs) == 1 and outs[0][0] == 0 and convert != "r":
        lines.append(f"v{outs[0][1]} = r if r.__class__ is _Tensor else {convert}[0]")
    elif outs:
        lines.append(f"r = {convert}")
        lines.extend(f"v{slot} = r[{index}]" for index, slot in outs)
    lines.extend(f"v{slot} = None" for slot in step.free_after if slot not in fixed)
    return lines


def grouped_args(args: list, groups, *, names: bool = True) -> list:
    """`args` (one per data input, in GE order) as the kernel's parameters take them: `groups` is
    `BoundKernel.groups` (None: as they come). `names`: args are the program's variable names (a
    dynamic input becomes a list display), else values (a list)."""
    if groups is None:
        return list(args)
    none = "None" if names else None
    out = []
    for group in groups:
        if group is None:
            out.append(none)
        elif isinstance(group, int):
            out.append(args[group] if group < len(args) else none)
        elif names:
            out.append("[" + ", ".join(args[group[0]:group[1]]) + "]")
        else:
            out.append(list(args[group[0]:group[1]]))
    return out


def _plain_keywords(kwargs: dict) -> bool:
    return all(key.isidentifier() and not keyword.iskeyword(key) for key in kwargs)


def _failure(steps):
    from .plan import kernel_failure  # pylint: disable=import-outside-toplevel

    def fail(position: int, error: Exception) -> GeExecutionError:
        if position < 0:
            return GeExecutionError(f"GE program failed before its first node: {error}")
        return kernel_failure(steps[position].op, error)

    return fail

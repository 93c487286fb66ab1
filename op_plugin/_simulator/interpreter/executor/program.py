"""A plan's verified call as straight-line Python: one generated function per plan.

Once an input signature has passed every node check (`plan.GraphPlan`), a call with that signature
only has to run the unfolded kernels in order. Walking `_Step` objects does that with a list built
per node, a bound-kernel call that regroups its args and unpacks a kwargs dict, and loops over the
output and free slots. The generated function instead names every value as a local variable and
writes each kernel call out with its arguments (a dynamic input's list as a list display, an unfed
optional as None, each attr as a keyword bound once in the function's globals), so a node costs
one Python call plus a type test of its result.

What it does is what `GraphPlan._run_verified` did, step for step: the same kernels with the same
arguments in the same order, ref ops writing the caller's tensors at the same point, values dropped
after their last reader, and a failing kernel named by its node. The dtype checks of a kernel's
declared dtype rules are left out (`BoundKernel.unchecked`): they read only input dtypes, which the
verified signature fixes, and they ran on that signature's first (checked) call.
"""
from __future__ import annotations

import keyword

import torch

from ..binding import BoundKernel, as_outputs
from ..errors import GeExecutionError

_HEADER = "def program(values, inputs):\n"


def build_program(plan):
    """`program(values, inputs)`: runs `plan`'s unfolded kernel steps on a value list whose Data,
    Const and folded slots are filled, and stores the values NetOutput reads back into it."""
    steps = plan._unfolded_steps
    namespace = {"_Tensor": torch.Tensor, "_as_outputs": as_outputs, "_GeExecutionError": GeExecutionError,
                 "_fail": _failure(steps), "_write": plan._write_inputs}
    produced = {slot for step in steps for _, slot in step.out_slots}
    read = sorted({slot for step in steps for slot in step.arg_slots if slot != 0} - produced)
    lines = [f"    v{slot} = values[{slot}]" for slot in read]
    lines.append("    n = -1")
    lines.append("    try:")
    for position, step in enumerate(steps):
        lines.extend("        " + line for line in _step_lines(position, step, namespace))
    if not steps:  # every node folded, or the outputs are inputs and constants
        lines.append("        pass")
    lines.append("    except _GeExecutionError:")
    lines.append("        raise")
    lines.append("    except Exception as error:")
    lines.append("        raise _fail(n, error) from error")
    returned = sorted({slot for slot in plan._output_step.arg_slots} & produced)
    lines.extend(f"    values[{slot}] = v{slot}" for slot in returned)
    lines.append("    return values")
    source = _HEADER + "\n".join(lines) + "\n"
    code = compile(source, f"<GE program of graph {plan.name!r}>", "exec")
    exec(code, namespace)  # noqa: S102  (source generated above from the plan's slots)
    program = namespace["program"]
    program.source = source
    return program


def _step_lines(position: int, step, namespace: dict) -> list[str]:
    kernel = step.kernel
    name = f"k{position}"
    args = [f"v{slot}" if slot != 0 else "None" for slot in step.arg_slots]
    lines = [f"n = {position}"]
    if isinstance(kernel, BoundKernel) and _plain_keywords(kernel.kwargs):
        namespace[name] = kernel.unchecked
        call_args = _grouped_args(args, kernel.groups)
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
    lines.extend(f"v{slot} = None" for slot in step.free_after)
    return lines


def _grouped_args(args: list[str], groups) -> list[str]:
    if groups is None:
        return list(args)
    out = []
    for group in groups:
        if group is None:
            out.append("None")
        elif isinstance(group, int):
            out.append(args[group] if group < len(args) else "None")
        else:
            out.append("[" + ", ".join(args[group[0]:group[1]]) + "]")
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

"""A verified signature's call as straight-line Python: the nodes' prepared calls strung together.

Once an input signature has passed every node check (`plan.GraphPlan`), a call with that signature
only has to run the unfolded nodes' calls in order: each node's call is the one its kernel was
prepared with on the signature's first, checked call (`..prepared`; a kernel without a prepare phase:
the kernel with its attrs bound), so the checked call and every later one run the same code.

Why generated source and not a loop over the steps: a loop reads each node's arguments out of a value
list and back, which costs about a microsecond per node, as much as a small kernel itself (a BERT
layer is hundreds of nodes). The generated `program(inputs)` names every value as a local variable
and writes out each call with its arguments. The source holds no kernel logic and no text from a
user's YAML or graph: only generated names (`v<slot>` values, `c<slot>` fixed values, `k<n>` calls,
`w<n>` node names, `s<n>` steps, `a<n>` a collective's agreement), list displays of them and integer
indices; every object it uses (calls, constants, node names for messages) is bound in its namespace,
never written into the text.

Each graph input is read straight from `inputs` (converted as the signature says: a Python scalar to
a tensor, a one-element array fed to a scalar Data node to 0-d), each Const and each folded node's
output is bound once, a dynamic input's list is a list display, an unfed optional input None. It
returns the values NetOutput reads. What it does is what `GraphPlan._run_checked` does, step for step:
the same calls with the same arguments in the same order (an element-wise call may write into an operand
the program drops at that node: `donation`, the same bits), each collective's agreement before its call,
ref ops writing the caller's tensors at the same point, values dropped after their last reader, a
failing call named by its node, a user's kernel that reads a Const or folded value checked for writing
it (`GraphPlan.guarded`). The per-node output checks are left out: they read dtypes and shapes, which
the verified signature fixes (so is the write check of built-in kernels, made on a signature's first call).
"""
from __future__ import annotations

import functools

import torch

from .. import collectives
from . import donation
from ..binding import as_outputs
from ..errors import GeExecutionError
from .checks import kernel_failure

_HEADER = "def program(inputs):\n"


def build_program(plan, inputs: list, folded_values: dict, calls: dict, donated: dict | None = None):
    """`program(inputs) -> list`: `plan`'s unfolded steps on graph inputs of the signature of `inputs`,
    with `folded_values` (slot -> value) and `calls` (step -> its prepared call) for that signature;
    `donated` (step -> operand position, `donation.choose`): the calls that write into an operand."""
    donated = donated or {}
    steps = plan.unfolded_steps
    namespace = {"_Tensor": torch.Tensor, "_as_outputs": as_outputs, "_GeExecutionError": GeExecutionError,
                 "_fail": _failure(steps), "_write": plan.write_inputs, "_tensor": torch.tensor}
    fixed = plan.fixed_values(folded_values)
    for slot, value in fixed.items():
        namespace[f"c{slot}"] = value
    lines = [f"    v{data.slot} = {_data_read(data, inputs[data.index])}" for data in plan.data_inputs
             if data.slot is not None]
    lines.append("    n = -1")
    lines.append("    try:")
    for position, step in enumerate(steps):
        call = calls[step] if step not in donated else donation.donating_call(calls[step], donated[step])
        lines.extend("        " + line for line in _step_lines(position, step, call, namespace, fixed, plan))
    if not steps:  # every node folded, or the outputs are inputs and constants
        lines.append("        pass")
    lines.append("    except _GeExecutionError:")
    lines.append("        raise")
    lines.append("    except Exception as error:")
    lines.append("        raise _fail(n, error) from error")
    lines.append(f"    return [{', '.join(_read(slot, fixed) for slot in plan.output_slots)}]")
    source = _HEADER + "\n".join(lines) + "\n"
    code = compile(source, "<GE program>", "exec")
    exec(code, namespace)  # generated names only: see the module doc
    program = namespace["program"]
    program.source = source
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


def _step_lines(position: int, step, call, namespace: dict, fixed: dict, plan) -> list[str]:
    kernel = step.kernel
    if step.guard_every_call:  # a user's kernel reading a Const or folded value: checked for writing it, every call
        call = plan.guarded(step, call, [fixed[step.arg_slots[index]] for index, _ in step.kept_args])
    namespace[f"k{position}"] = call
    namespace[f"w{position}"] = kernel.where
    flat = [_read(slot, fixed) for slot in step.arg_slots]
    args = kernel.grouped(flat)
    shown = ["None" if arg is None else "[" + ", ".join(arg) + "]" if isinstance(arg, list) else arg for arg in args]
    lines = [f"n = {position}"]
    if step.collective:  # its group's ranks agree on every call, as on the checked first one
        namespace[f"a{position}"] = functools.partial(collectives.agree, step.op, step.attrs)
        lines.append(f"a{position}([{', '.join(flat)}])")
    call_text = f"k{position}({', '.join(shown)})"
    outs = step.out_slots
    if len(outs) == 1 and outs[0][0] == 0 and not step.writes_inputs:
        # straight into its value: no name holds a node's result once its last reader has run
        value = f"v{outs[0][1]}"
        lines.append(f"{value} = {call_text}")
        lines.append(f"if {value}.__class__ is not _Tensor:")
        lines.append(f"    {value} = _as_outputs({value}, w{position})[0]")
    elif not outs and not step.writes_inputs:
        lines.append(call_text)  # no node reads its outputs: dropped at once
    else:
        lines.append(f"r = _as_outputs({call_text}, w{position})")
        if step.writes_inputs:
            namespace[f"s{position}"] = step
            lines.append(f"_write(s{position}, r, inputs)")
        lines.extend(f"v{slot} = r[{index}]" for index, slot in outs)
        lines.append("r = None")  # outputs no node reads are freed now, not at the next multi-output node
    lines.extend(f"v{slot} = None" for slot in step.free_after if slot not in fixed)
    return lines


def _failure(steps):
    def fail(position: int, error: Exception) -> GeExecutionError:
        if position < 0:
            return GeExecutionError(f"GE program failed before its first node: {error}")
        return kernel_failure(steps[position].op, error)

    return fail

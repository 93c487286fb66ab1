"""Element-wise results written into the buffer of an operand the program drops at that very node.

GE gives every output a buffer of its own, and so does each kernel here: `torch.add(x1, x2)` allocates its
result. When the node is the last reader of x1, x1's buffer is free the moment the node has run, and
`torch.add(x1, x2, out=x1)` computes the same bits (the same element-wise kernel, each element read before
it is written) without the allocation, which for a tensor of a few hundred KiB costs about as much as the
addition itself (fresh pages). This is what GE's own memory planner does on an NPU: a dead input's
buffer is reused by a later output.

Decided per verified signature, for the generated program only (`program.build_program`; a signature's first,
checked call and every observed call allocate as before), when:

* the node's prepared call is an out-of-place element-wise torch function with an `out=` form (`DONATING`),
  and on the signature's first call the operand had the output's shape and dtype (`candidates`);
* the operand's value is exclusively the program's (`choose`): produced in this call by a built-in kernel that
  always returns a new buffer (a GEMM, a `DONATING` call, or a product with a fixed one passing on such a
  buffer), read by no kernel that could have returned a view of it, not a graph input, Const, folded value or
  graph output, and dropped at this node;
* the plan lets views through (no node writes into a graph input: `_views_allowed`);
* on every call, both operands are dense and autograd is not recording the call (`donating_call`); otherwise
  the call allocates as before.
"""
from __future__ import annotations

import collections

import torch

# Out-of-place element-wise calls and their out= forms.
DONATING = {fn: fn for fn in (torch.add, torch.sub, torch.mul, torch.div, torch.maximum, torch.minimum)}
# GE types whose built-in kernels always return a new buffer.
FRESH_TYPES = frozenset({"MatMul", "MatMulV2", "MatMulV3", "BatchMatMul", "BatchMatMulV2", "BatchMatMulV3"})
grad_enabled = torch.is_grad_enabled


def _donates(call) -> bool:
    try:
        return call in DONATING
    except TypeError:  # an unhashable callable object: not one of them
        return False


def candidates(call, args: list, outputs) -> tuple:
    """On a signature's first call: the positions of the operands of `call` whose buffer could hold its
    output (same shape and dtype), if `call` is in `DONATING`."""
    if not _donates(call) or len(outputs) != 1 or len(args) != 2:
        return ()
    out = outputs[0]
    return tuple(position for position, arg in enumerate(args)
                 if isinstance(arg, torch.Tensor) and arg.shape == out.shape and arg.dtype == out.dtype)


def choose(plan, calls: dict, positions: dict) -> dict:
    """step -> the operand position its program call writes into (see the module doc); `positions`: each
    step's `candidates` on the signature's first call."""
    if not plan._views_allowed or not positions:
        return {}
    steps = plan.unfolded_steps
    readers = collections.defaultdict(list)
    for step in steps:
        for slot in step.arg_slots:
            readers[slot].append(step)

    def fresh_buffer(step) -> bool:  # its kernel never returns a view of an input
        return step.builtin and not step.strided_output and (step.op.type in FRESH_TYPES or _donates(calls[step]))

    def dies_unshared(step, slot) -> bool:  # `slot` is exclusively the program's and `step` its last reader
        return (slot in exclusive and slot in step.free_after and step.arg_slots.count(slot) == 1
                and all(reader is step or fresh_buffer(reader) for reader in readers[slot]))

    exclusive, chosen = set(), {}
    for step in steps:
        if len(step.out_slots) != 1 or step.out_slots[0][0] != 0 or step.collective:
            continue
        for position in positions.get(step, ()):
            if dies_unshared(step, step.arg_slots[position]):
                chosen[step] = position
                break
        identity = getattr(calls[step], "identity_of", None)
        if fresh_buffer(step) or (identity is not None and step.builtin
                                  and dies_unshared(step, step.arg_slots[identity])):
            exclusive.add(step.out_slots[0][1])
    return chosen


def donating_call(call, position: int):
    """`call` writing its result into operand `position` when both operands are dense and autograd does not
    record the call (an out= call refuses operands that require grad while grad mode is on)."""
    fn = DONATING[call]

    def into_operand(x1, x2):
        if x1.is_contiguous() and x2.is_contiguous() and not (
                (x1.requires_grad or x2.requires_grad) and grad_enabled()):
            return fn(x1, x2, out=x2 if position else x1)
        return fn(x1, x2)

    into_operand.donates = position
    return into_operand


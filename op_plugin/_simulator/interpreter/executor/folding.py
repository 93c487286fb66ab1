"""Which GE nodes a plan can compute once per input signature instead of on every call.

A node's outputs are fixed by the signature (`verified.input_signature`: input dtypes and shapes, and the
values of small integer inputs) when it reads a shape (Shape, Size, Rank), or when every data input
it reads is a Const, a small integer Data input (a symbolic size), or the output of another such
node, and its kernel is a pure built-in:
shape arithmetic (Shape/Pack/Range/Fill of sizes), Const reshapes and casts, masks built from
sizes. TorchAir's dynamic-shape graphs are full of them (86 Pack nodes in a small BERT layer).

Excluded: random kernels (they take the RNG state as inputs and must run each time), collectives
(HcomAllReduce & co. talk to the other ranks: run on one rank only, they would leave its peers
waiting), custom GE types (their reference kernels are the user's code), and any node whose output
a ref op (an op that writes into one of its inputs) reads, since a cached value must never be
written to.
"""
from __future__ import annotations

import math

from ..collectives import COLLECTIVE_TYPES

_RANDOM_TYPES = frozenset({"StatelessRandomUniformV2", "StatelessRandomNormalV2", "StatelessBernoulli",
                           "StatelessDropOutGenMask", "DropOutDoMask", "StatelessRandperm",
                           "MultinomialWithReplacement"})
# Their outputs are their inputs' shapes, which the signature fixes (the plan folds nothing in a
# graph whose shapes depend on data: it checks every call instead).
_SHAPE_OF_TYPES = frozenset({"Shape", "ShapeN", "Size", "Rank"})
# ge_ir.proto DataType numbers of the integer and bool dtypes (TensorDescriptor.dtype)
_PROTO_INTEGER = frozenset({3, 4, 5, 6, 7, 8, 9, 10, 11})


def small_integer_data(desc, limit: int) -> bool:
    """A Data desc with an integer dtype and a fixed shape of at most `limit` elements: its value
    is part of the input signature."""
    if desc is None or desc.dtype not in _PROTO_INTEGER or not desc.HasField("shape"):
        return False
    dims = list(desc.shape.dim)
    return all(d >= 0 for d in dims) and math.prod(dims) <= limit


def foldable_steps(steps, small_data_slots: set[int]) -> set[int]:
    """Positions (in `steps`) of the kernel steps whose outputs the signature fixes."""
    fixed_slots = set(small_data_slots)
    for step in steps:
        if step.const is not None:
            fixed_slots.update(slot for _, slot in step.out_slots)
    written_by_ref_ops = set()
    for step in steps:
        if step.kernel is not None and is_ref_op(step.op):
            written_by_ref_ops.update(step.arg_slots)
    folded = set()
    for position, step in enumerate(steps):
        kernel = step.kernel
        if kernel is None or step.op.type in _RANDOM_TYPES or step.op.type in COLLECTIVE_TYPES:
            continue
        if not step.builtin:
            continue
        slots = [slot for slot in step.arg_slots if slot != 0]
        outs = [slot for _, slot in step.out_slots]
        fixed = step.op.type in _SHAPE_OF_TYPES or (slots and all(slot in fixed_slots for slot in slots))
        if fixed and not any(slot in written_by_ref_ops for slot in outs):
            folded.add(position)
            fixed_slots.update(outs)
    return folded


def is_ref_op(op) -> bool:
    """GE's in-place ops ("ref" ops) name an output like the input they write into."""
    inputs = {desc.name for desc in op.input_desc if desc.name}
    return any(desc.name in inputs for desc in op.output_desc)

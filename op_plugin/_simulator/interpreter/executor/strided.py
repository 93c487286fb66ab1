"""Transposes left as strided views where only kernels that compute the same bits on one read them.

GE hands every op a dense buffer, so a Transpose copies. On the CPU that copy is only needed for what can
tell a view from a copy: a graph output, a user's kernel (a reference kernel written for an NPU, which never
sees a strided buffer), and a built-in kernel whose arithmetic depends on the layout (a GEMM: MKL sums a
transposed operand in another order for some shapes, docs/performance-notes.md). A built-in kernel that
declares an input `strided_inputs` (`..registry`) computes the same bits on a strided view as on a dense copy
and returns dense outputs; a Transpose whose every reader declares so runs its `strided_view` form (a
`permute` without the copy). Decided once per plan, when no node writes into an input (the plan's
`_views_allowed`, as for Reshape's views), never for a folded node or a view of a value the plan keeps.
A signature's first call checks the declaration: a kernel handed a strided input must return dense outputs.
"""
from __future__ import annotations

import collections
import dataclasses

import torch

from ..binding import bind, kernel_signature
from .checks import GeExecutionError


def strided_positions(entry, kernel) -> frozenset:
    """The data-input positions of a node whose built-in kernel `entry` (bound as `kernel`) declares
    `strided_inputs`; empty for a user's kernel."""
    if not entry.builtin or not entry.strided_inputs:
        return frozenset()
    groups = kernel.groups
    positions = set()
    for index, name in enumerate(kernel_signature(entry.fn).inputs):
        group = index if groups is None else groups[index] if index < len(groups) else None
        if name in entry.strided_inputs and isinstance(group, int):  # a dynamic input's list: not declared
            positions.add(group)
    return frozenset(positions)


def view_kernel(entry, op, attrs):
    """The node's kernel in its strided-view form (bound like the kernel), or None."""
    if not entry.builtin or entry.strided_view is None:
        return None
    return bind(dataclasses.replace(entry, fn=entry.strided_view), op, attrs)


def choose_views(steps: list, views_allowed: bool) -> list:
    """Of a plan's `steps` (all of them, NetOutput included), those with a `view_kernel` whose outputs only
    kernels declaring those inputs strided read: not NetOutput, not a user's kernel, not a folded node."""
    if not views_allowed:
        return []
    readers = collections.defaultdict(list)
    for step in steps:
        for position, slot in enumerate(step.arg_slots):
            readers[slot].append((step, position))
    return [step for step in steps
            if step.view_kernel is not None and not step.folded and not step.writes_inputs
            # the view's base is its strided input (Transpose's x): never a Const or folded value the plan keeps
            and not any(index in step.strided_args for index, _ in step.kept_args)
            and all(reader.kernel is not None and not reader.folded and position in reader.strided_args
                    for _, slot in step.out_slots for reader, position in readers[slot])]


def check_dense(step, args: list, outputs: list) -> None:
    """On a signature's first call: a kernel that declares strided inputs and got one returned dense outputs."""
    if not any(isinstance(arg, torch.Tensor) and not arg.is_contiguous() for arg in args):
        return
    for index, tensor in enumerate(outputs):
        if isinstance(tensor, torch.Tensor) and not tensor.is_contiguous():
            raise GeExecutionError(
                f"node {step.op.name!r} ({step.op.type}) output {index}: its built-in kernel declares strided_inputs "
                f"but returned a non-contiguous tensor (strides {tensor.stride()}) for a strided input; make the "
                "kernel's output dense or drop the declaration (interpreter/registry.py)")

"""Prepared kernels: a kernel's decisions made once per input specs, its arithmetic run per call.

ONNX's reference evaluator splits an op into `__init__` (once per node) and `_run` (per call). A GE
kernel may split the same way, one level further: its *prepare* phase sees the node's attrs and an
`InputSpec` per input (dtype and shape, and the value where the input signature fixes it: a Const, a
folded value, a small integer graph input) and returns the call for those specs::

    @ge_kernel("ReduceMean", prepared=True)
    def reduce_mean(x, axes, *, keep_dims, noop_with_empty_axes):   # x, axes: InputSpec
        dims = None if axes.value is None else int_list(axes.value)  # fixed axes: read once
        ...
        return lambda x, axes: ...                                   # the kernel's inputs, no attrs

The decorator registers `kernel(*inputs, **attrs) = prepare(*specs, **attrs)(*inputs)`, so a direct
call, an eager adapter and a graph node all run the same code: there is one path, and the executor
only caches the call a plan's input signature gets. A prepare phase sees no values but fixed ones, so
a check that depends on values (a range, an index bound) cannot be made there: it is in the call,
and runs on every call.

Strides are not part of a spec (the input signature does not fix a graph input's layout): a call
must accept any layout of its inputs.
"""
from __future__ import annotations

import functools
import math
from collections.abc import Callable

import torch

from ..._base.numerics import HALF_PRECISION, opmath

# Integer tensors up to this many elements are index-like inputs (axes, perm, shape): a direct call
# gives the prepare phase their values, as an input signature fixes those of small integer graph inputs.
SMALL_INT_INPUT = 16


class InputSpec:
    """What a prepare phase knows of one input: its dtype and shape, and its value (the tensor) when
    the value is fixed for every call the prepared call will serve, else None."""

    __slots__ = ("dtype", "shape", "value")

    def __init__(self, dtype: torch.dtype, shape: torch.Size, value: torch.Tensor | None = None):
        self.dtype, self.shape, self.value = dtype, shape, value

    def __repr__(self):
        fixed = "" if self.value is None else ", fixed"
        return f"InputSpec({str(self.dtype).replace('torch.', '')}, {list(self.shape)}{fixed})"

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def dim(self) -> int:
        return len(self.shape)

    def numel(self) -> int:
        return math.prod(self.shape)

    def size(self, dim: int | None = None):
        return self.shape if dim is None else self.shape[dim]

    def is_floating_point(self) -> bool:
        return self.dtype.is_floating_point

    def widened(self) -> InputSpec:
        """The spec a kernel declared with `widen=True` computes on (16-bit floats as float32)."""
        if self.dtype not in HALF_PRECISION:
            return self
        return InputSpec(torch.float32, self.shape, None if self.value is None else opmath(self.value))


def spec_of(value, fixed: bool):
    """The spec of one kernel argument: a tensor's InputSpec (with its value when `fixed`), a list of
    them for a dynamic input, None for an optional input left unfed, a Python value as it is."""
    if isinstance(value, torch.Tensor):
        return InputSpec(value.dtype, value.shape, value if fixed else None)
    if isinstance(value, (list, tuple)):
        return [spec_of(item, fixed) for item in value]
    return value


def index_like(value) -> bool:
    """Whether a direct call gives the prepare phase this argument's value (see SMALL_INT_INPUT)."""
    return (isinstance(value, torch.Tensor) and not value.dtype.is_floating_point and not value.is_complex()
            and value.numel() <= SMALL_INT_INPUT)


def direct_specs(args) -> list:
    """Specs for a direct call: the values of index-like inputs are known, others not."""
    return [spec_of(arg, index_like(arg)) if not isinstance(arg, (list, tuple))
            else [spec_of(item, index_like(item)) for item in arg] for arg in args]


def prepared_kernel(prepare: Callable) -> Callable:
    """The kernel whose prepare phase is `prepare`: `kernel(*inputs, **attrs)` prepares and calls."""

    @functools.wraps(prepare)
    def kernel(*inputs, **attrs):
        return prepare(*direct_specs(inputs), **attrs)(*inputs)

    kernel.prepare = prepare
    return kernel


def prepare_of(fn: Callable) -> Callable | None:
    """The prepare phase of a kernel made by `prepared_kernel`, else None."""
    return getattr(fn, "prepare", None)

"""GE ops that move or mask existing elements without arithmetic: Tril, Triu, ReverseV2, Permute, FlattenV2.

Written from the CANN prototypes (``REG_OP`` in TorchAir's ``auto_generated_ge_raw_ops.py``) and the
converters that emit them (``ge_converter/aten/tril.py``, ``triu.py``, ``flip.py``, ``_fft_c2c.py``,
``convolution_backward.py``). Results are fresh contiguous tensors.
"""
from __future__ import annotations

import torch

from .common import check_dtype, fail, int_list
from ..registry import builtin_kernel


def _axis(node, what, axis, rank):
    if not -max(rank, 1) <= axis < max(rank, 1):
        fail(node, f"{what} {axis} is out of range for rank {rank}")
    return axis % max(rank, 1)


@builtin_kernel("Tril", "Triu")
def _triangle(inputs, attrs, node):
    """Keep the elements on and below (Tril) / above (Triu) the `diagonal`-th diagonal of the last two dims."""
    x = inputs[0]
    if x.dim() < 2:
        fail(node, f"x must have rank >= 2, got shape {list(x.shape)}")
    keep = torch.tril if node.type == "Tril" else torch.triu
    return [keep(x, attrs.get("diagonal", 0))]


_REVERSE_DTYPES = (torch.int8, torch.uint8, torch.int16, torch.uint16, torch.int32, torch.int64, torch.bool,
                   torch.float16, torch.float32, torch.float64, torch.complex64, torch.complex128)


@builtin_kernel("ReverseV2")
def _reverse_v2(inputs, attrs, node):
    """Reverse x along each dim listed in `axis` (an int tensor; negative counts from the end)."""
    x, axis = inputs
    check_dtype(node, "x", x, _REVERSE_DTYPES)
    check_dtype(node, "axis", axis, (torch.int32, torch.int64))
    dims = [_axis(node, "axis", a, x.dim()) for a in int_list(axis)]
    if len(set(dims)) != len(dims):
        fail(node, f"axis {int_list(axis)} names a dim twice")
    return [torch.flip(x, dims) if dims and x.dim() else x.clone()]


@builtin_kernel("Permute")
def _permute(inputs, attrs, node):
    """y = x with its dims in `order` (a permutation of x's dims)."""
    x = inputs[0]
    check_dtype(node, "x", x, (torch.float16, torch.float32))
    order = list(attrs.get("order", [0]))
    if sorted(_axis(node, "order entry", a, x.dim()) for a in order) != list(range(x.dim())):
        fail(node, f"order {order} is not a permutation of x's {x.dim()} dims")
    return [x.permute(order).contiguous()]


_FLATTEN_DTYPES = (torch.float16, torch.float32, torch.int8, torch.uint8, torch.int16, torch.uint16, torch.int32,
                   torch.uint32, torch.int64, torch.uint64)


@builtin_kernel("FlattenV2")
def _flatten_v2(inputs, attrs, node):
    """Merge dims axis..end_axis (inclusive; negative counts from the end) into one."""
    x = inputs[0]
    check_dtype(node, "x", x, _FLATTEN_DTYPES)
    axis = _axis(node, "axis", attrs.get("axis", 1), x.dim())
    end_axis = _axis(node, "end_axis", attrs.get("end_axis", -1), x.dim())
    if end_axis < axis:
        fail(node, f"end_axis {attrs.get('end_axis', -1)} comes before axis {attrs.get('axis', 1)}")
    return [x.flatten(axis, end_axis).contiguous() if x.dim() else x.reshape(1)]

"""Backward kernels of pad, resize and swish (kernels/shape/pad.py, kernels/image/sampling.py,
kernels/activation/pointwise.py) through TorchAir's real converters, against eager.
"""
from __future__ import annotations

import pytest

from tests.simulator.kernels.helpers import _randn, aten, check_grad_case


_PAD_RESIZE_GRADS = {
    "reflection_pad2d": (lambda g, x: aten.reflection_pad2d_backward(g, x, [1, 2, 2, 1]),
                         lambda: (_randn(2, 3, 7, 6), _randn(2, 3, 4, 3)), "PadV3Grad"),
    "reflection_pad2d_3d": (lambda g, x: aten.reflection_pad2d_backward(g, x, [1, 1, 0, 1]),
                            lambda: (_randn(3, 5, 6), _randn(3, 4, 4)), "PadV3Grad"),
    "replication_pad1d": (lambda g, x: aten.replication_pad1d_backward(g, x, [2, 3]),
                          lambda: (_randn(2, 3, 9), _randn(2, 3, 4)), "PadV3Grad"),
    "upsample_nearest2d": (lambda g: aten.upsample_nearest2d_backward(g, [6, 9], [2, 3, 3, 4]),
                           lambda: (_randn(2, 3, 6, 9),), "ResizeNearestNeighborV2Grad"),
    "upsample_nearest2d_down": (lambda g: aten.upsample_nearest2d_backward(g, [2, 3], [1, 2, 5, 7]),
                                lambda: (_randn(1, 2, 2, 3),), "ResizeNearestNeighborV2Grad"),
    "silu": (lambda g, x: aten.silu_backward(g, x), lambda: (_randn(4, 5), _randn(4, 5)), "SwishGrad"),
}


@pytest.mark.parametrize("name", sorted(_PAD_RESIZE_GRADS))
def test_pad_resize_and_swish_grads_match_eager(name):
    fn, make, ge_type = _PAD_RESIZE_GRADS[name]
    check_grad_case(fn, make(), ge_type)

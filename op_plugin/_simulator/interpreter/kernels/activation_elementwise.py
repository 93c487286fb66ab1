"""Activation GE ops without attrs that came out of the element-wise math modules: Relu, Relu6,
Sigmoid, FastGelu, Softplus, Mish, and ThresholdV2 (threshold and replacement as inputs).

CANN files them in ops-nn's `activation/` class, beside the ops of `activation.py`; they are kept
here until the two modules are merged. Each follows its CANN prototype (TorchAir's
`_ge_concrete_graph/auto_generated_ge_raw_ops.py`); 16-bit floats are computed in float32 and
rounded once, as the NPU's vector units do.
"""
from __future__ import annotations

import torch

from ..registry import ge_kernel
from .common import opmath


@ge_kernel("Relu")
def relu(x):
    return torch.relu(x)


@ge_kernel("Relu6")
def relu6(x):
    return torch.clamp(x, 0, 6)


def _in_float32(name, fn):
    """The kernel of fn, 16-bit floats computed in float32. The result goes back to x's dtype
    whatever it is (an integer x gives an integer y), which `widen=True` would not do, so it is
    spelled out."""
    def kernel(x):
        return fn(opmath(x)).to(x.dtype)

    kernel.__name__ = kernel.__qualname__ = name
    return kernel


ge_kernel("Sigmoid")(_in_float32("sigmoid", torch.sigmoid))
ge_kernel("FastGelu")(_in_float32("fast_gelu", lambda x: x * torch.sigmoid(1.702 * x)))


# torch refuses integer inputs of these two, so widen= computes exactly what the spelled-out form did.
@ge_kernel("Softplus", widen=True)
def softplus(x):
    return torch.nn.functional.softplus(x)


@ge_kernel("Mish", widen=True)
def mish(x):
    return torch.nn.functional.mish(x)


@ge_kernel("ThresholdV2", accepts={"x": (torch.float16, torch.float32, torch.int8, torch.int32, torch.uint8,
                                         torch.int64)})
def threshold_v2(x, threshold, value):
    """y = x where x > threshold, else value (0 when the optional value input is unfed).

    The comparison is made in float32 for 16-bit floats; the values chosen are x's own and the
    replacement rounded once to x's dtype (widen= would round a float64 value twice)."""
    replacement = torch.zeros((), dtype=x.dtype) if value is None else value.to(x.dtype)
    return torch.where(opmath(x) > threshold.to(opmath(x).dtype), x, replacement)

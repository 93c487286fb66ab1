"""Tests of kernels/pooling/avg_pool.py: AvgPoolV2(Grad), AdaptiveAvgPool2d(Grad).
"""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from op_plugin._testing_harness import assert_close, check_compiled, run_node

from tests.simulator.kernels.helpers import aten, check_grad_case, F16, F32


# ---- pooling ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("shape,kernel,stride,padding,ceil_mode,count_include_pad,divisor", [
    ((2, 3, 7, 8), [2, 2], [2, 2], [0, 0], False, True, None),
    ((2, 3, 7, 8), [3, 3], [2, 2], [1, 1], False, False, None),
    ((2, 3, 7, 8), [3, 3], [2, 2], [1, 1], True, True, None),
    ((2, 3, 7, 8), [3, 2], [2, 1], [1, 1], True, False, None),
    ((1, 2, 6, 5), [2, 3], [1, 2], [1, 1], False, True, 5),
    ((3, 5, 5), [5, 5], [], [0, 0], False, True, None),
    ((1, 2, 5, 5), [3, 3], [3, 3], [1, 1], True, True, None),
])
@pytest.mark.parametrize("dtype", [F32, F16], ids=["fp32", "fp16"])
def test_avg_pool_v2(shape, kernel, stride, padding, ceil_mode, count_include_pad, divisor, dtype):
    torch.manual_seed(0)
    x = torch.randn(shape).to(dtype)

    def fn(x):
        return aten.avg_pool2d(x, kernel, stride, padding, ceil_mode, count_include_pad, divisor)

    # TorchAir lowers fp16 avg_pool2d with exclusive=True whatever count_include_pad says (avg_pool2d.py)
    include_pad = count_include_pad and dtype != F16
    check_compiled(fn, (x,), "AvgPoolV2", oracle=lambda x: aten.avg_pool2d(
        x.float(), kernel, stride, padding, ceil_mode, include_pad, divisor).to(dtype), kind="kernel")


@pytest.mark.parametrize("attrs,oracle", [
    (dict(padding_mode="SAME"), lambda x: F.avg_pool2d(F.pad(x, (0, 1, 0, 1)), 2, 2, divisor_override=None)),
    (dict(padding_mode="VALID"), lambda x: F.avg_pool2d(x, 2, 2)),
    (dict(global_pooling=True), lambda x: x.mean((2, 3), keepdim=True)),
    (dict(pads=[1, 0, 0, 1], exclusive=False), lambda x: F.avg_pool2d(F.pad(x, (0, 1, 1, 0)), 2, 2)),
])
def test_avg_pool_v2_modes_hand_built(attrs, oracle):
    """padding_mode / global_pooling / asymmetric pads, which TorchAir never sets. The SAME case pads
    the trailing side only, where the mean must exclude the pad (exclusive defaults to True)."""
    torch.manual_seed(0)
    x = torch.randn(1, 2, 5, 5)
    want = oracle(x)
    if attrs.get("padding_mode") == "SAME":  # exclusive: border windows average over the real inputs only
        counts = F.avg_pool2d(F.pad(torch.ones(1, 1, 5, 5), (0, 1, 0, 1)), 2, 2)
        want = want / counts
    (got,) = run_node("AvgPoolV2", [x], [(F32, list(want.shape))], ksize=[1, 1, 2, 2],
                      strides=[1, 1, 2, 2], data_format="NCHW", **attrs)
    assert_close(got, want, "kernel")


def test_avg_pool_v2_nhwc_hand_built():
    x = torch.randn(2, 6, 5, 3)
    want = F.avg_pool2d(x.permute(0, 3, 1, 2), [3, 2], [2, 1], [1, 0], count_include_pad=False).permute(0, 2, 3, 1)
    (got,) = run_node("AvgPoolV2", [x], [(F32, list(want.shape))], ksize=[1, 3, 2, 1],
                      strides=[1, 2, 1, 1], pads=[1, 1, 0, 0], data_format="NHWC")
    torch.testing.assert_close(got, want)


@pytest.mark.parametrize("kernel,stride,padding,ceil_mode,count_include_pad,divisor", [
    ([2, 2], [2, 2], [0, 0], False, True, None), ([3, 3], [2, 2], [1, 1], False, False, None),
    ([3, 3], [2, 2], [1, 1], True, True, None), ([2, 3], [1, 2], [1, 1], False, True, 5),
])
def test_avg_pool2d_backward(kernel, stride, padding, ceil_mode, count_include_pad, divisor):
    torch.manual_seed(0)
    x = torch.randn(2, 3, 7, 8)
    y = torch.nn.functional.avg_pool2d(x, kernel, stride, padding, ceil_mode, count_include_pad, divisor)
    g = torch.randn(y.shape)

    def fn(g, x):
        return aten.avg_pool2d_backward(g, x, kernel, stride, padding, ceil_mode, count_include_pad, divisor)

    check_grad_case(fn, (g, x), "AvgPoolV2Grad")


@pytest.mark.parametrize("shape,out", [((2, 3, 7, 9), (1, 1)), ((3, 6, 5), (2, 3)), ((1, 2, 8, 8), (4, 4))])
def test_adaptive_avg_pool2d_backward(shape, out):
    torch.manual_seed(0)
    x = torch.randn(shape)
    g = torch.randn(torch.nn.functional.adaptive_avg_pool2d(x, out).shape)
    check_grad_case(lambda g, x: aten._adaptive_avg_pool2d_backward(g, x), (g, x), "AdaptiveAvgPool2dGrad")

"""Tests of kernels/pooling/max_pool.py: MaxPoolWithArgmaxV1/V3, MaxPool3DWithArgmaxV2, MaxPoolGradWithArgmaxV1/V3.
"""
from __future__ import annotations

import pytest
import torch

from op_plugin._testing_harness import check_compiled, run_node

from tests.simulator.kernels.helpers import aten, check_grad_case, F16, F32, I32, I64


@pytest.mark.parametrize("data_format", ["NCHW", "NHWC"])
@pytest.mark.parametrize("dtype,code", [(I32, 3), (I64, 9)])
@pytest.mark.parametrize("kernel,stride,padding,dilation,ceil_mode", [
    ([2, 2], [2, 2], [0, 0], [1, 1], False), ([3, 3], [2, 2], [1, 1], [1, 1], True),
    ([3, 2], [1, 2], [1, 0], [2, 1], False),
])
def test_max_pool_with_argmax_v3_hand_built(data_format, dtype, code, kernel, stride, padding, dilation,
                                            ceil_mode):
    """TorchAir emits V3 on arch35 only; argmax is the flat h * W + w index per plane in either layout."""
    torch.manual_seed(0)
    x = torch.randn(2, 3, 7, 8)
    y, idx = aten.max_pool2d_with_indices(x, kernel, stride, padding, dilation, ceil_mode)
    feed = x if data_format == "NCHW" else x.permute(0, 2, 3, 1).contiguous()
    to_layout = (lambda t: t) if data_format == "NCHW" else (lambda t: t.permute(0, 2, 3, 1))
    got_y, got_idx = run_node("MaxPoolWithArgmaxV3", [feed],
                              [(F32, list(to_layout(y).shape)), (dtype, list(to_layout(y).shape))],
                              ksize=kernel, strides=stride, pads=padding, dilation=dilation, ceil_mode=ceil_mode,
                              dtype=code, data_format=data_format)
    torch.testing.assert_close(got_y, to_layout(y))
    torch.testing.assert_close(got_idx, to_layout(idx).to(dtype))


def test_max_pool_v3_argmax_feeds_its_grad():
    """The grad kernel (MaxPoolGradWithArgmaxV3) reads the forward's argmax unchanged."""
    torch.manual_seed(0)
    x = torch.randn(1, 2, 6, 6)
    attrs = dict(ksize=[3, 3], strides=[2, 2], pads=[1, 1], dtype=3, ceil_mode=True)
    y, idx = run_node("MaxPoolWithArgmaxV3", [x], [(F32, [1, 2, 4, 4]), (I32, [1, 2, 4, 4])], **attrs)
    g = torch.randn(y.shape)
    (got,) = run_node("MaxPoolGradWithArgmaxV3", [x, g, idx], [(F32, list(x.shape))],
                      dilation=[1, 1], **attrs)
    _, want_idx = aten.max_pool2d_with_indices(x, [3, 3], [2, 2], [1, 1], [1, 1], True)
    torch.testing.assert_close(got, aten.max_pool2d_with_indices_backward(g, x, [3, 3], [2, 2], [1, 1], [1, 1], True,
                                                                          want_idx))


def test_max_pool_refuses_bad_argmax_dtype():
    with pytest.raises(Exception, match="dtype 4"):
        run_node("MaxPoolWithArgmaxV3", [torch.randn(1, 1, 4, 4)], [(F32, [1, 1, 2, 2]), (I32, [1, 1, 2, 2])],
                 ksize=[2, 2], strides=[2, 2], pads=[0, 0], dtype=4)


@pytest.mark.parametrize("shape,kernel,stride,padding,dilation,ceil_mode", [
    ((1, 2, 5, 6, 7), [2, 2, 2], [2, 2, 2], [0, 0, 0], [1, 1, 1], False),
    ((2, 4, 5, 6), [3, 3, 2], [2, 1, 2], [1, 1, 0], [1, 1, 1], True),
    ((1, 1, 6, 6, 6), [2, 3, 2], [], [1, 1, 0], [2, 1, 1], False),
])
@pytest.mark.parametrize("dtype", [F32, F16], ids=["fp32", "fp16"])
def test_max_pool3d_with_argmax_v2(shape, kernel, stride, padding, dilation, ceil_mode, dtype):
    torch.manual_seed(0)
    x = torch.randn(shape).to(dtype)

    def fn(x):
        return aten.max_pool3d_with_indices(x, kernel, stride, padding, dilation, ceil_mode)

    check_compiled(fn, (x,), "MaxPool3DWithArgmaxV2", oracle=lambda x: tuple(
        t.to(dtype) if i == 0 else t for i, t in enumerate(fn(x.float()))), kind="kernel")


@pytest.mark.parametrize("kernel,stride,padding,ceil_mode", [
    ([2, 2], [2, 2], [0, 0], False), ([3, 3], [2, 2], [1, 1], False), ([3, 2], [2, 1], [1, 0], True),
])
@pytest.mark.parametrize("dtype", [F32, F16], ids=["fp32", "fp16"])
def test_max_pool2d_backward(kernel, stride, padding, ceil_mode, dtype):
    torch.manual_seed(0)
    x = torch.randn(2, 3, 7, 8).to(dtype)
    y, idx = aten.max_pool2d_with_indices(x.float(), kernel, stride, padding, [1, 1], ceil_mode)
    g = torch.randn(y.shape).to(dtype)

    def fn(g, x, idx):
        return aten.max_pool2d_with_indices_backward(g, x, kernel, stride, padding, [1, 1], ceil_mode, idx)

    # TorchAir recomputes the argmax it pairs with: MaxPoolWithArgmaxV1 in the graph too
    check_grad_case(fn, (g, x, idx), ["MaxPoolGradWithArgmaxV1", "MaxPoolWithArgmaxV1"], scale=4.0)


@pytest.mark.parametrize("argmax_dtype,code", [(I32, 3), (I64, 9)])
def test_max_pool_grad_with_argmax_v3_reads_plane_indices(argmax_dtype, code):
    """V3 (arch35): argmax is the flat h * W + w index in each input plane, of the dtype attr's type."""
    torch.manual_seed(0)
    x = torch.randn(2, 3, 6, 7)
    y, idx = aten.max_pool2d_with_indices(x, [3, 3], [2, 2], [1, 1], [1, 1], True)
    g = torch.randn(y.shape)
    (got,) = run_node("MaxPoolGradWithArgmaxV3", [x, g, idx.to(argmax_dtype)], [(F32, x.shape)],
                      ksize=[3, 3], strides=[2, 2], pads=[1, 1], dtype=code, dilation=[1, 1], ceil_mode=True)
    want = aten.max_pool2d_with_indices_backward(g, x, [3, 3], [2, 2], [1, 1], [1, 1], True, idx)
    torch.testing.assert_close(got, want)


def test_max_pool_grad_refuses_a_geometry_that_does_not_match_grad():
    x = torch.randn(1, 1, 6, 6)
    y, idx = aten.max_pool2d_with_indices(x, [2, 2], [2, 2], [0, 0], [1, 1], False)
    with pytest.raises(Exception, match="MaxPoolGradWithArgmaxV3.*ksize"):
        run_node("MaxPoolGradWithArgmaxV3", [x, y, idx.int()], [(F32, x.shape)],
                 ksize=[3, 3], strides=[3, 3], pads=[1, 1], dtype=3)

"""Backward GE kernels of convolution and pooling (kernels/conv.py, pooling.py,
pooling_max.py, image.py) through TorchAir's converters against eager, and hand-built graphs for attrs
TorchAir never sets (NHWC, argmax V3)."""
from __future__ import annotations

import functools

import pytest
import torch

from op_plugin._testing_harness import assert_close, check_compiled, run_node

aten = torch.ops.aten
F32, F16 = torch.float32, torch.float16
# npugraph against eager computed in float32 and rounded once, within the "grad" tolerances (times `scale`)
check_grad_case = functools.partial(check_compiled, oracle_in_float32=True, kind="grad")

I32, I64 = torch.int32, torch.int64


@pytest.mark.parametrize("stride,padding,dilation,groups", [
    ([1, 1], [0, 0], [1, 1], 1), ([2, 2], [1, 1], [1, 1], 1), ([2, 1], [1, 2], [2, 1], 1), ([1, 1], [1, 1], [1, 1], 2),
])
@pytest.mark.parametrize("dtype", [F32, F16], ids=["fp32", "fp16"])
def test_conv2d_backward(stride, padding, dilation, groups, dtype):
    torch.manual_seed(0)
    x, w = torch.randn(2, 4, 9, 8).to(dtype), torch.randn(6, 4 // groups, 3, 3).to(dtype)
    y = torch.nn.functional.conv2d(x.float(), w.float(), None, stride, padding, dilation, groups)
    g = torch.randn(y.shape).to(dtype)

    def fn(g, x, w):
        return aten.convolution_backward(g, x, w, [6], stride, padding, dilation, False, [0, 0], groups,
                                         [True, True, False])[:2]

    check_grad_case(fn, (g, x, w), ["Conv2DBackpropInput", "Conv2DBackpropFilter"], scale=8.0 if dtype == F32 else 30.0)


def test_conv3d_backward():
    torch.manual_seed(0)
    x, w = torch.randn(1, 2, 5, 6, 4), torch.randn(3, 2, 3, 3, 2)
    g = torch.randn(torch.nn.functional.conv3d(x, w, None, [1, 2, 1], [1, 1, 0]).shape)

    def fn(g, x, w):
        return aten.convolution_backward(g, x, w, None, [1, 2, 1], [1, 1, 0], [1, 1, 1], False, [0, 0, 0], 1,
                                         [True, True, False])[:2]

    check_grad_case(fn, (g, x, w), ["Conv3DBackpropInput", "Conv3DBackpropFilter"], scale=8.0)


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


@pytest.mark.parametrize("mode", [0, 1], ids=["bilinear", "nearest"])
@pytest.mark.parametrize("padding_mode", [0, 1, 2], ids=["zeros", "border", "reflection"])
@pytest.mark.parametrize("align_corners", [False, True])
def test_grid_sampler_2d_backward(mode, padding_mode, align_corners):
    torch.manual_seed(0)
    x, grid = torch.randn(2, 3, 5, 6), torch.rand(2, 4, 3, 2) * 2.4 - 1.2
    g = torch.randn(2, 3, 4, 3)

    def fn(g, x, grid):
        return aten.grid_sampler_2d_backward(g, x, grid, mode, padding_mode, align_corners, [True, True])

    check_grad_case(fn, (g, x, grid), "GridSampler2DGrad", scale=4.0)


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


def test_conv2d_backprop_input_nhwc_hand_built():
    """data_format NHWC (TorchAir always writes NCHW): strides in NHWC order, x/grads channels last."""
    torch.manual_seed(0)
    x, w = torch.randn(2, 4, 7, 6), torch.randn(5, 4, 3, 3)
    y = torch.nn.functional.conv2d(x, w, None, [2, 1], [1, 1])
    g = torch.randn(y.shape)
    want = torch.nn.grad.conv2d_input(x.shape, w, g, [2, 1], [1, 1])
    size = torch.tensor([2, 7, 6, 4], dtype=I32)
    (got,) = run_node("Conv2DBackpropInput", [size, w, g.permute(0, 2, 3, 1).contiguous()],
                      [(F32, [2, 7, 6, 4])], strides=[1, 2, 1, 1], pads=[1, 1, 1, 1], dilations=[1, 1, 1, 1])
    assert_close(got, want.permute(0, 2, 3, 1), "kernel")


@pytest.mark.parametrize("op_type,operands,match", [
    ("Conv2DBackpropInput", lambda: [torch.tensor([1, 2, 5, 5], dtype=I32), torch.randn(3, 2, 3, 3),
                                     torch.randn(1, 3, 3, 3, dtype=torch.float16)],
     "out_backprop dtype torch.float16 differs from filter dtype torch.float32"),
    ("Conv2DBackpropFilter", lambda: [torch.randn(1, 2, 5, 5), torch.tensor([3, 2, 3], dtype=I32),
                                      torch.randn(1, 3, 3, 3)],
     r"filter_size \[3, 2, 3\], x \[1, 2, 5, 5\] and out_backprop \[1, 3, 3, 3\] must all be 4-D"),
])
def test_conv_backprop_refuses_mismatched_operands(op_type, operands, match):
    with pytest.raises(Exception, match=f"{op_type}.*{match}"):
        run_node(op_type, operands(), [(F32, [1, 2, 5, 5])],
                 strides=[1, 1, 1, 1], pads=[0, 0, 0, 0], dilations=[1, 1, 1, 1])

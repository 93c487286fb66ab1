"""Tests of kernels/conv/convolution.py: Conv2D/3D, Conv2D/3DTranspose, Im2col, Conv2D/3DBackpropInput,
Conv2D/3DBackpropFilter.
"""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from op_plugin._testing_harness import assert_close, check_compiled, Const, run_node

from tests.simulator.kernels.helpers import aten, check_grad_case, F16, F32, I32


# ---- convolutions -----------------------------------------------------------------------------------

# Conv2DTranspose: TorchAir's _conv_transpose2d_npu_output_size mixed int32 and int64 in one Mul;
# op_plugin's convolution completion (op_plugin/_lowering/aten_completions.py) builds input_size in int32.
@pytest.mark.parametrize("x_shape,w_shape,stride,padding,dilation,output_padding,groups,ge_type", [
    ((2, 4, 5, 6), (4, 3, 3, 3), [1, 1], [0, 0], [1, 1], [0, 0], 1, "Conv2DTranspose"),
    ((1, 2, 3, 4, 5), (2, 3, 2, 3, 2), [1, 1, 2], [1, 0, 1], [1, 2, 1], [0, 0, 1], 1, "Conv3DTranspose"),
    ((1, 2, 3, 4, 5), (2, 3, 2, 3, 2), [2, 1, 1], [0, 1, 1], [1, 1, 1], [1, 0, 0], 1, "Conv3DTranspose"),
    ((1, 4, 4, 5, 3), (2, 2, 3, 3, 1), [1, 2, 1], [1, 1, 0], [1, 1, 2], [0, 0, 0], 2, "Conv3D"),
    ((2, 2, 3, 4, 5), (3, 2, 2, 2, 2), [1, 1, 1], [0, 0, 0], [1, 1, 1], [0, 0, 0], 1, "Conv3D"),
])
@pytest.mark.parametrize("dtype", [F32, F16], ids=["fp32", "fp16"])
@pytest.mark.parametrize("bias", [False, True], ids=["nobias", "bias"])
def test_convolutions(x_shape, w_shape, stride, padding, dilation, output_padding, groups, ge_type, dtype, bias):
    torch.manual_seed(0)
    transposed = "Transpose" in ge_type
    x, w = torch.randn(x_shape).to(dtype), torch.randn(w_shape).to(dtype)
    out_channels = w_shape[1] * groups if transposed else w_shape[0]
    b = torch.randn(out_channels).to(dtype) if bias else None

    def fn(x, w, b):
        return aten.convolution(x, w, b, stride, padding, dilation, transposed, output_padding, groups)

    def oracle(x, w, b):  # float32 accumulation, rounded once, as CANN's cube unit does (eager CPU fp16 does not)
        return fn(x.float(), w.float(), None if b is None else b.float()).to(dtype)

    check_compiled(fn, (x, w, b), ge_type, oracle=oracle, kind="accumulated")


@pytest.mark.parametrize("x_shape,w_shape,stride,pads,dilation,output_padding,groups", [
    ((2, 4, 5, 6), (4, 3, 3, 3), [1, 1], [0, 0, 0, 0], [1, 1], [0, 0], 1),
    ((2, 4, 5, 6), (4, 3, 3, 2), [2, 3], [1, 1, 0, 0], [1, 1], [1, 2], 1),
    ((1, 4, 4, 4), (4, 2, 3, 3), [2, 2], [1, 1, 1, 1], [2, 1], [1, 0], 2),
    ((1, 2, 4, 4), (2, 3, 3, 3), [2, 2], [2, 0, 0, 1], [1, 1], [0, 1], 1),
])
@pytest.mark.parametrize("dtype", [F32, F16], ids=["fp32", "fp16"])
def test_conv2d_transpose_hand_built(x_shape, w_shape, stride, pads, dilation, output_padding, groups,
                                     dtype):
    """As TorchAir lays it out (input_size, x, filter, bias; NCHW attrs), asymmetric pads included: the
    oracle is the full transposed convolution cropped by the pads, output_padding added at the end."""
    torch.manual_seed(0)
    x, w, b = torch.randn(x_shape).to(dtype), torch.randn(w_shape).to(dtype), torch.randn(w_shape[1] * groups).to(dtype)
    full = F.conv_transpose2d(x.float(), w.float(), None, stride, 0, 0, groups, dilation)
    full = F.pad(full, (0, max(0, output_padding[1] - pads[3]), 0, max(0, output_padding[0] - pads[1])))
    height = full.shape[2] - max(0, output_padding[0] - pads[1]) - pads[0] - pads[1] + output_padding[0]
    width = full.shape[3] - max(0, output_padding[1] - pads[3]) - pads[2] - pads[3] + output_padding[1]
    want = (full[:, :, pads[0]:pads[0] + height, pads[2]:pads[2] + width] + b.float()[:, None, None]).to(dtype)
    if pads[0] == pads[1] and pads[2] == pads[3]:  # symmetric pads: torch's own transposed convolution agrees
        torch.testing.assert_close(want, F.conv_transpose2d(x.float(), w.float(), b.float(), stride, pads[::2],
                                                            output_padding, groups, dilation).to(dtype))
    size = torch.tensor(list(want.shape), dtype=I32)
    (got,) = run_node("Conv2DTranspose", [Const(size), x, w, b], [(dtype, list(want.shape))],
                      strides=[1, 1, *stride], pads=pads, dilations=[1, 1, *dilation], groups=groups,
                      data_format="NCHW", output_padding=[0, 0, *output_padding])
    assert_close(got, want, "accumulated")


def test_conv3d_ndhwc_asymmetric_pads_hand_built():
    """NDHWC data with an NDHWC filter (channels last: [out, d, h, w, in])."""
    torch.manual_seed(0)
    x, w = torch.randn(1, 2, 4, 5, 6), torch.randn(3, 2, 2, 3, 3)
    want = F.conv3d(F.pad(x, (2, 0, 1, 0, 0, 1)), w, None, [1, 2, 1])
    (got,) = run_node("Conv3D", [x.permute(0, 2, 3, 4, 1).contiguous(),
                                 w.permute(0, 2, 3, 4, 1).contiguous()],
                      [(F32, list(want.permute(0, 2, 3, 4, 1).shape))], strides=[1, 1, 2, 1, 1],
                      pads=[0, 1, 1, 0, 2, 0], data_format="NDHWC")
    assert_close(got, want.permute(0, 2, 3, 4, 1), "accumulated")


def test_conv2d_transpose_checks_input_size_against_the_attrs():
    x, w = torch.randn(1, 2, 3, 3), torch.randn(2, 1, 3, 3)
    with pytest.raises(Exception, match="Conv2DTranspose.*input_size"):
        run_node("Conv2DTranspose", [Const(torch.tensor([1, 1, 9, 9], dtype=I32)), x, w],
                 [(F32, [1, 1, 9, 9])], strides=[1, 1, 1, 1], pads=[0, 0, 0, 0], data_format="NCHW")


def test_conv_refuses_quantisation():
    x, w = torch.randn(1, 2, 3, 3, 3), torch.randn(2, 2, 1, 1, 1)
    with pytest.raises(Exception, match="offset_x"):
        run_node("Conv3D", [x, w], [(F32, [1, 2, 3, 3, 3])], strides=[1, 1, 1, 1, 1],
                 pads=[0] * 6, data_format="NCDHW", offset_x=3)


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


# ---- Col2im (issue 34: aten.col2im, F.fold) ------------------------------------------------------

@pytest.mark.parametrize("kernel, dilation, padding, stride, size", [
    ([2, 2], [1, 1], [0, 0], [1, 1], [4, 5]),
    ([3, 3], [1, 1], [1, 1], [2, 2], [5, 4]),
    ([2, 2], [1, 2], [0, 1], [2, 1], [4, 6]),
    ([2], [1], [1], [2], [6, 6]),
])
@pytest.mark.parametrize("dtype", [F32, F16])
def test_col2im_is_fold_of_the_nchw_columns(kernel, dilation, padding, stride, size, dtype):
    """CANN Col2im as torch_npu's aclop col2im feeds it: x [N, C, kh * kw, L], output_size [H, W] (int32);
    the oracle is F.fold of x viewed [N, C * kh * kw, L], in float32 for float16."""
    def pair(values):
        return values * 2 if len(values) == 1 else values

    k = pair(kernel)
    blocks = F.unfold(torch.zeros(1, 1, *size), k, pair(dilation), pair(padding), pair(stride)).shape[-1]
    x = torch.randn(2, 3, k[0] * k[1], blocks).to(dtype)
    want = F.fold(x.float().reshape(2, -1, blocks), size, k, pair(dilation), pair(padding), pair(stride)).to(dtype)
    (got,) = run_node("Col2im", [x, Const(torch.tensor(size, dtype=I32))], [(dtype, list(want.shape))],
                      kernel_size=kernel, dilation=dilation, padding=padding, stride=stride)
    assert_close(got, want, "npu_ops")


def test_col2im_refuses_a_kernel_that_does_not_match_x():
    x = torch.randn(1, 2, 4, 6)
    with pytest.raises(Exception, match="kh \\* kw = 9"):
        run_node("Col2im", [x, Const(torch.tensor([4, 5], dtype=I32))], [(F32, [1, 2, 4, 5])],
                 kernel_size=[3, 3], dilation=[1, 1], padding=[0, 0], stride=[1, 1])

"""Convolution, pooling, padding and resampling GE kernels (kernels/conv.py, pooling.py,
pooling_max.py, pad.py, image.py) through TorchAir's converters against eager, and hand-built graphs
for attrs TorchAir never sets."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from op_plugin._testing_harness import Const, assert_close, check_compiled, run_node

aten = torch.ops.aten
F16, F32, I32, I64 = torch.float16, torch.float32, torch.int32, torch.int64


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


# ---- padding --------------------------------------------------------------------------------------------

_PAD_CASES = {
    "constant_nd": (lambda x: aten.constant_pad_nd(x, [0, 0, 0, 1, 2, 0], 1.5), (12, 3, 4), F32),
    "constant_crop": (lambda x: aten.constant_pad_nd(x, [0, -1, 1, -2]), (2, 3, 5, 6), F32),
    "constant_int": (lambda x: aten.constant_pad_nd(x, [1, 2], 7), (3, 4), I64),
    "constant_fp16": (lambda x: aten.constant_pad_nd(x, [2, 1, 1, 0]), (2, 3, 4), F16),
    "replication_1d": (lambda x: aten.replication_pad1d(x, [2, 3]), (1, 3, 4), F32),
    "reflection_2d": (lambda x: aten.reflection_pad2d(x, [1, 2, 3, 0]), (1, 3, 5, 4), F32),
    "reflection_2d_3d_input": (lambda x: aten.reflection_pad2d(x, [3, 3, 3, 3]), (2, 4, 4), F32),
}


@pytest.mark.parametrize("name", list(_PAD_CASES))
def test_pads(name):
    fn, shape, dtype = _PAD_CASES[name]
    x = (torch.randn(shape) * 5).to(dtype)
    check_compiled(fn, (x,), "MirrorPad" if "reflection" in name else "PadV3", kind="kernel")


@pytest.mark.parametrize("mode,torch_mode,pads", [
    ("reflect", "reflect", [1, 2, 2, 1]), ("edge", "replicate", [3, 0, 1, 2]), ("circular", "circular", [2, 1, 0, 3]),
])
@pytest.mark.parametrize("contiguous", [True, False])
def test_pad_v3_modes_hand_built(mode, torch_mode, pads, contiguous):
    """pads are [top, bottom, left, right] on H, W of NCHW; paddings_contiguous picks the layout."""
    torch.manual_seed(0)
    x = torch.randn(1, 2, 4, 5)
    want = F.pad(x, (pads[2], pads[3], pads[0], pads[1]), mode=torch_mode)
    pairs = [(0, 0), (0, 0), (pads[0], pads[1]), (pads[2], pads[3])]
    flat = [v for p in pairs for v in p] if contiguous else [p[0] for p in pairs] + [p[1] for p in pairs]
    (got,) = run_node("PadV3", [x, Const(torch.tensor(flat))], [(F32, list(want.shape))],
                      mode=mode, paddings_contiguous=contiguous)
    torch.testing.assert_close(got, want)


def test_mirror_pad_symmetric_and_refusals():
    x = torch.arange(4.0).reshape(1, 4)
    (got,) = run_node("MirrorPad", [x, Const(torch.tensor([[0, 0], [2, 3]]))], [(F32, [1, 9])],
                      mode="SYMMETRIC")
    assert got.tolist() == [[1.0, 0.0, 0.0, 1.0, 2.0, 3.0, 3.0, 2.0, 1.0]]
    with pytest.raises(Exception, match="MirrorPad.*smaller than the dim size"):
        run_node("MirrorPad", [x, Const(torch.tensor([[0, 0], [4, 0]]))], [(F32, [1, 8])],
                 mode="REFLECT")
    with pytest.raises(Exception, match="PadV3.*negative paddings"):
        run_node("PadV3", [x, Const(torch.tensor([0, 0, -1, 0]))], [(F32, [1, 3])], mode="edge")


# ---- resampling ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("shape,size,dtype", [((2, 3, 4, 4), [8, 8], F32), ((1, 2, 5, 3), [7, 4], F16),
                                              ((1, 1, 6, 6), [4, 3], F32), ((1, 2, 3, 3), [3, 3], I32)])
def test_resize_nearest_neighbor_v2(shape, size, dtype):
    x = (torch.randn(shape) * 10).to(dtype)
    check_compiled(lambda x: aten.upsample_nearest2d(x, size), (x,), "ResizeNearestNeighborV2", kind="kernel",
                   oracle=lambda x: aten.upsample_nearest2d(x.double(), size).to(dtype))  # no int kernel on CPU


@pytest.mark.parametrize("align_corners,half_pixel", [(False, True), (True, False)])
@pytest.mark.parametrize("size", [[7, 3], [2, 9]])
def test_resize_nearest_neighbor_v2_attrs_hand_built(align_corners, half_pixel, size):
    """half_pixel_centers is torch's nearest-exact; align_corners rounds onto the corner-aligned grid."""
    torch.manual_seed(0)
    x = torch.randn(1, 2, 4, 5)
    if half_pixel:
        want = F.interpolate(x, size=size, mode="nearest-exact")
    else:
        rows = [int((i * (4 - 1) / max(size[0] - 1, 1)) + 0.5) for i in range(size[0])]
        cols = [int((j * (5 - 1) / max(size[1] - 1, 1)) + 0.5) for j in range(size[1])]
        want = x[:, :, rows][:, :, :, cols]
    graph_x = x.permute(0, 2, 3, 1).contiguous()  # ND layout: the op's own NHWC
    (got,) = run_node("ResizeNearestNeighborV2", [graph_x, Const(torch.tensor(size, dtype=I32))],
                      [(F32, [1, *size, 2])], align_corners=align_corners, half_pixel_centers=half_pixel)
    torch.testing.assert_close(got, want.permute(0, 2, 3, 1))


@pytest.mark.parametrize("mode", [0, 1, 2])
@pytest.mark.parametrize("padding_mode", [0, 1, 2])
@pytest.mark.parametrize("align_corners", [False, True])
def test_grid_sampler_2d(mode, padding_mode, align_corners):
    torch.manual_seed(0)
    x, grid = torch.randn(2, 3, 5, 4), torch.rand(2, 3, 6, 2) * 2.4 - 1.2
    check_compiled(lambda x, g: aten.grid_sampler_2d(x, g, mode, padding_mode, align_corners), (x, grid),
                   "GridSampler2D", kind="accumulated")


@pytest.mark.parametrize("mode,padding_mode,align_corners", [(0, 0, False), (1, 1, True), (0, 2, True)])
@pytest.mark.parametrize("dtype", [F32, F16], ids=["fp32", "fp16"])
def test_grid_sampler_3d(mode, padding_mode, align_corners, dtype):
    torch.manual_seed(0)
    x, grid = torch.randn(1, 2, 3, 4, 5).to(dtype), (torch.rand(1, 2, 3, 2, 3) * 2.2 - 1.1).to(dtype)

    def fn(x, g):
        return aten.grid_sampler_3d(x, g, mode, padding_mode, align_corners)

    check_compiled(fn, (x, grid), "GridSampler3D", oracle=lambda x, g: fn(x.float(), g.float()).to(dtype),
                   kind="accumulated" if dtype == F32 else "kernel")

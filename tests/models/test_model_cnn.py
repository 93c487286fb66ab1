"""examples/small_cnn.py (Conv2d, BatchNorm2d eval, ReLU, MaxPool2d, AdaptiveAvgPool2d, Linear)
through torch.compile(backend="npugraph"), plus the new GE kernels' attrs beyond what the model uses.

Tolerances: the project's rule (op_plugin.testing.tolerances; op_plugin._testing_harness's "eager"
row): fp32 atol 1e-5 / rtol 1.3e-6, fp16 1e-3.
bfloat16 is not run: GE's BNInfer and MaxPoolWithArgmaxV1 take float16/float32 only (their
REG_OP prototypes), and the simulator says so instead of computing it.
"""
import pytest
import torch
import torch.nn.functional as F

from op_plugin._simulator import GeExecutionError
from op_plugin._testing_harness import DTYPE_IDS, Npugraph, assert_close, check_dynamic_sizes, run_node

from examples import small_cnn

DTYPES = [torch.float32, torch.float16]
SIZES = [(2, 20), (3, 23), (5, 17)]   # (batch, image height = width)
EXPECTED_OPS = {"Conv2D", "BNInfer", "Relu", "MaxPoolWithArgmaxV1", "AdaptiveAvgPool2d", "MatMulV2"}


def _model(dtype):
    torch.manual_seed(0)
    return small_cnn.randomise_batch_norm(small_cnn.SmallCnn()).to(dtype).eval()


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS.get)
def test_static_matches_eager(dtype):
    model = _model(dtype)
    compiled = Npugraph(model)
    run = compiled.check(small_cnn.example_inputs(*SIZES[0], dtype=dtype), no_grad=True, equal_nan=False)
    (op_types,), (graph,) = run.types_per_graph, run.graphs
    assert EXPECTED_OPS <= set(op_types), sorted(EXPECTED_OPS - set(op_types))
    assert op_types.count("Conv2D") == 3 and op_types.count("BNInfer") == 2
    convs = [op for op in graph.op if op.type == "Conv2D"]
    assert [op.attr["groups"].i for op in convs] == [1, 2, 1]
    assert compiled.compiles == 1


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS.get)
def test_dynamic_three_sizes_one_compile(dtype):
    check_dynamic_sizes(_model(dtype), [small_cnn.example_inputs(batch, size, dtype=dtype, seed=index)
                                        for index, (batch, size) in enumerate(SIZES)], no_grad=True, equal_nan=False)


def test_bfloat16_is_refused_clearly():
    model = _model(torch.bfloat16)
    with pytest.raises(GeExecutionError, match=r"BNInfer.*bfloat16.*float16, float32"):
        Npugraph(model).check(small_cnn.example_inputs(dtype=torch.bfloat16), no_grad=True)


# ---- the kernels' attrs beyond the model ------------------------------------------------------

def _conv(inputs, layouts, **attrs):
    """One Conv2D node through the executor, its x and filter descs carrying `layouts`."""
    return run_node("Conv2D", inputs, layouts=layouts, **attrs)[0]


def test_conv2d_nhwc_asymmetric_pads_and_filter_layouts():
    torch.manual_seed(0)
    x = torch.randn(2, 6, 9, 11)
    weight = torch.randn(8, 3, 3, 2)          # OIHW, groups=2
    bias = torch.randn(8)
    # asymmetric pads [top, bottom, left, right]: torch.conv2d cannot express them, F.pad can
    want = F.conv2d(F.pad(x, (0, 1, 2, 1)), weight, bias, stride=(2, 1), dilation=(1, 2), groups=2)
    attrs = dict(pads=[2, 1, 0, 1], groups=2)
    nchw = _conv([x, weight, bias, None], ["NCHW", "NCHW"], strides=[1, 1, 2, 1], dilations=[1, 1, 1, 2],
                 data_format="NCHW", **attrs)
    assert_close(nchw, want)
    # NHWC data with an HWCN filter: same numbers, channels last
    nhwc = _conv([x.permute(0, 2, 3, 1), weight.permute(2, 3, 1, 0), bias, None], ["NHWC", "HWCN"],
                 strides=[1, 2, 1, 1], dilations=[1, 1, 2, 1], data_format="NHWC", **attrs)
    assert_close(nhwc, want.permute(0, 2, 3, 1))


@pytest.mark.parametrize("attrs, message", [
    (dict(data_format="NCDHW"), "data_format 'NCDHW'"),
    (dict(strides=[2, 1, 1, 1]), "N and C entries"),
    (dict(offset_x=3), "offset_x=3"),
    (dict(pads=[1, 1]), "pads must have|pads must be"),
])
def test_conv2d_unsupported_attrs_raise(attrs, message):
    x, weight = torch.randn(1, 2, 5, 5), torch.randn(3, 2, 3, 3)
    base = dict(strides=[1, 1, 1, 1], pads=[0, 0, 0, 0], data_format="NCHW")
    with pytest.raises(GeExecutionError, match=message):
        _conv([x, weight, None, None], ["NCHW", "NCHW"], **{**base, **attrs})


def test_max_pool_attrs_and_bn_infer_nhwc():
    torch.manual_seed(0)
    x = torch.randn(2, 3, 10, 9)
    attrs = dict(ksize=[1, 3, 2, 1], strides=[1, 2, 2, 1], pads=[1, 1, 1, 1], dilation=[1, 1, 2, 1], ceil_mode=True)
    y, argmax = run_node("MaxPoolWithArgmaxV1", [x], layouts=["NCHW"], **attrs)
    want = F.max_pool2d(x, (3, 2), (2, 2), (1, 1), (1, 2), ceil_mode=True)
    torch.testing.assert_close(y, want, rtol=0, atol=0)
    assert argmax.dtype == torch.int32 and argmax.shape == y.shape
    with pytest.raises(GeExecutionError, match="layout 'NHWC'"):
        run_node("MaxPoolWithArgmaxV1", [x], layouts=["NHWC"], **attrs)
    with pytest.raises(GeExecutionError, match="ksize"):
        run_node("MaxPoolWithArgmaxV1", [x], layouts=["NCHW"], **{**attrs, "ksize": [2, 3, 3, 1]})

    scale, offset, mean, var = torch.rand(4) + 0.5, torch.randn(4), torch.randn(4), torch.rand(4) + 0.5
    x = torch.randn(2, 5, 6, 4)   # NHWC: channels last
    (y,) = run_node("BNInfer", [x, scale, offset, mean, var], layouts=["NHWC"], epsilon=1e-3)
    want = F.batch_norm(x.permute(0, 3, 1, 2), mean, var, scale, offset, eps=1e-3).permute(0, 2, 3, 1)
    assert_close(y, want)

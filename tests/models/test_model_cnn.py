"""examples/small_cnn.py (Conv2d, BatchNorm2d eval, ReLU, MaxPool2d, AdaptiveAvgPool2d, Linear)
through torch.compile(backend="npugraph"), plus the new GE kernels' attrs beyond what the model uses.

Tolerances: op_plugin.testing.tolerances(dtype) (fp32 atol 1e-5 / rtol 1.3e-6, fp16 1e-3).
bfloat16 is not run: GE's BNInfer and MaxPoolWithArgmaxV1 take float16/float32 only (their
REG_OP prototypes), and the simulator says so instead of computing it.
"""
from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F

from _model_harness import (DTYPE_IDS, check_against_eager, check_dynamic_sizes, compile_model,
                            run_and_capture)
from op_plugin._simulator import GeExecutionError
from op_plugin._simulator.interpreter.kernels import lookup_kernel
from op_plugin.testing import tolerances

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
    compiled, backend = compile_model(model, dynamic=False)
    (op_types,), (graph,) = check_against_eager(compiled, model, small_cnn.example_inputs(*SIZES[0], dtype=dtype), dtype)
    assert EXPECTED_OPS <= set(op_types), sorted(EXPECTED_OPS - set(op_types))
    assert op_types.count("Conv2D") == 3 and op_types.count("BNInfer") == 2
    convs = [op for op in graph.op if op.type == "Conv2D"]
    assert [op.attr["groups"].i for op in convs] == [1, 2, 1]
    assert backend.compiles == 1


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS.get)
def test_dynamic_three_sizes_one_compile(dtype):
    check_dynamic_sizes(_model(dtype), [small_cnn.example_inputs(batch, size, dtype=dtype, seed=index)
                                        for index, (batch, size) in enumerate(SIZES)], dtype)


def test_bfloat16_is_refused_clearly():
    model = _model(torch.bfloat16)
    compiled, _ = compile_model(model, dynamic=False)
    with pytest.raises(GeExecutionError, match=r"BNInfer.*bfloat16.*float16, float32"):
        run_and_capture(compiled, small_cnn.example_inputs(dtype=torch.bfloat16))


# ---- the kernels' attrs beyond the model ------------------------------------------------------

def _node(op_type, *layouts, inputs=None):
    """A stand-in OpDef: input descs carrying `layouts`, and `inputs` data inputs (one per layout
    by default) for the binder to group by position."""
    descs = [SimpleNamespace(layout=layout, name=f"in{i}") for i, layout in enumerate(layouts)]
    count = len(layouts) if inputs is None else inputs
    return SimpleNamespace(type=op_type, name=op_type.lower(), input_desc=descs,
                           input=[f"data{i}:0" for i in range(count)])


def _conv(inputs, layouts, **attrs):
    return lookup_kernel("Conv2D")(inputs, attrs, _node("Conv2D", *layouts, inputs=len(inputs)))[0]


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
    torch.testing.assert_close(nchw, want, **tolerances(torch.float32))
    # NHWC data with an HWCN filter: same numbers, channels last
    nhwc = _conv([x.permute(0, 2, 3, 1), weight.permute(2, 3, 1, 0), bias, None], ["NHWC", "HWCN"],
                 strides=[1, 2, 1, 1], dilations=[1, 1, 2, 1], data_format="NHWC", **attrs)
    torch.testing.assert_close(nhwc, want.permute(0, 2, 3, 1), **tolerances(torch.float32))


@pytest.mark.parametrize("attrs, message", [
    (dict(data_format="NCDHW"), "data_format 'NCDHW'"),
    (dict(strides=[2, 1, 1, 1]), "N and C entries"),
    (dict(offset_x=3), "offset_x=3"),
    (dict(pads=[1, 1]), "pads must have|pads must be"),
])
def test_conv2d_unsupported_attrs_raise(attrs, message):
    x, weight = torch.randn(1, 2, 5, 5), torch.randn(3, 2, 3, 3)
    base = dict(strides=[1, 1, 1, 1], pads=[0, 0, 0, 0], data_format="NCHW")
    with pytest.raises(ValueError, match=message):
        _conv([x, weight, None, None], ["NCHW", "NCHW"], **{**base, **attrs})


def test_max_pool_attrs_and_bn_infer_nhwc():
    torch.manual_seed(0)
    x = torch.randn(2, 3, 10, 9)
    pool = lookup_kernel("MaxPoolWithArgmaxV1")
    attrs = dict(ksize=[1, 3, 2, 1], strides=[1, 2, 2, 1], pads=[1, 1, 1, 1], dilation=[1, 1, 2, 1], ceil_mode=True)
    y, argmax = pool([x], attrs, _node("MaxPoolWithArgmaxV1", "NCHW"))
    want = F.max_pool2d(x, (3, 2), (2, 2), (1, 1), (1, 2), ceil_mode=True)
    torch.testing.assert_close(y, want, rtol=0, atol=0)
    assert argmax.dtype == torch.int32 and argmax.shape == y.shape
    with pytest.raises(ValueError, match="layout 'NHWC'"):
        pool([x], attrs, _node("MaxPoolWithArgmaxV1", "NHWC"))
    with pytest.raises(ValueError, match="ksize"):
        pool([x], {**attrs, "ksize": [2, 3, 3, 1]}, _node("MaxPoolWithArgmaxV1", "NCHW"))

    scale, offset, mean, var = torch.rand(4) + 0.5, torch.randn(4), torch.randn(4), torch.rand(4) + 0.5
    bn = lookup_kernel("BNInfer")
    x = torch.randn(2, 5, 6, 4)   # NHWC: channels last
    (y,) = bn([x, scale, offset, mean, var], {"epsilon": 1e-3}, _node("BNInfer", "NHWC", inputs=5))
    want = F.batch_norm(x.permute(0, 3, 1, 2), mean, var, scale, offset, eps=1e-3).permute(0, 2, 3, 1)
    torch.testing.assert_close(y, want, **tolerances(torch.float32))

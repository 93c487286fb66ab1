"""torch_npu's fused quantisation ops of npu/quant_fused.py (adapters over AscendAntiQuantV2, TransQuantParamV2,
DequantSwigluQuant, AddRmsNormDynamicQuant, AddRmsNormQuant): eager and a single-op npugraph run one GE kernel,
so they agree bit for bit. The oracle comparisons are in tests/simulator/test_npu_ops_quant_fused.py,
test_npu_ops_anti_quant.py, test_npu_ops_trans_quant_param.py and test_npu_ops_int4_more.py."""
import pytest
import torch

from op_plugin._testing_harness import check_compiled

F16, BF16, F32, I8 = torch.float16, torch.bfloat16, torch.float32, torch.int8
npu = torch.ops.npu
pytestmark = pytest.mark.usefixtures("torchair")


def _bit_for_bit(fn, args, ge_type):
    """eager == a single-op npugraph bit for bit: both run the GE kernel of `ge_type`, as on an NPU."""
    run = check_compiled(fn, args, ge_type, kind="npu_ops")
    got, want = torch.utils._pytree.tree_leaves(run.got), torch.utils._pytree.tree_leaves(run.want)
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype and g.shape == w.shape
        assert torch.equal(_bits(g), _bits(w))


def _bits(t):
    """A tensor's bit patterns (floats as same-size ints: -0.0 and NaN payloads count)."""
    if t.is_floating_point():
        return t.view({1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()])
    return t


@pytest.mark.parametrize("dtype", (F16, BF16))
def test_anti_quant_eager_is_the_graph_bit_for_bit(dtype):
    x, scale, offset = torch.randint(-128, 128, (4, 16), dtype=I8), torch.rand(16), torch.randn(16)
    _bit_for_bit(lambda x, s, o: npu.npu_anti_quant(x, s, offset=o, dst_dtype=dtype), (x, scale, offset),
                 "AscendAntiQuantV2")


def test_trans_quant_param_eager_is_the_graph_bit_for_bit():
    _bit_for_bit(lambda s, o: npu.npu_trans_quant_param(s, o), (torch.rand(8), torch.randn(8).mul(50).round()),
                 "TransQuantParamV2")


def test_dequant_swiglu_quant_eager_is_the_graph_bit_for_bit():
    x = torch.randint(-500, 500, (4, 16), dtype=torch.int32)
    ws, act, qs = torch.rand(16), torch.rand(4), torch.rand(8) + 0.5
    _bit_for_bit(lambda x, w, a, q: npu.npu_dequant_swiglu_quant(x, weight_scale=w, activation_scale=a,
                                                                  quant_scale=q, quant_mode=1, round_mode=1),
                 (x, ws, act, qs), "DequantSwigluQuant")


@pytest.mark.parametrize("y_dtype", (None, torch.quint4x2))
def test_add_rms_norm_dynamic_quant_eager_is_the_graph_bit_for_bit(y_dtype):
    x1, x2, gamma = torch.randn(3, 16).half(), torch.randn(3, 16).half(), torch.rand(16).half()
    s1, s2 = torch.rand(16).half() + 0.5, torch.rand(16).half() + 0.5
    _bit_for_bit(lambda a, b, g, s, t: npu.npu_add_rms_norm_dynamic_quant(a, b, g, smooth_scale1=s, smooth_scale2=t,
                                                                           y_dtype=y_dtype),
                 (x1, x2, gamma, s1, s2), "AddRmsNormDynamicQuant")
    _bit_for_bit(lambda a, b, g: npu.npu_add_rms_norm_dynamic_quant(a, b, g, y_dtype=y_dtype), (x1, x2, gamma),
                 "AddRmsNormDynamicQuant")


@pytest.mark.parametrize("dtype", (F16, BF16))
@pytest.mark.parametrize("div_mode", (True, False))
def test_add_rms_norm_quant_eager_is_the_graph_bit_for_bit(dtype, div_mode):
    x1, x2, gamma = torch.randn(3, 16).to(dtype), torch.randn(3, 16).to(dtype), torch.rand(16).to(dtype)
    scales = torch.rand(16).to(dtype) + 0.1
    _bit_for_bit(lambda a, b, g, s: npu.npu_add_rms_norm_quant(a, b, g, s, None, div_mode=div_mode),
                 (x1, x2, gamma, scales), "AddRmsNormQuant")

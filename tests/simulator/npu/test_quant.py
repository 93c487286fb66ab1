"""torch_npu's quantisation ops of npu/quant.py (adapters over DynamicQuant(V2), AscendQuantV2, Quantize,
QuantBatchMatmulV3, WeightQuantBatchMatmulV2): eager and a single-op npugraph run one GE kernel, so they agree bit
for bit. The oracle comparisons (CANN's formulas element by element) are in tests/simulator/test_npu_ops_quant.py."""
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


def _packed(scale):
    bits = scale.view(torch.int32).to(torch.int64)
    return (bits & 0xFFFFE000) | (1 << 46)


@pytest.mark.parametrize("dtype", (F16, BF16))
def test_dynamic_quant_eager_is_the_graph_bit_for_bit(dtype):
    x, smooth = torch.randn(4, 3, 16).to(dtype), torch.rand(16).add(0.5).to(dtype)
    _bit_for_bit(lambda x: npu.npu_dynamic_quant(x), (x,), "DynamicQuant")
    _bit_for_bit(lambda x, s: npu.npu_dynamic_quant(x, smooth_scales=s), (x, smooth), "DynamicQuant")
    _bit_for_bit(lambda x: npu.npu_dynamic_quant(x, dst_type=torch.quint4x2), (x,), "DynamicQuant")
    _bit_for_bit(lambda x: npu.npu_dynamic_quant(x, quant_mode="pertensor"), (x,), "DynamicQuantV2")
    _bit_for_bit(lambda x: npu.npu_dynamic_quant_asymmetric(x), (x,), "DynamicQuantV2")
    _bit_for_bit(lambda x: npu.npu_dynamic_quant_asymmetric(x, dst_type=torch.quint4x2), (x,), "DynamicQuantV2")
    groups = torch.tensor([1, 4], dtype=torch.int32)
    _bit_for_bit(lambda x, s, g: npu.npu_dynamic_quant(x, smooth_scales=s, group_index=g),
                 (x.reshape(-1, 16)[:4], smooth.repeat(2, 1), groups), "DynamicQuant")


def test_quantize_eager_is_the_graph_bit_for_bit():
    x = torch.randn(4, 16) * 50
    _bit_for_bit(lambda x, s: npu.npu_quantize(x, s, None, torch.qint8, -1, False), (x, torch.rand(16)),
                 "AscendQuantV2")
    _bit_for_bit(lambda x, s: npu.npu_quantize(x, s, None, torch.quint4x2, -1, False), (x, torch.rand(16)),
                 "AscendQuantV2")
    zero_points = torch.randint(-5, 5, (16,), dtype=torch.int32)
    _bit_for_bit(lambda x, s, z: npu.npu_quantize(x, s, z, torch.qint8, 1, True), (x, torch.rand(16) + 0.1,
                                                                                  zero_points), "Quantize")


@pytest.mark.parametrize("out_dtype", (F16, BF16))
def test_quant_matmul_eager_is_the_graph_bit_for_bit(out_dtype):
    x1, x2 = torch.randint(-128, 128, (5, 32), dtype=I8), torch.randint(-128, 128, (32, 8), dtype=I8)
    scale, pertoken = torch.rand(8) / 1000, torch.rand(5)
    _bit_for_bit(lambda a, b, s, p: npu.npu_quant_matmul(a, b, s, pertoken_scale=p, output_dtype=out_dtype),
                 (x1, x2, scale, pertoken), "QuantBatchMatmulV3")
    bias = torch.randint(-100, 100, (8,), dtype=torch.int32)
    without_pertoken = _packed(scale) if out_dtype == F16 else scale
    _bit_for_bit(lambda a, b, s, c: npu.npu_quant_matmul(a, b, s, bias=c, output_dtype=out_dtype),
                 (x1, x2, without_pertoken, bias), "QuantBatchMatmulV3")


@pytest.mark.parametrize("dtype", (F16, BF16))
@pytest.mark.parametrize("group_size", (0, 8))
def test_weight_quant_batchmatmul_eager_is_the_graph_bit_for_bit(dtype, group_size):
    x, w = torch.randn(3, 16).to(dtype), torch.randint(-128, 128, (16, 4), dtype=I8)
    rows = 2 if group_size else 1
    scale, offset = torch.rand(rows, 4).to(dtype), torch.randn(rows, 4).to(dtype)
    _bit_for_bit(lambda x, w, s, o: npu.npu_weight_quant_batchmatmul(x, w, s, o, antiquant_group_size=group_size),
                 (x, w, scale, offset), "WeightQuantBatchMatmulV2")

"""torch_npu's quantisation ops of npu/quant.py (adapters over DynamicQuant(V2), AscendQuantV2, Quantize,
QuantBatchMatmulV3, WeightQuantBatchMatmulV2): eager and a single-op npugraph run one GE kernel, so they agree bit
for bit; the kernels against oracles written element by element from CANN's formulas (Python ints and floats,
banker's rounding by hand), the boundary cases (ties, saturation at -128/127, rows of zeros), int4 outputs
(issue 23) against numpy-scalar loops of the kernels' rounding points and bit-by-bit int4 words, and npugraph
(TorchAir's converters) against eager."""
import math
import struct

import numpy as np
import pytest
import torch

from tests.simulator._lowbit_oracles import pack_loop as _pack_loop
from tests.simulator.npu.graph_equal import assert_eager_equals_graph as _bit_for_bit
from op_plugin._testing_harness import check_compiled

F16, BF16, F32, I8 = torch.float16, torch.bfloat16, torch.float32, torch.int8
npu = torch.ops.npu
pytestmark = pytest.mark.usefixtures("torchair")


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


def _rint(value: float) -> int:
    """Round half to even, written out (not torch.round)."""
    low = math.floor(value)
    frac = value - low
    if frac > 0.5 or (frac == 0.5 and low % 2):
        return low + 1
    return low


def _sat(value: int, low=-128, high=127) -> int:
    return max(low, min(high, value))


def _f32(value: float) -> float:
    return torch.tensor(value, dtype=F32).item()


def _dynamic_oracle(rows):
    ys, scales = [], []
    for row in rows:
        absmax = max(abs(v) for v in row)
        factor = _f32(127.0 / absmax)
        ys.append([_sat(_rint(_f32(v * factor))) for v in row])
        scales.append(_f32(1.0 / factor))
    return torch.tensor(ys, dtype=I8), torch.tensor(scales, dtype=F32)


@pytest.mark.parametrize("dtype", (F16, BF16))
def test_dynamic_quant_matches_the_formula_row_by_row(dtype):
    x = torch.randn(2, 3, 16).to(dtype)
    y, scale = npu.npu_dynamic_quant(x)
    want_y, want_scale = _dynamic_oracle(x.float().reshape(-1, 16).tolist())
    assert torch.equal(y.reshape(-1, 16), want_y)
    torch.testing.assert_close(scale.reshape(-1), want_scale, rtol=2e-7, atol=0)
    assert y.shape == x.shape and scale.shape == (2, 3)


def test_dynamic_quant_rounds_ties_to_even():
    # max 127 -> factor 1: 2.5 -> 2, -2.5 -> -2, 3.5 -> 4, 0.5 -> 0 (away from zero would give 3, -3, 4, 1)
    x = torch.tensor([[127.0, 2.5, -2.5, 3.5, 0.5, -127.0]], dtype=F16)
    y, scale = npu.npu_dynamic_quant(x)
    assert y.tolist() == [[127, 2, -2, 4, 0, -127]]
    assert scale.tolist() == [1.0]


def test_dynamic_quant_smooth_scales_by_group():
    x = torch.randn(5, 8).to(F16)
    smooth = torch.rand(2, 8).add(0.5).to(F16)
    group_index = torch.tensor([2, 5], dtype=torch.int32)
    y, scale = npu.npu_dynamic_quant(x, smooth_scales=smooth, group_index=group_index)
    rows = [[_f32(a * b) for a, b in zip(x[i].float().tolist(), smooth[0 if i < 2 else 1].float().tolist(),
                                         strict=True)] for i in range(5)]
    want_y, want_scale = _dynamic_oracle(rows)
    assert torch.equal(y, want_y)
    torch.testing.assert_close(scale, want_scale, rtol=2e-7, atol=0)


def test_dynamic_quant_refusals():
    with pytest.raises(ValueError, match="row.*of zeros"):
        npu.npu_dynamic_quant(torch.zeros(2, 8, dtype=F16))
    with pytest.raises(ValueError, match="multiple of 8"):   # int4 (quint4x2) packs 8 per int32
        npu.npu_dynamic_quant(torch.randn(2, 12).half(), dst_type=torch.quint4x2)
    with pytest.raises(ValueError, match="group_index"):
        npu.npu_dynamic_quant(torch.randn(3, 8).half(), smooth_scales=torch.rand(2, 8).half(),
                              group_index=torch.tensor([2, 2], dtype=torch.int32))


def test_dynamic_quant_asymmetric_boundaries():
    # row max 255, min 0: scale 1, offset -128: 0 -> -128, 255 -> 127, 2.5 -> rint(-125.5) = -126
    x = torch.tensor([[0.0, 255.0, 2.5, 128.0], [1.0, 1.0, 1.0, 1.0]], dtype=F16)
    y, scale, offset = npu.npu_dynamic_quant_asymmetric(x)
    assert y[0].tolist() == [-128, 127, -126, 0]
    assert scale[0].item() == 1.0 and offset[0].item() == -128.0
    # a constant row: the scale is floored at 1e-12 (CANN's epsilon), offset 127 - 1 / 1e-12; float32
    # arithmetic then cancels the 127 (1e12 has an ulp of 65536)
    eps = _f32(1e-12)
    assert scale[1].item() == eps and offset[1].item() == _f32(127.0 - _f32(1.0 / eps))
    value = _f32(_f32(1.0 * _f32(1.0 / eps)) + offset[1].item())
    assert y[1].tolist() == [_sat(_rint(value))] * 4


def test_quantize_multiply_mode_rounds_half_even_and_saturates():
    x = torch.tensor([[2.5, 300.0, -300.0, -0.5], [1.5, -1.5, 0.49, 126.5]])
    y = npu.npu_quantize(x, torch.tensor([1.0, 1.0, 1.0, 1.0]), None, torch.qint8, -1, False)
    assert y.dtype == I8 and y.tolist() == [[2, 127, -128, 0], [2, -2, 0, 126]]


@pytest.mark.parametrize("dtype, low, high", [(torch.qint8, -128, 127), (torch.quint8, 0, 255),
                                              (torch.qint32, -2**31, 2**31 - 1)])
def test_quantize_divide_mode_per_channel(dtype, low, high):
    x = torch.randn(3, 4, 5) * 100
    scales = torch.rand(4) + 0.1
    zero_points = torch.tensor([0, 3, -7, 10], dtype=torch.int32)
    y = npu.npu_quantize(x, scales, zero_points, dtype, 1, True)
    for idx in [(i, c, k) for i in range(3) for c in range(4) for k in range(5)]:
        value = _f32(_f32(x[idx].item() / scales[idx[1]].item()) + zero_points[idx[1]].item())
        assert y[idx].item() == _sat(_rint(value), low, high), idx


def _fp19(value: float) -> float:
    """A float32 with its 13 low mantissa bits cleared (TransQuantParam's FP19, written with struct)."""
    (bits,) = struct.unpack("<I", struct.pack("<f", value))
    return struct.unpack("<f", struct.pack("<I", bits & 0xFFFFE000))[0]


def _packed(scale):
    """npu_trans_quant_param's int64 (ops-nn quant/trans_quant_param_v2 README): FP19 bits | 1 << 46."""
    return torch.tensor([struct.unpack("<I", struct.pack("<f", _fp19(v)))[0] | (1 << 46) for v in scale.tolist()],
                        dtype=torch.int64)


def _qmm_oracle(x1, x2, scale, pertoken=None, bias=None, fp19=False):
    m, k = x1.shape
    n = x2.shape[1]
    out = torch.empty(m, n, dtype=F32)
    for i in range(m):
        for j in range(n):
            acc = sum(int(x1[i, t]) * int(x2[t, j]) for t in range(k))   # Python ints: exact
            if bias is not None and bias.dtype == torch.int32:
                acc += int(bias[j])
            s = scale[j % scale.numel()].item()
            value = _f32(float(acc) * (_fp19(s) if fp19 else s))
            if pertoken is not None:
                value = _f32(value * pertoken[i].item())
            if bias is not None and bias.dtype != torch.int32:
                value = _f32(value + bias[j].float().item())
            out[i, j] = value
    return out


@pytest.mark.parametrize("out_dtype", (F16, BF16))
def test_quant_matmul_integer_accumulate_then_scales(out_dtype):
    x1 = torch.randint(-128, 128, (4, 32), dtype=I8)
    x2 = torch.randint(-128, 128, (32, 6), dtype=I8)
    x1[0] = -128
    x2[:, 0] = -128   # acc = 32 * 16384: exact in int32, not in a float16 accumulation
    scale, pertoken = torch.rand(6) / 1000, torch.rand(4)
    got = npu.npu_quant_matmul(x1, x2, scale, pertoken_scale=pertoken, output_dtype=out_dtype)
    assert got.dtype == out_dtype
    assert torch.equal(got, _qmm_oracle(x1, x2, scale, pertoken).to(out_dtype))


def test_quant_matmul_bias_orders():
    x1, x2 = torch.randint(-128, 128, (3, 16), dtype=I8), torch.randint(-128, 128, (16, 5), dtype=I8)
    scale = torch.rand(5) / 100
    int_bias = torch.randint(-1000, 1000, (5,), dtype=torch.int32)
    got = npu.npu_quant_matmul(x1, x2, scale, bias=int_bias, output_dtype=F16)   # torch_npu packs to FP19 first
    assert torch.equal(got, _qmm_oracle(x1, x2, scale, bias=int_bias, fp19=True).to(F16))
    bf_bias, pertoken = torch.randn(5).to(BF16), torch.rand(3)
    got = npu.npu_quant_matmul(x1, x2, scale, pertoken_scale=pertoken, bias=bf_bias, output_dtype=BF16)
    assert torch.equal(got, _qmm_oracle(x1, x2, scale, pertoken, bf_bias).to(BF16))


def test_quant_matmul_int64_scale_is_fp19():
    x1 = torch.randint(-128, 128, (8, 16), dtype=I8, generator=torch.Generator().manual_seed(1))
    x2 = torch.randint(-128, 128, (16, 3), dtype=I8, generator=torch.Generator().manual_seed(2))
    scale = torch.tensor([1.0 + 2.0 ** -20, 0.3, 1e-3]) / 64   # low mantissa bits FP19 drops
    want = _qmm_oracle(x1, x2, scale, fp19=True).to(F16)
    assert not torch.equal(want, _qmm_oracle(x1, x2, scale).to(F16))   # the truncation shows in float16
    assert torch.equal(npu.npu_quant_matmul(x1, x2, _packed(scale), output_dtype=F16), want)
    assert torch.equal(npu.npu_quant_matmul(x1, x2, scale, output_dtype=F16), want)   # eager packs it itself


def test_quant_matmul_refusals():
    x1, x2 = torch.randint(-5, 5, (2, 8), dtype=I8), torch.randint(-5, 5, (8, 3), dtype=I8)
    with pytest.raises(NotImplementedError, match="output_dtype"):
        npu.npu_quant_matmul(x1, x2, torch.rand(3))   # int8 output: the fixpipe's rounding is undocumented
    with pytest.raises(NotImplementedError, match="int4"):
        npu.npu_quant_matmul(x1.int(), x2.int(), torch.rand(3), output_dtype=F16)
    with pytest.raises(NotImplementedError, match="offset"):
        npu.npu_quant_matmul(x1, x2, torch.rand(3), offset=torch.rand(3), output_dtype=F16)
    with pytest.raises(ValueError, match="int64 scale goes with float16"):
        npu.npu_quant_matmul(x1, x2, _packed(torch.rand(3)), output_dtype=BF16)


def _rounded(value: float, dtype) -> float:
    return torch.tensor(value, dtype=F32).to(dtype).item()


@pytest.mark.parametrize("dtype", (F16, BF16))
@pytest.mark.parametrize("group_size", (0, 32))
def test_weight_quant_batchmatmul(group_size, dtype):
    """The A2/A3 kernel dequantises a float16 weight in float16 (w + offset rounded, then * scale rounded) and a
    bfloat16 one in float32, rounded once; the product accumulates in float32."""
    x = torch.randn(3, 64).to(dtype)
    w = torch.randint(-128, 128, (64, 4), dtype=I8)
    shape = (2, 4) if group_size else (4,)
    scale, offset = (torch.rand(shape) / 10).to(dtype), (torch.randn(shape) * 3).to(dtype)
    got = npu.npu_weight_quant_batchmatmul(x, w, scale, offset, antiquant_group_size=group_size)
    deq = torch.empty(64, 4, dtype=dtype)
    for t in range(64):
        for j in range(4):
            g = (t // 32, j) if group_size else (j,)
            if dtype == F16:
                shifted = _rounded(w[t, j].item() + offset[g].item(), F16)
                deq[t, j] = _rounded(shifted * scale[g].item(), F16)
            else:
                deq[t, j] = _rounded(_f32(_f32(w[t, j].item() + offset[g].item()) * scale[g].item()), BF16)
    assert torch.equal(got, (x.float() @ deq.float()).to(dtype))


# ---- npugraph (GE) against eager ----------------------------------------------------------------------

@pytest.mark.parametrize("dtype", (F16, BF16))
def test_dynamic_quant_compiled(dtype):
    x, smooth = torch.randn(4, 3, 16).to(dtype), torch.rand(16).add(0.5).to(dtype)
    check_compiled(lambda x: npu.npu_dynamic_quant(x), (x,), "DynamicQuant", kind="npu_ops")
    check_compiled(lambda x, s: npu.npu_dynamic_quant(x, smooth_scales=s), (x, smooth), "DynamicQuant",
                   kind="npu_ops")
    check_compiled(lambda x: npu.npu_dynamic_quant_asymmetric(x), (x,), "DynamicQuantV2", kind="npu_ops")
    check_compiled(lambda x: npu.npu_dynamic_quant(x, quant_mode="pertensor"), (x,), "DynamicQuantV2",
                   kind="npu_ops")


def test_dynamic_quant_compiled_with_groups():
    x, smooth = torch.randn(6, 8).half(), torch.rand(3, 8).add(0.5).half()
    group_index = torch.tensor([1, 4, 6], dtype=torch.int32)
    check_compiled(lambda x, s, g: npu.npu_dynamic_quant(x, smooth_scales=s, group_index=g), (x, smooth, group_index),
                   "DynamicQuant", kind="npu_ops")


def test_quantize_compiled():
    x = torch.randn(4, 16) * 50
    check_compiled(lambda x, s: npu.npu_quantize(x, s, None, torch.qint8, -1, False), (x, torch.rand(16)),
                   "AscendQuantV2", kind="npu_ops")
    zero_points = torch.randint(-5, 5, (16,), dtype=torch.int32)
    check_compiled(lambda x, s, z: npu.npu_quantize(x, s, z, torch.qint8, 1, True), (x, torch.rand(16) + 0.1,
                                                                                     zero_points),
                   "Quantize", kind="npu_ops")


@pytest.mark.parametrize("out_dtype", (F16, BF16))
def test_quant_matmul_compiled(out_dtype):
    x1, x2 = torch.randint(-128, 128, (5, 32), dtype=I8), torch.randint(-128, 128, (32, 8), dtype=I8)
    scale, pertoken = torch.rand(8) / 1000, torch.rand(5)
    check_compiled(lambda a, b, s, p: npu.npu_quant_matmul(a, b, s, pertoken_scale=p, output_dtype=out_dtype),
                   (x1, x2, scale, pertoken), "QuantBatchMatmulV3", kind="npu_ops")
    bias = torch.randint(-100, 100, (8,), dtype=torch.int32)
    without_pertoken = _packed(scale) if out_dtype == F16 else scale   # float16 takes npu_trans_quant_param's
    check_compiled(lambda a, b, s, c: npu.npu_quant_matmul(a, b, s, bias=c, output_dtype=out_dtype),
                   (x1, x2, without_pertoken, bias), "QuantBatchMatmulV3", kind="npu_ops")


def test_quant_matmul_graph_refuses_a_float_scale_for_float16_without_pertoken():
    """torch_npu's docs: in graph mode a float32 scale cannot go to float16 output without pertoken_scale (eager
    packs it with npu_trans_quant_param first; TorchAir passes it to QuantBatchMatmulV3 as it is)."""
    x1, x2 = torch.randint(-128, 128, (2, 8), dtype=I8), torch.randint(-128, 128, (8, 3), dtype=I8)
    torch._dynamo.reset()
    compiled = torch.compile(lambda a, b, s: npu.npu_quant_matmul(a, b, s, output_dtype=F16), backend="npugraph")
    with pytest.raises(Exception, match="QuantBatchMatmulV3.*float16 output takes an int64 scale"):
        compiled(x1, x2, torch.rand(3))


@pytest.mark.parametrize("dtype", (F16, BF16))
@pytest.mark.parametrize("group_size", (0, 32))
def test_weight_quant_batchmatmul_compiled(dtype, group_size):
    x, w = torch.randn(3, 64).to(dtype), torch.randint(-128, 128, (64, 4), dtype=I8)
    shape = (2, 4) if group_size else (1, 4)
    scale, offset = (torch.rand(shape) / 10).to(dtype), (torch.randn(shape) * 3).to(dtype)
    check_compiled(lambda x, w, s, o: npu.npu_weight_quant_batchmatmul(x, w, s, o, antiquant_group_size=group_size),
                   (x, w, scale, offset), "WeightQuantBatchMatmulV2", kind="npu_ops")


def test_zero_scales_in_divide_mode_are_refused_eagerly_and_by_the_ge_kernel():
    x, scales = torch.randn(2, 4), torch.tensor([1.0, 0.0, 2.0, 1.0])
    with pytest.raises(ValueError, match="scale of 0"):
        npu.npu_quantize(x, scales, None, torch.qint8, 1, True)
    assert npu.npu_quantize(x, scales, None, torch.qint8, -1, False).dtype == I8   # multiply mode: defined
    torch._dynamo.reset()
    compiled = torch.compile(lambda x, s: npu.npu_quantize(x, s, None, torch.qint8, 1, True), backend="npugraph")
    with pytest.raises(Exception, match="Quantize.*scale of 0"):
        compiled(x, scales)


@pytest.mark.parametrize("layout", ["batched, 3-D bias", "broadcast weight", "transposed weight view"])
def test_quant_matmul_batches_and_layouts_compiled(layout):
    x1 = torch.randint(-128, 128, (2, 3, 16), dtype=I8)
    x2 = torch.randint(-128, 128, (2, 16, 5), dtype=I8)
    scale, pertoken = torch.rand(5) / 100, torch.rand(3)
    if layout == "batched, 3-D bias":
        bias = torch.randint(-50, 50, (2, 1, 5), dtype=torch.int32)
        fn, args = (lambda a, b, s, p, c: npu.npu_quant_matmul(a, b, s, pertoken_scale=p, bias=c, output_dtype=BF16),
                    (x1, x2, scale, pertoken, bias))
    elif layout == "broadcast weight":
        fn, args = (lambda a, b, s, p: npu.npu_quant_matmul(a, b, s, pertoken_scale=p, output_dtype=F16),
                    (x1, x2[0], scale, pertoken))
    else:   # the weight kept as (n, k), passed transposed
        fn, args = (lambda a, b, s, p: npu.npu_quant_matmul(a, b.t(), s, pertoken_scale=p, output_dtype=BF16),
                    (x1[0], x2[0].t().contiguous(), scale, pertoken))
    eager = fn(*args)
    dense = (args[0].long() @ (args[1].t() if layout.startswith("transposed") else args[1]).long()).float()
    assert eager.shape == dense.shape
    check_compiled(fn, args, "QuantBatchMatmulV3", kind="npu_ops")


def test_quantize_int32_saturates_at_its_bounds():
    x = torch.tensor([[3e9, -3e9, 2.5, 2147483520.0]])
    y = npu.npu_quantize(x, torch.ones(4), None, torch.qint32, 1, True)
    assert y.dtype == torch.int32 and y.tolist() == [[2**31 - 1, -2**31, 2, 2147483520]]
    check_compiled(lambda x, s: npu.npu_quantize(x, s, None, torch.qint32, 1, True), (x, torch.ones(4)), "Quantize",
                   kind="npu_ops")


def _dynamic_int4_loop(x, symmetric):
    """DynamicQuant(V2) int4 (A2/A3 dynamic_quant.h) row by row in numpy float32 scalars, packed by _pack_loop."""
    words, scales, offsets = [], [], []
    for row in x.float().reshape(-1, x.shape[-1]).numpy():
        if symmetric:
            factor = np.float32(7) / np.float32(max(abs(v) for v in row))
            levels = [int(np.rint(np.float32(v * factor))) for v in row]
            scales.append(np.float32(1) / factor)
        else:
            high, low = np.float32(max(row)), np.float32(min(row))
            scale = max(np.float32((high - low) / np.float32(15)), np.float32(1e-12))
            offset = np.float32(7) - np.float32(high / scale)
            inverse = np.float32(1) / scale
            levels = [int(np.rint(np.float32(np.float32(v * inverse) + offset))) for v in row]
            scales.append(scale)
            offsets.append(offset)
        words.append(_pack_loop([min(max(v, -8), 7) for v in levels]))
    return words, scales, offsets


@pytest.mark.parametrize("dtype", [F16, BF16])
def test_dynamic_quant_int4_against_a_loop(dtype):
    torch.manual_seed(2)
    x = torch.randn(2, 3, 16, dtype=dtype) * 4
    y, scale = npu.npu_dynamic_quant(x, dst_type=torch.quint4x2)
    words, scales, _ = _dynamic_int4_loop(x, True)
    assert y.dtype == torch.int32 and y.shape == (2, 3, 2) and y.reshape(-1, 2).tolist() == words
    assert scale.reshape(-1).tolist() == [float(s) for s in scales]
    y, scale, offset = npu.npu_dynamic_quant_asymmetric(x, dst_type=torch.quint4x2)
    words, scales, offsets = _dynamic_int4_loop(x, False)
    assert y.reshape(-1, 2).tolist() == words and scale.reshape(-1).tolist() == [float(s) for s in scales]
    assert offset.reshape(-1).tolist() == [float(o) for o in offsets]


@pytest.mark.usefixtures("torchair")
@pytest.mark.parametrize("fn, ge_type", [
    (lambda x: npu.npu_dynamic_quant(x, dst_type=16), "DynamicQuant"),
    (lambda x: npu.npu_dynamic_quant(x, dst_type=16, quant_mode="pertensor"), "DynamicQuantV2"),
    (lambda x: npu.npu_dynamic_quant_asymmetric(x, dst_type=torch.quint4x2), "DynamicQuantV2"),
])
def test_dynamic_quant_int4_compiled(fn, ge_type):
    check_compiled(fn, (torch.randn(4, 5, 32, dtype=F16),), [ge_type, "Bitcast"])


def test_quantize_int4_against_a_loop():
    torch.manual_seed(3)
    x, scales, offsets = torch.randn(3, 16) * 6, torch.rand(16) + 0.5, torch.randn(16)
    y = npu.npu_quantize(x, scales, offsets, torch.quint4x2, -1, False)
    want = [_pack_loop([min(max(int(np.rint(np.float32(np.float32(v * s) + o))), -8), 7)
                        for v, s, o in zip(row, scales.numpy(), offsets.numpy(), strict=True)])
            for row in x.numpy()]
    assert y.dtype == torch.int32 and y.tolist() == want


@pytest.mark.usefixtures("torchair")
def test_quantize_int4_compiled():
    args = (torch.randn(4, 32, dtype=BF16) * 9, torch.rand(32, dtype=BF16) + 0.5, torch.randn(32, dtype=BF16))
    check_compiled(lambda x, s, o: npu.npu_quantize(x, s, o, torch.quint4x2, -1, False), args,
                   ["AscendQuantV2", "Bitcast"])

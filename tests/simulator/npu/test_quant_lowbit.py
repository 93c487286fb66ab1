"""fp8 and int4 (issue 23) and torch_npu's fp8 / int4 quantisers of npu/quant_lowbit.py (adapters over QuantMax,
GroupedQuantMax, RotateQuant, FlatQuant): eager and a single-op npugraph run one GE kernel, so they agree bit for
bit; the fp8 saturating cast and the int4 packing against hand-computed bit patterns and a nearest-value search
over every fp8 code (casts to fp8 through Cast and npu_dtype_cast too); npu_quant_max, npu_rotate_quant and
npu_kronecker_quant against loops in numpy float32 / float16 scalars (the kernels' rounding points, written out
element by element, helpers in tests/simulator/_lowbit_oracles.py), and through npugraph (QuantMax,
GroupedQuantMax, RotateQuant, FlatQuant + Bitcast) against eager."""
import numpy as np
import pytest
import torch

from tests.simulator._lowbit_oracles import (code_value as _code_value, nearest_code as _nearest_code,
                                             pack_loop as _pack_loop)
from op_plugin._simulator.interpreter.lowbit_formats import fp8_saturating_rint
from op_plugin._simulator.interpreter.lowbit_formats import pack_int4 as ge_pack_int4
from op_plugin._simulator.npu.formats import pack_int4, to_fp8, unpack_int4
from tests.simulator.npu.graph_equal import assert_eager_equals_graph as _bit_for_bit
from op_plugin._testing_harness import assert_close, check_compiled, check_dynamic_sizes, run_node

F16, BF16, F32, I8 = torch.float16, torch.bfloat16, torch.float32, torch.int8
E5M2, E4M3 = torch.float8_e5m2, torch.float8_e4m3fn
GE_NUMBER = {E5M2: 35, E4M3: 36}
npu = torch.ops.npu
pytestmark = pytest.mark.usefixtures("torchair")


@pytest.mark.parametrize("number", (291, 292))
def test_quant_max_eager_is_the_graph_bit_for_bit(number):
    x = torch.randn(4, 16) * 100
    _bit_for_bit(lambda x, s: npu.npu_quant_max(x, s, dst_dtype=number), (x, torch.tensor([3.0])), "QuantMax")


@pytest.mark.parametrize("dst", (torch.int8, torch.quint4x2))
def test_rotate_quant_eager_is_the_graph_bit_for_bit(dst):
    x, rotation = torch.randn(4, 32).half(), torch.randn(16, 16).half()
    _bit_for_bit(lambda x, r: npu.npu_rotate_quant(x, r, dst_dtype=dst), (x, rotation), "RotateQuant")


def test_kronecker_quant_eager_is_the_graph_bit_for_bit():
    x, p1, p2 = torch.randn(2, 4, 16).half(), torch.randn(4, 4).half(), torch.randn(16, 16).half()
    _bit_for_bit(lambda a, p, q: npu.npu_kronecker_quant(a, p, q, 0.8), (x, p1, p2), "FlatQuant")


def _casts():
    """The two implementations of CANN's cast: the eager kernels' and the GE kernels'."""
    return {"eager": to_fp8, "ge": lambda v, dtype: fp8_saturating_rint(v, GE_NUMBER[dtype])}


@pytest.mark.parametrize("impl", ["eager", "ge"])
@pytest.mark.parametrize("dtype, value, code", [
    (E5M2, 57344.0, 0x7B), (E5M2, 2.0 ** -14, 0x04), (E5M2, 2.0 ** -16, 0x01), (E5M2, 3 * 2.0 ** -16, 0x03),
    (E5M2, 1.125, 0x3C), (E5M2, 1.375, 0x3E), (E5M2, 2.0 ** -17, 0x00), (E5M2, 3 * 2.0 ** -17, 0x02),
    (E5M2, 61440.0, 0x7B), (E5M2, 1e6, 0x7B), (E5M2, float("inf"), 0x7B), (E5M2, -float("inf"), 0xFB),
    (E5M2, float("nan"), 0x00), (E5M2, -1.5, 0xBE),
    (E4M3, 448.0, 0x7E), (E4M3, 2.0 ** -6, 0x08), (E4M3, 2.0 ** -9, 0x01), (E4M3, 1.0625, 0x38),
    (E4M3, 1.1875, 0x3A), (E4M3, 464.0, 0x7E), (E4M3, 1e4, 0x7E), (E4M3, float("inf"), 0x7E),
    (E4M3, -float("inf"), 0xFE), (E4M3, float("nan"), 0x00), (E4M3, 3 * 2.0 ** -10, 0x02),
])
def test_fp8_cast_bit_patterns(impl, dtype, value, code):
    got = _casts()[impl](torch.tensor([value], dtype=F32), dtype)
    assert got.dtype == dtype and got.view(torch.uint8).item() == code


@pytest.mark.parametrize("impl", ["eager", "ge"])
@pytest.mark.parametrize("dtype", [E5M2, E4M3])
def test_fp8_cast_is_the_nearest_code_with_ties_to_even(impl, dtype):
    finite = sorted({v for c in range(256) if (v := _code_value(c, dtype)) is not None})
    mids = [(a + b) / 2 for a, b in zip(finite, finite[1:], strict=False)]   # every tie
    rng = np.random.default_rng(0)
    values = mids + finite + list(rng.standard_normal(300) * 2.0 ** rng.integers(-20, 18, 300)) + [7e4, -9e9]
    values = np.array(values, dtype=np.float32)
    got = _casts()[impl](torch.from_numpy(values), dtype).view(torch.uint8).tolist()
    want = [_nearest_code(float(v), dtype) for v in values]
    assert got == want


def test_int4_packing_order_from_hand_computed_words():
    values = torch.tensor([[1, -2, 3, -4, 5, -6, 7, -8], [0, 0, 0, 0, 0, 0, 0, 1]])
    # nibbles 1, E, 3, C, 5, A, 7, 8 from bit 0 up: 0x87A5C3E1; a 1 in the top nibble: 0x10000000
    assert pack_int4(values).tolist() == [[0x87A5C3E1 - 2 ** 32], [0x10000000]]
    assert unpack_int4(pack_int4(values)).tolist() == values.tolist()
    ge = ge_pack_int4(values.to(torch.int8).view(torch.int4).reshape(2, 1, 8), torch.int32, False)
    assert ge.tolist() == [[0x87A5C3E1 - 2 ** 32], [0x10000000]]
    assert ge_pack_int4(values.to(torch.int8).view(torch.int4)[:1, :2], torch.uint8, False).item() == 0xE1


def _fp8_loop(x, scale, dtype):
    flat = x.float().reshape(-1).numpy()
    codes = [_nearest_code(float(np.float32(v) * np.float32(scale)), dtype) for v in flat]
    return torch.tensor(codes, dtype=torch.uint8).view(dtype).reshape(x.shape)


@pytest.mark.parametrize("dtype, number", [(E5M2, 291), (E4M3, 292), (E5M2, 23)])
@pytest.mark.parametrize("xdtype", [F32, F16, BF16])
def test_quant_max_against_a_loop(dtype, number, xdtype):
    x = (torch.randn(3, 40) * 300).to(xdtype)
    x[0, 0] = -7e4 if xdtype != F16 else -6e4
    scale = torch.tensor([1.7])
    y, amax = npu.npu_quant_max(x, scale, dst_dtype=number)
    assert y.dtype == dtype and amax.dtype == xdtype and amax.shape == (1,)
    assert torch.equal(y.view(torch.uint8), _fp8_loop(x, 1.7, dtype).view(torch.uint8))
    assert amax.item() == max(abs(float(v)) for v in x.reshape(-1))


def test_grouped_quant_max_against_a_loop():
    x, scale = torch.randn(6, 5, dtype=BF16) * 50, torch.tensor([0.5, 40.0, 3.0])
    y, amax = npu.npu_quant_max(x, scale, dst_dtype=292, group_list=torch.tensor([2, 2, 6]))
    want = torch.cat([_fp8_loop(x[:2], 0.5, E4M3), _fp8_loop(x[2:], 3.0, E4M3)])
    assert torch.equal(y.view(torch.uint8), want.view(torch.uint8))
    assert amax.tolist() == [x[:2].abs().max().item(), 0.0, x[2:].abs().max().item()]


@pytest.mark.usefixtures("torchair")
@pytest.mark.parametrize("number, xdtype", [(291, F16), (292, BF16), (291, F32)])
def test_quant_max_compiled(number, xdtype):
    x = torch.randn(4, 16, 8, dtype=xdtype) * 1e4
    check_compiled(lambda a, s: npu.npu_quant_max(a, s, dst_dtype=number), (x, torch.tensor([3.0])), "QuantMax")


@pytest.mark.usefixtures("torchair")
def test_grouped_quant_max_compiled():
    args = (torch.randn(7, 16) * 100, torch.tensor([1.0, 9.0, 0.25]), torch.tensor([3, 3, 7]))
    check_compiled(lambda a, s, g: npu.npu_quant_max(a, s, dst_dtype=292, group_list=g), args, "GroupedQuantMax")


def _rotate_loop(x, rotation, top):
    """RotateQuant (A2/A3) element by element in numpy scalars: Y in x's dtype, then float32 arithmetic."""
    half = np.float16 if x.dtype == F16 else None
    m, n = x.shape
    k = rotation.shape[0]
    xs, rs = x.float().numpy(), rotation.float().numpy()
    out, scales = [], []
    for r in range(m):
        y = []
        for j in range(n):
            block, col = divmod(j, k)
            acc = np.float64(sum(np.float64(xs[r, block * k + t]) * np.float64(rs[t, col]) for t in range(k)))
            y.append(np.float32(half(acc)) if half else np.float32(torch.tensor(acc).to(BF16).float().item()))
        peak = max(abs(v) for v in y)
        factor = np.float32(top) / peak
        out.append([int(np.rint(np.float32(v * factor))) for v in y])
        scales.append(np.float32(peak * (np.float32(1.0) / np.float32(top))))
    return out, scales


@pytest.mark.parametrize("dtype", [F16, BF16])
@pytest.mark.parametrize("dst, top", [(None, 127), (16, 7)])
def test_rotate_quant_against_a_loop(dtype, dst, top):
    torch.manual_seed(0)
    # small integers and halves: every product and sum is exact, so float64 accumulation is the cube's
    x = torch.randint(-4, 5, (3, 32)).to(dtype)
    rotation = (torch.randint(-2, 3, (16, 16)) / 2).to(dtype)
    y, scale = npu.npu_rotate_quant(x, rotation, dst_dtype=dst)
    levels, scales = _rotate_loop(x, rotation, top)
    assert scale.tolist() == [float(s) for s in scales]
    if dst is None:
        assert y.dtype == torch.int8 and y.tolist() == levels
    else:
        assert y.dtype == torch.int32 and y.shape == (3, 4)
        assert y.tolist() == [_pack_loop(row) for row in levels]


@pytest.mark.usefixtures("torchair")
@pytest.mark.parametrize("dst", [1, 16])
@pytest.mark.parametrize("dtype", [F16, BF16])
def test_rotate_quant_compiled(dst, dtype):
    args = (torch.randn(8, 256, dtype=dtype), torch.randn(64, 64, dtype=dtype))
    check_compiled(lambda a, r: npu.npu_rotate_quant(a, r, dst_dtype=dst), args, ["RotateQuant"])


def _kronecker_loop(x, p1, p2, clip):
    """FlatQuant (A2/A3, int4) in numpy scalars: x @ p2 in x's dtype, p1 @ that in float16, float32 scalars."""
    to_x = (lambda v: np.float32(np.float16(v))) if x.dtype == F16 else (
        lambda v: np.float32(torch.tensor(v).to(BF16).float().item()))
    words, scales = [], []
    for block in x.float().numpy():
        right = [[to_x(sum(np.float64(block[i, t]) * np.float64(p2[t, j]) for t in range(p2.shape[0])))
                  for j in range(p2.shape[1])] for i in range(block.shape[0])]
        outer = [[np.float16(sum(np.float64(p1[i, t]) * np.float64(right[t][j]) for t in range(p1.shape[0])))
                  for j in range(p2.shape[1])] for i in range(p1.shape[0])]
        peak = np.float32(max(abs(v) for row in outer for v in row))
        c = np.float32(clip)
        factor = (np.float32(7) / c) / peak if peak != 0 else np.float32(7)
        scales.append(np.float32(peak * c) / np.float32(7))
        levels = [[min(max(int(np.rint(np.float16(np.float32(v) * factor))), -8), 7) for v in row] for row in outer]
        words.append([_pack_loop(row) for row in levels])
    return words, scales


@pytest.mark.parametrize("dtype", [F16, BF16])
@pytest.mark.parametrize("clip", [1.0, 0.6])
def test_kronecker_quant_against_a_loop(dtype, clip):
    torch.manual_seed(1)
    x = torch.randint(-3, 4, (2, 4, 16)).to(dtype)
    p1 = (torch.randint(-2, 3, (4, 4)) / 2).to(dtype)
    p2 = (torch.randint(-2, 3, (16, 16)) / 4).to(dtype)
    out, scale = npu.npu_kronecker_quant(x, p1, p2, clip)
    words, scales = _kronecker_loop(x, p1.float().numpy(), p2.float().numpy(), clip)
    assert out.dtype == torch.int32 and out.shape == (2, 4, 2) and out.tolist() == words
    assert scale.tolist() == [float(s) for s in scales]


@pytest.mark.usefixtures("torchair")
@pytest.mark.parametrize("dtype", [F16, BF16])
def test_kronecker_quant_compiled(dtype):
    args = (torch.randn(3, 8, 16, dtype=dtype), torch.randn(8, 8, dtype=dtype), torch.randn(16, 16, dtype=dtype))
    check_compiled(lambda a, p, q: npu.npu_kronecker_quant(a, p, q, 0.8), args, ["FlatQuant", "Bitcast"])


@pytest.mark.parametrize("call, match", [
    (lambda: npu.npu_quant_max(torch.randn(2, 8), torch.tensor([1.0]), dst_dtype=290), "hifloat8"),
    (lambda: npu.npu_quant_max(torch.randn(2, 8), torch.tensor([1.0]), round_mode="round"), "rint"),
    (lambda: npu.npu_quant_max(torch.tensor([1.0, float("nan")]), torch.tensor([1.0])), "NaN"),
    (lambda: npu.npu_rotate_quant(torch.zeros(2, 16, dtype=F16), torch.eye(16, dtype=F16)), "all zeros"),
    (lambda: npu.npu_rotate_quant(torch.randn(2, 16, dtype=F16), torch.eye(16, dtype=F16), dst_dtype=291), "MX"),
    (lambda: npu.npu_rotate_quant(torch.randn(2, 16, dtype=F16), torch.eye(16, dtype=F16), round_mode="floor"),
     "rint"),
    (lambda: npu.npu_kronecker_quant(torch.randn(1, 2, 8, dtype=F16), torch.eye(2, dtype=F16),
                                     torch.eye(8, dtype=F16), 1.5), "clip_ratio"),
])
def test_refusals_name_the_op(call, match):
    with pytest.raises((ValueError, NotImplementedError, TypeError), match=match) as error:
        call()
    assert "npu::npu_" in str(error.value)


def test_kronecker_quant_clip_saturates_int4():
    x = torch.tensor([[[1.0, -1.0, 0.5, -0.25, 0.0, 0.125, 1.0, -1.0]]], dtype=F16)
    out, scale = npu.npu_kronecker_quant(x, torch.eye(1, dtype=F16), torch.eye(8, dtype=F16), 0.5)
    # factor (7 / 0.5) / 1 = 14: 14, -14, 7, -3.5, 0, 1.75, 14, -14 -> rint, saturated to [-8, 7]
    assert unpack_int4(out).tolist() == [[[7, -8, 7, -4, 0, 2, 7, -8]]]
    assert_close(scale, torch.tensor([0.5 / 7]), "kernel")


@pytest.mark.usefixtures("torchair")
def test_int4_and_fp8_outputs_with_dynamic_batch():
    rotation, scale = torch.randn(32, 32, dtype=F16), torch.tensor([5.0])
    check_dynamic_sizes(lambda a, r: npu.npu_rotate_quant(a, r, dst_dtype=16),
                        [(torch.randn(n, 128, dtype=F16), rotation) for n in (4, 7)])
    check_dynamic_sizes(lambda a, s: npu.npu_quant_max(a, s), [(torch.randn(n, 64) * 9e3, scale) for n in (3, 9)])


@pytest.mark.usefixtures("torchair")
def test_kronecker_quant_factor_is_seven_over_clip_then_over_max():
    # max 56, clip 0.6: (7 / 0.6) / 56 and 7 / (0.6 * 56) differ in float32's last bit, and -26.390625 times
    # them rounds (through float16) to -6 and -5: the kernel's order (flat_quant_vec.h) gives -6
    x = torch.tensor([[[56.0, -26.390625, 0, 0, 0, 0, 0, 0]]], dtype=F16)
    out, _ = npu.npu_kronecker_quant(x, torch.eye(1, dtype=F16), torch.eye(8, dtype=F16), 0.6)
    assert unpack_int4(out).tolist() == [[[7, -6, 0, 0, 0, 0, 0, 0]]]
    check_compiled(lambda a, p, q: npu.npu_kronecker_quant(a, p, q, 0.6),
                   (x, torch.eye(1, dtype=F16), torch.eye(8, dtype=F16)), "FlatQuant")


def test_cast_to_fp8_rounds_in_range_and_refuses_what_the_saturation_mode_decides():
    x = torch.tensor([1.0625, -448.0, 2.0 ** -10, 3 * 2.0 ** -10])   # ties to even: 1.0, 0, 2^-8
    (got,) = run_node("Cast", [x], [(E4M3, [4])], dst_type=36)
    assert got.view(torch.uint8).tolist() == [0x38, 0xFE, 0x00, 0x02]
    for bad in (500.0, float("inf"), float("nan")):
        with pytest.raises(Exception, match="saturation mode"):
            run_node("Cast", [torch.tensor([bad])], [(E4M3, [1])], dst_type=36)


@pytest.mark.parametrize("number, dtype", [(23, E5M2), (291, E5M2), (24, E4M3), (292, E4M3)])
def test_dtype_cast_to_fp8_in_range(number, dtype):
    x = torch.tensor([1.375, -2.0 ** -17, 3 * 2.0 ** -10, -448.0], dtype=BF16)
    got = npu.npu_dtype_cast(x, number)
    assert got.dtype == dtype
    assert got.view(torch.uint8).tolist() == [_nearest_code(float(v), dtype) for v in x.float().tolist()]
    with pytest.raises(ValueError, match="npu::npu_dtype_cast: .*saturation mode"):
        npu.npu_dtype_cast(torch.tensor([1e5]), number)


@pytest.mark.usefixtures("torchair")
def test_dtype_cast_to_fp8_compiled():
    check_compiled(lambda a: npu.npu_dtype_cast(a, 291), (torch.randn(4, 8, dtype=F16) * 100,), "Cast")

"""MX quantisation ops (issue 23): npu_dynamic_mx_quant, _with_dual_axis, npu_dynamic_block_mx_quant,
npu_dynamic_dual_level_mx_quant, npu_(add_)rms_norm_dynamic_mx_quant, npu_swiglu_mx_quant.

Oracles independent of the code under test: bit patterns computed by hand from the OCP MX spec's e2m1 table
and CANN's DynamicMxQuant doc (its example: bf16 (0, 8, 64, 512) -> e4m3fn codes (0, 72, 96, 120), scale 128),
a per-block loop over Python floats for the e8m0 exponents (math.frexp) and a brute-force nearest-grid-point
search for the elements; then TorchAir's graph (GE mode) against eager, byte for byte."""
import math

import pytest
import torch

from op_plugin._simulator import capture_graphs
from op_plugin._simulator.interpreter.errors import GeExecutionError

F16, BF16 = torch.float16, torch.bfloat16
npu = torch.ops.npu
pytestmark = pytest.mark.usefixtures("torchair")
E2M1_GRID = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]
E2M1, E1M2, E5M2, E4M3FN = 296, 297, 291, 292


def _row(values, dtype=BF16, width=32):
    return torch.tensor([list(values) + [0.0] * (width - len(values))], dtype=dtype)


def _nibbles(packed):
    """uint8 bytes -> codes, low nibble first (written out, not mx_formats.unpack_fp4)."""
    out = []
    for byte in packed.reshape(-1).tolist():
        out += [byte % 16, byte // 16]
    return out


# ---- hand-computed bit patterns -------------------------------------------------------------------------

def test_e2m1_codes_and_nibble_order_by_hand():
    x = _row([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.5, -1, -6, -0.0])
    y, scale = npu.npu_dynamic_mx_quant(x)
    assert y.dtype == torch.uint8 and list(y.shape) == [1, 16] and scale.dtype == torch.uint8
    assert scale.tolist() == [[[127, 0]]]               # max 6: floor(log2 6) - emax(2) = 0 -> 2^0, padded with 0
    assert y[0, :6].tolist() == [0x10, 0x32, 0x54, 0x76, 0xA9, 0x8F]  # element 2i in the low nibble
    y8, scale8 = npu.npu_dynamic_mx_quant(x * 8)
    assert scale8.tolist() == [[[130, 0]]] and torch.equal(y8, y)


@pytest.mark.parametrize("mode,codes", [
    ("rint", [7, 7, 6, 4, 0, 8, 1]),     # 7 -> 8 saturates to 6; 5 and 2.5 are ties to even; +-0.25 -> +-0
    ("round", [7, 7, 7, 5, 1, 9, 1]),    # ties away from zero
    ("floor", [7, 7, 6, 4, 0, 9, 0]),    # toward -inf
])
def test_e2m1_round_modes_and_saturation_by_hand(mode, codes):
    x = _row([7.0, 6.5, 5.0, 2.5, 0.25, -0.25, 0.375], F16)
    y, scale = npu.npu_dynamic_mx_quant(x, round_mode=mode)
    assert scale[0, 0, 0].item() == 127                 # floor(log2 7) = 2 = emax
    assert _nibbles(y)[:7] == codes


def test_cann_doc_example_e4m3fn():
    y, scale = npu.npu_dynamic_mx_quant(_row([0, 8, 64, 512]), dst_type=E4M3FN)
    assert y.dtype == torch.float8_e4m3fn and y.view(torch.uint8)[0, :4].tolist() == [0, 72, 96, 120]
    assert scale.tolist() == [[[128, 0]]]


def test_fp8_saturation_and_ties_by_hand():
    y, scale = npu.npu_dynamic_mx_quant(_row([480, 1.0625, 1.1875], F16), dst_type=E4M3FN)
    assert scale[0, 0, 0].item() == 127 and y.view(torch.uint8)[0, :3].tolist() == [0x7E, 0x38, 0x3A]
    y, scale = npu.npu_dynamic_mx_quant(_row([61440.0], F16), dst_type=E5M2)
    assert scale[0, 0, 0].item() == 127 and y.view(torch.uint8)[0, 0].item() == 0x7B   # 57344, not inf


def test_zero_block_and_cublas_scale_by_hand():
    y, scale = npu.npu_dynamic_mx_quant(_row([-0.0]))
    assert scale[0, 0, 0].item() == 0 and _nibbles(y)[:2] == [8, 0]      # signed zero kept
    # scale_alg 1: S = 1.0 * float32(1/448) has exponent field 118 and a nonzero mantissa -> 119; y = 1 * 2^8
    y, scale = npu.npu_dynamic_mx_quant(_row([1.0]), dst_type=E4M3FN, scale_alg=1)
    assert scale[0, 0, 0].item() == 119 and y.view(torch.uint8)[0, 0].item() == 0x78
    y, scale = npu.npu_dynamic_mx_quant(_row([1.0]), dst_type=E4M3FN, scale_alg=1, max_low_bound=448.0)
    assert scale[0, 0, 0].item() == 127 or scale[0, 0, 0].item() == 128  # 448 * fl(1/448) rounds to 1 -/+ 1 ulp


@pytest.mark.parametrize("dst_type_max,scales,first_bytes", [
    (0.0, [125, 126, 126, 126], [0x17, 0x05, 0x06, 0x06]),   # code up when amax > 1.5 * 2^e (6 = 1.5 * 4)
    (7.0, [125, 125, 125, 126], [0x17, 0x17, 0x07, 0x06]),   # up when amax > 1.75 * 2^e; 7 saturates to 6
])
def test_scale_alg_2_dynamic_dtype_range_by_hand(dst_type_max, scales, first_bytes):
    rows = [[1.5, 0.1], [1.51, 0.1], [1.75, 0.0], [1.8, 0.0]]   # bf16: 1.5078 and 1.7969 for the last two
    x = torch.cat([_row(r) for r in rows])
    y, scale = npu.npu_dynamic_mx_quant(x, scale_alg=2, dst_type_max=dst_type_max)
    assert scale[:, 0, 0].tolist() == scales and y[:, 0].tolist() == first_bytes


# ---- loop oracle ------------------------------------------------------------------------------------------

def _oracle_block(values, emax, grid, max_value):
    """(e8m0 code, element codes) of one block: Python floats, frexp for the exponent, nearest grid point."""
    amax = max(abs(v) for v in values)
    code = 0 if amax == 0 else max(math.frexp(amax)[1] - 1 + 127 - emax, 0)
    out = []
    for v in values:
        t = math.copysign(0.0, v) if code == 0 else min(max(v / 2.0 ** (code - 127), -max_value), max_value)
        best = min(range(len(grid)), key=lambda i: (abs(abs(t) - grid[i]), i % 2))  # ties: even code
        out.append(best | (8 if math.copysign(1, t) < 0 else 0))
    return code, out


def _oracle(x, axis, block=32):
    """Scales [.., nb, ..] and element codes of x (float tensor) along axis, looping block by block."""
    moved = x.double().movedim(axis, -1)
    rows = moved.reshape(-1, moved.shape[-1]).tolist()
    scales, codes = [], []
    for row in rows:
        s_row, c_row = [], []
        for start in range(0, len(row), block):
            s, c = _oracle_block(row[start:start + block], 2, E2M1_GRID, 6.0)
            s_row.append(s)
            c_row += c
        scales.append(s_row)
        codes.append(c_row)
    shape = list(moved.shape)
    codes = torch.tensor(codes, dtype=torch.uint8).reshape(shape).movedim(-1, axis)
    scales = torch.tensor(scales, dtype=torch.uint8).reshape(shape[:-1] + [-1]).movedim(-1, axis)
    return scales, codes


def _scale_blocks(mxscale, axis):
    """CANN's mxscale layout back to one code per block along axis (pairs in the last dim)."""
    axis = axis % (mxscale.dim() - 1)
    return mxscale.movedim(-1, axis + 1).flatten(axis, axis + 1)


@pytest.mark.parametrize("shape,axis,block", [((4, 96), -1, 32), ((3, 70, 6), -2, 32), ((2, 256), -1, 64)])
@pytest.mark.parametrize("dtype", (F16, BF16))
def test_scales_and_elements_against_a_loop(shape, axis, block, dtype):
    x = (torch.randn(shape) * torch.rand(shape[0], *[1] * (len(shape) - 1)) * 40).to(dtype)
    y, mxscale = npu.npu_dynamic_mx_quant(x, axis=axis, block_size=block)
    scales, codes = _oracle(x.float(), axis, block)
    got_scales = _scale_blocks(mxscale, axis)
    assert torch.equal(got_scales.narrow(axis % x.dim(), 0, scales.shape[axis]), scales)
    assert _nibbles(y) == codes.reshape(-1).tolist()


# ---- GE mode against eager --------------------------------------------------------------------------------

def _compiled_equals_eager(fn, *args, ge_type):
    torch._dynamo.reset()
    compiled = torch.compile(fn, backend="npugraph", fullgraph=True)
    with capture_graphs() as graphs:
        got = compiled(*args)
    want = fn(*args)
    assert any(op.type == ge_type for graph in graphs for op in graph.op), ge_type
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        # e8m0 scales are uint8 on both paths (the wheel's Meta; op_plugin's lowering bitcasts TorchAir's e8m0 output)
        assert g.dtype == w.dtype and g.shape == w.shape
        assert torch.equal(g.view(torch.uint8), w.view(torch.uint8)) if g.element_size() == 1 else torch.equal(g, w)
    return want


@pytest.mark.parametrize("kwargs", [
    {}, {"axis": -2}, {"round_mode": "floor"}, {"round_mode": "round", "block_size": 64},
    {"dst_type": E4M3FN}, {"dst_type": E5M2, "axis": 0}, {"dst_type": E4M3FN, "scale_alg": 1},
    {"scale_alg": 2, "dst_type_max": 7.0},
])
@pytest.mark.parametrize("dtype", (F16, BF16))
def test_dynamic_mx_quant_compiled(kwargs, dtype):
    x = (torch.randn(6, 96) * 5).to(dtype)
    _compiled_equals_eager(lambda t: npu.npu_dynamic_mx_quant(t, **kwargs), x, ge_type="DynamicMxQuant")


def test_block_scale_alg_2_by_hand():
    x = torch.zeros(32, 64, dtype=BF16)
    x[3, 5], x[40 % 32, 40] = 1.51, 1.5      # tile (0, 0) max 1.5078 -> raised; tile (0, 1) max 1.5 -> not
    y, scale1, scale2 = _compiled_equals_eager(lambda t: npu.npu_dynamic_block_mx_quant(t, scale_alg=2), x,
                                               ge_type="DynamicBlockMxQuant")
    assert scale1[0, 0].tolist() == [126, 125] and scale2[0, 5].tolist() == [126, 0]


@pytest.mark.parametrize("dst_type", (E2M1, E4M3FN))
def test_dual_axis_and_block_compiled(dst_type):
    x = torch.randn(40, 70).to(BF16)
    y1, s1, y2, s2 = _compiled_equals_eager(lambda t: npu.npu_dynamic_mx_quant_with_dual_axis(t, dst_type=dst_type),
                                            x, ge_type="DynamicMxQuantWithDualAxis")
    eager = [npu.npu_dynamic_mx_quant(x, axis=a, dst_type=dst_type) for a in (-1, -2)]
    assert torch.equal(y1.view(torch.uint8), eager[0][0].view(torch.uint8)) and torch.equal(s2.view(torch.uint8),
                                                                                             eager[1][1])
    y, scale1, scale2 = _compiled_equals_eager(lambda t: npu.npu_dynamic_block_mx_quant(t, dst_type=dst_type), x,
                                               ge_type="DynamicBlockMxQuant")
    blocks = x.float().abs()
    for i in range(2):       # one scale per 32 x 32 tile: the exponent of its max, broadcast along rows and cols
        for j in range(3):
            tile_max = float(blocks[32 * i:32 * i + 32, 32 * j:32 * j + 32].max())
            want = max(math.frexp(tile_max)[1] - 1 + 127 - (2 if dst_type == E2M1 else 8), 0)
            assert scale1.view(torch.uint8)[32 * i, j // 2, j % 2].item() == want
            assert scale2.view(torch.uint8)[i // 2, 32 * j, i % 2].item() == want


def test_rms_norm_rounds_y_to_x_dtype_before_quantising():
    """x all ones: x * rstd = 1/sqrt(1 + 1e-6) = 0.9999995 in float32. y0 = 3.5 - that = 2.5000005 is 2.5 in float16,
    a tie that rint takes down to 2 (code 4; 3 from float32); y1 = 4 + that = 5.0 in float16 (scale 2^0), 5 / 2
    ties to 2 -> 4 (code 6). Hand-computed byte: 0x64 (0x65 if y were quantised in float32)."""
    gamma, beta = torch.zeros(32).half(), torch.zeros(32).half()
    gamma[0], beta[0], gamma[1], beta[1] = -1, 3.5, 1, 4
    y, mxscale, _ = npu.npu_rms_norm_dynamic_mx_quant(torch.ones(1, 32).half(), gamma, beta=beta)
    assert mxscale[0, 0, 0].item() == 127 and y[0, 0].item() == 0x64


@pytest.mark.parametrize("beta", (False, True))
def test_rms_norm_mx_quant(beta):
    x1, x2 = torch.randn(3, 64).half(), torch.randn(3, 64).half()
    gamma, b = torch.rand(64).half() + 0.5, (torch.randn(64).half() if beta else None)
    y, x_out, mxscale, rstd = _compiled_equals_eager(
        lambda p, q, g: npu.npu_add_rms_norm_dynamic_mx_quant(p, q, g, beta=b), x1, x2, gamma,
        ge_type="AddRmsNormDynamicMxQuant")
    s = x1.double() + x2.double()
    want_rstd = 1 / torch.sqrt((s * s).mean(-1, keepdim=True) + 1e-6)
    normed = (s * want_rstd * gamma.double() + (b.double() if beta else 0)).half()
    scales, codes = _oracle(normed.float(), -1)
    assert torch.allclose(rstd.double(), want_rstd, rtol=1e-6) and torch.equal(x_out, (x1.float() + x2.float()).half())
    assert (torch.tensor(_nibbles(y)) == codes.reshape(-1)).float().mean() > 0.98   # float32 vs float64 norm
    assert torch.equal(_scale_blocks(mxscale, -1)[..., :2], scales)
    single = _compiled_equals_eager(lambda p, g: npu.npu_rms_norm_dynamic_mx_quant(p, g, beta=b), x1, gamma,
                                    ge_type="RmsNormDynamicMxQuant")
    two_ops = npu.npu_dynamic_mx_quant(npu.npu_rms_norm(x1, gamma)[0] + (b if beta else 0))
    assert (single[0] == two_ops[0]).float().mean() > 0.95 and torch.equal(single[1], two_ops[1])


@pytest.mark.parametrize("kwargs", [{}, {"activate_left": True}, {"swiglu_mode": 1, "clamp_limit": 2.0},
                                    {"dst_type": E4M3FN, "axis": -2}])
def test_swiglu_mx_quant(kwargs):
    x = (torch.randn(64, 128) * 2).half()
    y, mxscale = _compiled_equals_eager(lambda t: npu.npu_swiglu_mx_quant(t, **kwargs), x, ge_type="SwigluMxQuant")
    if kwargs.get("dst_type") or kwargs.get("swiglu_mode"):
        return
    a, b = x.double().chunk(2, dim=-1)
    a, b = (a, b) if kwargs.get("activate_left") else (b, a)
    out = (torch.nn.functional.silu(a) * b).half()
    scales, codes = _oracle(out.float(), -1)
    assert torch.equal(_scale_blocks(mxscale, -1), scales)
    assert (torch.tensor(_nibbles(y)) == codes.reshape(-1)).float().mean() > 0.99


def test_swiglu_mx_quant_group_index():
    x = torch.randn(128, 64).half()
    counts = torch.tensor([10, 0, 54, 64])
    y, mxscale = _compiled_equals_eager(lambda t, g: npu.npu_swiglu_mx_quant(t, group_index=g, axis=-2), x, counts,
                                        ge_type="SwigluMxQuant")
    assert list(mxscale.shape) == [128 // 64 + 4, 32, 2]
    a, b = x.float().chunk(2, dim=-1)
    act = (b / (1 + torch.exp(-b)) * a).half().float()
    offset, start = 0, 0
    for rows in counts.tolist():    # the kernel's cumuScaleOffset: each group's pairs follow the previous ones
        for block, first in enumerate(range(start, start + rows, 32)):
            for col in range(32):
                amax = float(act[first:min(first + 32, start + rows), col].abs().max())
                want = max(math.frexp(amax)[1] - 1 + 127 - 2, 0)
                assert mxscale[offset + block // 2, col, block % 2].item() == want
        offset, start = offset + (rows + 63) // 64, start + rows
    assert mxscale[offset:].eq(0).all()
    grouped, plain = npu.npu_swiglu_mx_quant(x, group_index=counts), npu.npu_swiglu_mx_quant(x)
    assert all(torch.equal(g, w) for g, w in zip(grouped, plain, strict=True))   # axis -1: groups change nothing


def test_dual_level_mx_quant():
    x = (torch.randn(4, 1024) * torch.tensor([1.0, 100.0]).repeat_interleave(512)).half()
    y, level0, level1 = _compiled_equals_eager(lambda t: npu.npu_dynamic_dual_level_mx_quant(t), x,
                                               ge_type="DynamicDualLevelMxQuant")
    want0 = x.double().reshape(4, 2, 512).abs().amax(-1) / 6
    assert torch.allclose(level0.double(), want0, rtol=1e-6)
    temp = (x.double().reshape(4, 2, 512) / want0.unsqueeze(-1)).reshape(4, 1024).half()
    scales, codes = _oracle(temp.float(), -1)
    assert torch.equal(_scale_blocks(level1.view(torch.uint8), -1), scales)
    assert (torch.tensor(_nibbles(y)) == codes.reshape(-1)).float().mean() > 0.99


def test_anti_mx_quant_doc_example_and_round_trip():
    x = torch.tensor([[0, 72, 96, 120] + [0] * 28], dtype=torch.uint8).view(torch.float8_e4m3fn)
    y = npu.npu_anti_mx_quant(x, torch.tensor([[[128, 0]]], dtype=torch.uint8))    # aclnnAntiMxQuant's example
    assert y.dtype == BF16 and y.view(torch.int16)[0, :4].tolist() == [0, 16640, 17024, 17408]
    source = (torch.randn(6, 100) * 3).half()
    for axis, dst, src in ((-1, E2M1, 296), (0, E4M3FN, 292)):
        q, scale = npu.npu_dynamic_mx_quant(source, axis=axis, dst_type=dst)
        back = npu.npu_anti_mx_quant(q, scale, axis=axis, src_type=src, dst_type=6)
        if dst == E2M1:
            elements = torch.tensor([E2M1_GRID[c % 8] * (-1 if c >= 8 else 1) for c in _nibbles(q)]).reshape(6, 100)
        else:
            elements = q.float()
        codes = _scale_blocks(scale, axis).movedim(axis, -1).tolist()
        for index in range(source.numel()):       # x * 2^(code of its block - 127), element by element
            r, c = divmod(index, 100)
            row, pos = (r, c) if axis == -1 else (c, r)
            want = float(elements[r, c]) * 2.0 ** (codes[row][pos // 32] - 127)
            assert float(back[r, c]) == want
        assert (back - source.float()).abs().max() <= source.float().abs().max() / 2   # saturation at most
    _compiled_equals_eager(lambda a, b: (npu.npu_anti_mx_quant(a, b, axis=0, dst_type=5),), q, scale,
                           ge_type="AntiMxQuant")


def test_anti_mx_quant_of_fp4_fails_in_torchair_graph():
    """TorchAir's converter multiplies Shape(x) (int32) by an int64 Const to unpack fp4: GE's Mul takes one
    dtype, so the graph fails as it would on an NPU (TorchAir declares no case for this converter)."""
    q, scale = npu.npu_dynamic_mx_quant(torch.randn(2, 64).half())
    compiled = torch.compile(lambda a, b: npu.npu_anti_mx_quant(a, b, src_type=296), backend="npugraph")
    with pytest.raises(GeExecutionError, match="Mul.*one dtype"):
        compiled(q, scale)


def test_grouped_dynamic_mx_quant_scale_rows_by_hand():
    x = (torch.randn(100, 16) * 10).half()
    ends = [10, 10, 75, 100]          # groups of 10, 0, 65 and 25 rows
    _compiled_equals_eager(lambda a, b: npu.npu_grouped_dynamic_mx_quant(a, b), x,
                           torch.tensor(ends, dtype=torch.int32), ge_type="GroupedDynamicMxQuant")
    y, scale = npu.npu_grouped_dynamic_mx_quant(x, torch.tensor(ends, dtype=torch.int32), dst_type=24)
    assert list(scale.shape) == [100 // 64 + 4, 16, 2]
    written = set()
    start = 0
    for g, end in enumerate(ends):   # the kernel's scaleOffset: row start // 64 + g, blocks of 32 from start
        for block, first in enumerate(range(start, end, 32)):
            for col in range(16):
                amax = max(abs(float(v)) for v in x[first:min(first + 32, end), col])
                want = max(math.frexp(amax)[1] - 1 + 127 - 8, 0)
                row = start // 64 + g + block // 2
                assert scale[row, col, block % 2].item() == want
                written.add(row)
        start = end
    assert all(scale[row].eq(0).all() for row in range(scale.shape[0]) if row not in written)
    with pytest.raises(ValueError, match="npu_grouped_dynamic_mx_quant.*group_index"):
        npu.npu_grouped_dynamic_mx_quant(x, torch.tensor([60, 50, 100], dtype=torch.int32))


def test_dynamic_shapes_compile_once():
    from op_plugin._testing_harness import Npugraph

    compiled = Npugraph(lambda t: npu.npu_dynamic_mx_quant(t), dynamic=True)
    for rows in (4, 7):
        x = torch.randn(rows, 64).half()
        got, want = compiled.compiled(x), npu.npu_dynamic_mx_quant(x)
        assert torch.equal(got[0], want[0]) and got[1].dtype == torch.uint8 and torch.equal(got[1], want[1])
    assert compiled.compiles == 1


# ---- refusals ---------------------------------------------------------------------------------------------

def test_refusals_name_the_op_and_case():
    with pytest.raises(ValueError, match="npu_rms_norm_dynamic_mx_quant.*last dim even"):
        npu.npu_rms_norm_dynamic_mx_quant(torch.randn(4, 3).half(), torch.rand(3).half())
    with pytest.raises(NotImplementedError, match="npu_dynamic_mx_quant.*dst_type_max=9.0 with scale_alg=2"):
        npu.npu_dynamic_mx_quant(torch.randn(2, 32).half(), scale_alg=2, dst_type_max=9.0)
    with pytest.raises(NotImplementedError, match="npu_dynamic_mx_quant_with_dual_axis.*scale_alg=2"):
        npu.npu_dynamic_mx_quant_with_dual_axis(torch.randn(32, 32).half(), scale_alg=2)
    with pytest.raises(ValueError, match="npu_dynamic_mx_quant.*inf/NaN"):
        npu.npu_dynamic_mx_quant(torch.tensor([[float("inf")] * 32]).half())
    with pytest.raises(ValueError, match="npu_dynamic_mx_quant.*round_mode"):
        npu.npu_dynamic_mx_quant(torch.randn(2, 32).half(), dst_type=E4M3FN, round_mode="floor")
    with pytest.raises(ValueError, match="npu_swiglu_mx_quant.*group_index counts"):
        npu.npu_swiglu_mx_quant(torch.randn(4, 64).half(), group_index=torch.tensor([3]))   # row 3 unwritten
    with pytest.raises(NotImplementedError, match="npu_swiglu_mx_quant.*group_mode=1"):
        npu.npu_swiglu_mx_quant(torch.randn(4, 64).half(), group_index=torch.tensor([4]), group_mode=1)
    compiled = torch.compile(lambda t: npu.npu_dynamic_mx_quant(t, dst_type=E1M2), backend="npugraph")
    with pytest.raises(GeExecutionError, match="DT_FLOAT4_E1M2"):
        compiled(torch.randn(2, 32).half())
    y, _ = npu.npu_dynamic_mx_quant(_row([1.75, 0.125], F16), dst_type=E1M2)   # eager computes e1m2
    assert _nibbles(y)[:2] == [7, 0]       # emax 0: scale 2^0, 1.75 = code 7, 0.125 ties to 0


def test_bitcast_fp4_round_trip():
    from op_plugin._simulator.interpreter.lowbit_formats import bitcast_fp4

    codes = torch.tensor([[1, 2, 15, 8]], dtype=torch.uint8).view(torch.float4_e2m1fn_x2)
    packed = bitcast_fp4(codes.reshape(1, 2, 2), torch.uint8, keep_dim=False)
    assert packed.tolist() == [[0x21, 0x8F]]
    assert torch.equal(bitcast_fp4(packed, torch.float4_e2m1fn_x2, keep_dim=True).view(torch.uint8),
                       codes.view(torch.uint8))

"""torch_npu's ops against CANN's own CPU goldens (issue 34), eager and compiled with npugraph.

Each test builds an oracle of its own from a golden CANN publishes beside the kernel (the file and function
are named in the test), runs the npu op eagerly and through TorchAir's graph (`assert_op_eager_equals_graph`:
the graph's bits equal eager's, outputs' dtypes and shapes included), and compares eager's numbers with the
oracle under CANN's comparison rule for that op and dtype: an element fails when |got - want| > atol +
rtol * |want|, and the output passes when no element fails or fewer than `ratio` of them do
(`compare_data.py` of ops-transformer's MoE goldens; ops-nn's `tests/st/.../ttk_*.csv` column
`precision_tolerances` = (rtol, ratio), `absolute_precision` = atol). Where the oracle reproduces the kernel's
rounding step by step the result must also be bit-exact, which is stricter than CANN's rule and catches 1-ulp
departures its rule lets through.

Where the golden writes nothing (the bfloat16 MoeFinalizeRouting) the oracle follows the Ascend910B (A2) kernel and
says so. Where CANN's kernels disagree with each other and the golden (MoeFinalizeRoutingV2's dropped tokens with a
bias), the golden is the oracle."""
import pytest
import torch

from op_plugin._simulator.interpreter.errors import GeExecutionError

from .graph_equal import assert_op_eager_equals_graph

pytestmark = pytest.mark.usefixtures("torchair")
npu = torch.ops.npu
F16, BF16, F32 = torch.float16, torch.bfloat16, torch.float32


def assert_cann_close(got, want, rtol, ratio, atol=0.0, what="output"):
    """CANN's comparison: np.isclose(got, want, rtol, atol) per element; pass if none fails or the failing
    fraction is below `ratio` (ops-transformer moe/moe_finalize_routing/tests/ut/op_kernel/finalize_routing_data/
    compare_data.py `compare_data`; ops-nn's ttk csv (rtol, ratio) pairs read the same way)."""
    assert got.shape == want.shape and got.dtype == want.dtype, f"{what}: {got.dtype}{list(got.shape)} vs " \
                                                                f"{want.dtype}{list(want.shape)}"
    g, w = got.double(), want.double()
    bad = ~((g - w).abs() <= atol + rtol * w.abs()) & ~(torch.isnan(g) & torch.isnan(w))
    fraction = float(bad.sum()) / max(1, bad.numel())
    assert not bool(bad.any()) or fraction < ratio, f"{what}: {fraction:.2%} of the elements fail CANN's rule " \
                                                    f"(rtol {rtol}, ratio {ratio}); max diff {(g - w).abs().max()}"


def _eager_and_graph(name, ge_type, args, kwargs=None):
    """The op's eager outputs, after checking its compiled graph gives the same bits."""
    kwargs = kwargs or {}
    assert_op_eager_equals_graph(name, ge_type, lambda: ([a.clone() if isinstance(a, torch.Tensor) else a
                                                          for a in args], kwargs))
    op = getattr(torch.ops.npu, name)
    return op(*args, **kwargs)


# ---- MoeFinalizeRouting(V2) -------------------------------------------------------------------------------------

# ops-transformer moe/moe_finalize_routing*/tests/ut/op_kernel/finalize_routing*_data/compare_data.py: float16
# rtol 1/1000 and ratio 1/1000; every other dtype 1/10000.
_FINALIZE_RULE = {F16: (1e-3, 1e-3), F32: (1e-4, 1e-4), BF16: (1e-4, 1e-4)}


def _finalize_golden(expanded, skip1, skip2, bias, scales, rows, experts):
    """gen_data.py's `moe_finalize_routing` / `moe_finalize_routing_v2` (ops-transformer moe/moe_finalize_routing
    (_v2)/tests/ut/op_kernel/finalize_routing*_data/gen_data.py), vectorised over the rows, in the inputs' dtype as
    numpy computes it (every + and * rounded to float16 / float32): out = skip1 (+ skip2); for each k,
    out += scales[i, k] * (expanded[rows[k * N + i]] + bias[experts[i, k]]). The V2 golden reads a row index -1
    (a dropped token) as a zero row, so it still adds scales * bias (A2's H-splitting fp_cuth kernel does too; the
    kernels keeping H whole skip the row: routing.py's docstring)."""
    flat = expanded.reshape(-1, expanded.shape[-1])
    n, k = scales.shape
    out = skip1.clone() if skip2 is None else skip1 + skip2
    for j in range(k):
        index = rows[j * n:(j + 1) * n].long()
        dropped = (index < 0).unsqueeze(-1)
        row = torch.where(dropped, torch.zeros((), dtype=flat.dtype), flat[index.clamp(min=0)])
        out = out + scales[:, j:j + 1] * (row + bias[experts[:, j].long()])
    return out


def _finalize_inputs(dtype, n=24, k=4, e=6, h=40, seed=5):
    g = torch.Generator().manual_seed(seed)
    rand = lambda *shape: torch.randn(*shape, generator=g).to(dtype)   # noqa: E731
    rows = torch.randperm(n * k, generator=g).to(torch.int32)
    experts = torch.randint(0, e, (n, k), generator=g, dtype=torch.int32)
    return rand(n * k, h), rand(n, h), rand(n, h), rand(e, h), rand(n, k), rows, experts


@pytest.mark.parametrize("dtype", [F16, F32])
def test_moe_finalize_routing_against_cann_golden(dtype):
    """MoeFinalizeRouting (skip1, skip2, bias, scales, drop_pad_mode 0: TorchAir's V1 node). Float16 rounds at
    every step as the A2 kernel does (moe_finalize_routing_fp_db.h: Add, Muls, Add in half); the simulator
    accumulated in float32 before issue 34, and 14-17% of the float16 elements failed CANN's own rule."""
    expanded, skip1, skip2, bias, scales, rows, experts = _finalize_inputs(dtype)
    got = _eager_and_graph("npu_moe_finalize_routing", "MoeFinalizeRouting",
                           (expanded, skip1, skip2, bias, scales, rows, experts))
    want = _finalize_golden(expanded, skip1, skip2, bias, scales, rows, experts)
    assert_cann_close(got, want, *_FINALIZE_RULE[dtype])
    assert torch.equal(got, want)   # the kernel's order and rounding, so bit for bit


@pytest.mark.parametrize("dtype,h", [(F16, 16), (F32, 8192)])
def test_moe_finalize_routing_v2_drop_pad_against_cann_golden(dtype, h):
    """MoeFinalizeRoutingV2, drop_pad_mode 1 (column-major indices, as the V2 golden reads them), some tokens
    dropped (-1): a dropped token still adds scales * bias, as the V2 golden computes (issue 34: the simulator
    added nothing, silently). H = 8192 in float32 is a row A2 splits (fp_cuth): the same numbers."""
    n, k, e, capacity = 6, 2, 3, 4
    expanded, skip1, skip2, bias, scales, _, experts = _finalize_inputs(dtype, n=n, k=k, e=e, h=h, seed=7)
    expanded = torch.randn(e, capacity, h).to(dtype)
    rows = torch.randperm(e * capacity)[:n * k].to(torch.int32)
    rows[[1, 4, 9]] = -1
    call = (expanded, skip1, skip2, bias, scales, rows, experts, 1, k)
    got = _eager_and_graph("npu_moe_finalize_routing", "MoeFinalizeRoutingV2", call)
    want = _finalize_golden(expanded, skip1, skip2, bias, scales, rows, experts)
    assert_cann_close(got, want, *_FINALIZE_RULE[dtype])
    assert torch.equal(got, want)


def test_moe_finalize_routing_skip2_without_skip1_is_refused_on_both_paths():
    """aclnnMoeFinalizeRoutingV2 (constraint 4) and A2's tiling (moe_finalize_routing_v2_tiling_membase.cpp:
    "In the case of x1 parameter is not input, x2 parameter can't be inputted either.") refuse x2 without x1,
    although the V2 golden and kernel code would compute it."""
    expanded, _, skip2, bias, scales, rows, experts = _finalize_inputs(F32, n=4, k=2, e=3, h=8)
    with pytest.raises(ValueError, match="npu_moe_finalize_routing.*skip2.*without x1"):
        npu.npu_moe_finalize_routing(expanded, None, skip2, bias, scales, rows, experts, 0, 2)
    torch._dynamo.reset()
    compiled = torch.compile(lambda *a: npu.npu_moe_finalize_routing(a[0], None, *a[1:], 0, 2), backend="npugraph")
    with pytest.raises(GeExecutionError, match="MoeFinalizeRoutingV2.*without x1"):
        compiled(expanded, skip2, bias, scales, rows, experts)


@pytest.mark.parametrize("v1", [True, False])
def test_moe_finalize_routing_bfloat16_rounds_once_as_its_kernel(v1):
    """bfloat16 (no golden output: gen_data.py writes float16/float32 goldens only): the A2 kernels accumulate in
    float32 and round once, MoeFinalizeRouting half away from zero (moe_finalize_routing_bf16*.h, CAST_ROUND),
    V2 half to even (moe_finalize_routing_v2_bf16*.h, CAST_RINT). 1 + 2^-8 is a tie between bfloat16 neighbours."""
    one = torch.ones(1, 2, dtype=BF16)
    expanded = torch.full((1, 2), 2.0 ** -8, dtype=BF16)
    rows, experts = torch.zeros(1, dtype=torch.int32), torch.zeros(1, 1, dtype=torch.int32)
    zero_bias, unit = torch.zeros(1, 2, dtype=BF16), torch.ones(1, 1, dtype=BF16)
    if v1:
        got = _eager_and_graph("npu_moe_finalize_routing", "MoeFinalizeRouting",
                               (expanded, one, None, zero_bias, unit, rows, experts))
    else:
        got = _eager_and_graph("npu_moe_finalize_routing", "MoeFinalizeRoutingV2",
                               (expanded, one, None, None, unit, rows, None, 2, 1))
    assert got.float().tolist() == ([[1 + 2.0 ** -7] * 2] if v1 else [[1.0] * 2])
    expanded, skip1, skip2, bias, scales, rows, experts = _finalize_inputs(BF16)
    got = npu.npu_moe_finalize_routing(expanded, skip1, skip2, bias, scales, rows, experts)
    want = _finalize_golden(*(t.float() if t.is_floating_point() else t
                              for t in (expanded, skip1, skip2, bias, scales, rows, experts)))
    assert_cann_close(got, want.to(BF16), *_FINALIZE_RULE[BF16])


# ---- AddRmsNorm(Cast), RmsNorm ----------------------------------------------------------------------------------

def _add_rms_norm_golden(x1, x2, gamma, eps=1e-6):
    """ops-nn norm/add_rms_norm/tests/assets/golden.py `add_rms_golden_v1` (its Ascend910B / 910_93 branch): x in
    the input dtype, rstd float32, `x * rstd` rounded to the input dtype before gamma (float16: a float16
    multiply; bfloat16: in float32), the product rounded; add_rms_norm_cast's y_fp32 = float32(y)."""
    x = (x1.float() + x2.float()).to(x1.dtype)
    wide = x.float()
    rstd = torch.rsqrt(wide.pow(2).mean(-1, keepdim=True) + eps)
    tmp = wide * rstd
    if x1.dtype in (F16, BF16):
        tmp = tmp.to(x1.dtype).float()
    y = (tmp * gamma.float()).to(x1.dtype)
    return y, rstd, x


# ops-nn norm/add_rms_norm/tests/st/arch35/ttk_kernel_add_rms_norm_st.csv: (0.005, 0.005) for float16 and
# bfloat16, (0.0005, 0.0005) for float32; norm/add_rms_norm_cast/.../ttk_kernel_add_rms_norm_cast_st.csv: y_fp32
# and y (0.005, 0.005) in its most common bfloat16 rows, rstd (0.0005, 0.0005).
_NORM_RULE = {F16: (5e-3, 5e-3), BF16: (5e-3, 5e-3), F32: (5e-4, 5e-4)}


@pytest.mark.parametrize("dtype", [F16, BF16])
def test_add_rms_norm_and_cast_against_cann_golden(dtype):
    """AddRmsNorm and AddRmsNormCast round `x * rstd` before gamma on A2 (1 ulp from the float32 product on a
    quarter of the elements, visible in the cast op's float32 output); bit for bit with the golden's A2 branch."""
    g = torch.Generator().manual_seed(3)
    x1, x2 = (torch.randn(8, 96, generator=g).to(dtype) for _ in range(2))
    gamma = (torch.rand(96, generator=g) + 0.5).to(dtype)
    y, rstd, x = _eager_and_graph("npu_add_rms_norm", "AddRmsNorm", (x1, x2, gamma))
    want_y, want_rstd, want_x = _add_rms_norm_golden(x1, x2, gamma)
    for got, want, what in ((y, want_y, "y"), (rstd, want_rstd, "rstd"), (x, want_x, "x")):
        assert_cann_close(got, want, *_NORM_RULE[dtype], what=what)
        assert torch.equal(got, want), what
    y_fp32, y2, _, _ = _eager_and_graph("npu_add_rms_norm_cast", "AddRmsNormCast", (x1, x2, gamma))
    assert_cann_close(y_fp32, want_y.float(), *_NORM_RULE[BF16], what="y_fp32")
    assert torch.equal(y_fp32, want_y.float()) and torch.equal(y2, want_y)


def test_rms_norm_against_cann_golden():
    """RmsNorm stays float32 to the end on A2 (ops-nn norm/rms_norm/tests/assets/golden.py `rms_norm_golden`:
    x * (1 / sqrt(mean(x^2) + eps)) * gamma in float32, rounded once); CANN's rule from
    norm/rms_norm/tests/st/arch35/ttk_kernel_rms_norm_st.csv (float16: (0.005, 0.005))."""
    x, gamma = torch.randn(6, 128).half(), (torch.rand(128) + 0.5).half()
    y, rstd = _eager_and_graph("npu_rms_norm", "RmsNorm", (x, gamma))
    wide = x.float()
    want_rstd = 1 / torch.sqrt(wide.pow(2).mean(-1, keepdim=True) + 1e-6)
    assert_cann_close(y, (wide * want_rstd * gamma.float()).half(), 5e-3, 5e-3, what="y")
    assert_cann_close(rstd, want_rstd, 1e-4, 1e-4, what="rstd")   # the csv's float32 row


# ---- SwiGLU, DynamicQuant ---------------------------------------------------------------------------------------

def test_swiglu_against_cann_golden():
    """ops-nn activation/swi_glu/tests/assets/golden.py `swi_glu_golden`: silu(a) * b in float32 on the two
    halves along dim, rounded once; rule from activation/swi_glu/tests/st/arch35/ttk_kernel_swi_glu_st.csv
    (bfloat16 (0.001, 0.001))."""
    x = torch.randn(5, 64).to(BF16)
    got = _eager_and_graph("npu_swiglu", "SwiGlu", (x,))
    a, b = x.float().chunk(2, dim=-1)
    assert_cann_close(got, (torch.nn.functional.silu(a) * b).to(BF16), 1e-3, 1e-3)


def test_dynamic_quant_against_cann_golden():
    """ops-nn quant/dynamic_quant/tests/assets/golden.py `_dynamic_quant_common` (per token, symmetric, int8):
    scale = max|x * smooth| * float32(1/127), y = round(x * smooth / scale); rule (0.001, 0.001) from
    quant/dynamic_quant/tests/st/arch35/ttk_kernel_dynamic_quant_st.csv."""
    x, smooth = torch.randn(7, 64).half(), (torch.rand(64) + 0.5).half()
    y, scale = _eager_and_graph("npu_dynamic_quant", "DynamicQuant", (x,), {"smooth_scales": smooth})
    scaled = x.float() * smooth.float()
    want_scale = scaled.abs().amax(-1, keepdim=True) * torch.tensor(1.0 / 127.0)
    want_y = torch.round(scaled / want_scale).to(torch.int8)
    assert_cann_close(y, want_y, 1e-3, 1e-3, what="y")
    assert_cann_close(scale, want_scale.squeeze(-1), 1e-3, 1e-3, what="scale")


# ---- DequantSwigluQuant with a bias -----------------------------------------------------------------------------

def _dequant_swiglu_quant_golden(x, weight_scale, activation_scale, bias, quant_scale, bias_rows):
    """ops-nn quant/dequant_swiglu_quant/tests/st/aclnnDequantSwigluQuantV2/executor_aclnnDequantSwigluQuantV2.py
    `golden` (dynamic quant, activate_left, swiglu_mode 0): an int32 bias added to x before the scales, a float
    one after them; silu(a) * b; * quant_scale; scale = rowmax / 127; y = round(clamp(out * 127 / rowmax))."""
    res = x.float()
    if bias.dtype == torch.int32:
        res = res + bias_rows.float()
    res = res * weight_scale.float() * activation_scale.float().reshape(-1, 1)
    if bias.dtype != torch.int32:
        res = res + bias_rows.float()
    a, b = res.chunk(2, dim=-1)
    out = torch.nn.functional.silu(a) * b * quant_scale.float()
    rowmax = out.abs().amax(-1)
    y = torch.round(torch.clamp(out * (127 / rowmax).unsqueeze(1), -128, 127)).to(torch.int8)
    return y, rowmax / 127


@pytest.mark.parametrize("bias_dtype", [torch.int32, F32])
def test_dequant_swiglu_quant_with_bias_against_cann_golden(bias_dtype):
    """A bias (refused before issue 34): CANN's golden adds an int32 bias to x, then the scales, a float bias after
    them (and so does the A2 kernel, op_kernel/dequant_swiglu_quant.h `ComputeDequant`). Rule from
    quant/dequant_swiglu_quant/tests/st/arch35/ttk_kernel_dequant_swiglu_quant.csv: (0.05, 0.001), atol 0.05."""
    g = torch.Generator().manual_seed(11)
    tokens, width = 6, 32
    x = torch.randint(-300, 300, (tokens, width), generator=g, dtype=torch.int32)
    weight_scale = torch.rand(1, width, generator=g) * 0.01 + 0.001
    activation_scale = torch.rand(tokens, generator=g) + 0.5
    quant_scale = torch.rand(1, width // 2, generator=g) + 0.5
    bias = (torch.randint(-50, 50, (width,), generator=g, dtype=torch.int32) if bias_dtype == torch.int32
            else torch.randn(width, generator=g))
    kwargs = dict(weight_scale=weight_scale, activation_scale=activation_scale, bias=bias, quant_scale=quant_scale,
                  activate_left=True, quant_mode=1)
    y, scale = _eager_and_graph("npu_dequant_swiglu_quant", "DequantSwigluQuant", (x,), kwargs)
    want_y, want_scale = _dequant_swiglu_quant_golden(x, weight_scale, activation_scale, bias, quant_scale,
                                                      bias.reshape(1, -1))
    assert_cann_close(y, want_y, 0.05, 1e-3, atol=0.05, what="y")
    assert_cann_close(scale, want_scale, 0.05, 1e-3, atol=0.05, what="scale")
    without, _ = npu.npu_dequant_swiglu_quant(x, **{**kwargs, "bias": None})
    assert not torch.equal(y, without)   # the bias reaches the result


def test_dequant_swiglu_quant_groups_take_their_bias_row():
    """With group_index the bias is [groups, 2H] (aclnnDequantSwigluQuant.md), the kernel reading row `groupIdx`
    (dequant_swiglu_quant.h `CopyInBias`)."""
    x = torch.randint(-100, 100, (5, 16), dtype=torch.int32)
    weight_scale, activation_scale = torch.rand(2, 16) * 0.01 + 0.001, torch.rand(5) + 0.5
    bias, quant_scale = torch.randint(-20, 20, (2, 16), dtype=torch.int32), torch.rand(2, 8) + 0.5
    y, scale = npu.npu_dequant_swiglu_quant(x, weight_scale=weight_scale, activation_scale=activation_scale,
                                            bias=bias, quant_scale=quant_scale, group_index=torch.tensor([2, 3]),
                                            activate_left=True, quant_mode=1)
    for rows, group in ((slice(0, 2), 0), (slice(2, 5), 1)):
        want_y, want_scale = _dequant_swiglu_quant_golden(x[rows], weight_scale[group], activation_scale[rows],
                                                          bias, quant_scale[group], bias[group].reshape(1, -1))
        assert_cann_close(y[rows], want_y, 0.05, 1e-3, atol=0.05, what="y")
        assert_cann_close(scale[rows], want_scale, 0.05, 1e-3, atol=0.05, what="scale")


# ---- QuantUpdateScatter -----------------------------------------------------------------------------------------

def test_quant_scatter_against_cann_golden():
    """ops-nn index/quant_update_scatter/tests/assets/golden.py `quant_update_scatter_golden` (int8 var): updates /
    quant_scales + zero points in float32, np.round, clip to int8, written at var[i, idx[i]:idx[i] + U]; rule
    from index/quant_update_scatter/tests/st/arch35/ttk_kernel_quant_update_scatter_st.csv: exact (0, 0)."""
    var = torch.randint(-128, 128, (3, 8, 32), dtype=torch.int8)
    indices, updates = torch.tensor([5, 0, 2], dtype=torch.int32), torch.randn(3, 2, 32).half() * 20
    scales, zero_points = torch.rand(32) + 0.5, torch.randint(-5, 5, (32,), dtype=torch.int32)
    got = _eager_and_graph("npu_quant_scatter", "QuantUpdateScatter", (var, indices, updates, scales, zero_points))
    want = var.clone()
    values = torch.round(updates.float() / scales + zero_points.float()).clamp(-128, 127).to(torch.int8)
    for i, start in enumerate(indices.tolist()):
        want[i, start:start + 2] = values[i]
    assert_cann_close(got, want, 0.0, 0.0)
    assert torch.equal(got, want)


@pytest.mark.parametrize("updates_dtype,scales_dtype", [(F16, F16), (F16, BF16), (BF16, F32)])
def test_quant_scatter_refuses_what_cann_has_no_kernel_for_on_both_paths(updates_dtype, scales_dtype):
    """CANN's combinations (quant_update_scatter_def.cpp, aclnnInplaceQuantScatter's table): bfloat16 updates with
    bfloat16 scales, float16 updates with float32 scales; any other pair is refused eagerly and in a graph."""
    var, indices = torch.zeros(2, 4, 32, dtype=torch.int8), torch.tensor([0, 1], dtype=torch.int32)
    updates, scales = torch.randn(2, 1, 32).to(updates_dtype), (torch.rand(32) + 0.5).to(scales_dtype)
    with pytest.raises(ValueError, match="npu_quant_scatter.*quant_scales"):
        npu.npu_quant_scatter(var, indices, updates, scales)
    torch._dynamo.reset()
    compiled = torch.compile(lambda *a: npu.npu_quant_scatter(*a), backend="npugraph")
    with pytest.raises(GeExecutionError, match="QuantUpdateScatter.*quant_scales"):
        compiled(var, indices, updates, scales)


# ---- one contract per op: dtypes and graphs ---------------------------------------------------------------------

def test_fusion_attention_float32_one_contract():
    """float32 q/k/v: torch_npu's doc (`_op_plugin_docs.py`: float16, bfloat16, float32), aclnnFlashAttentionScore
    and CANN's op definition for ascend910b (ops-transformer attention/flash_attention_score/op_host/
    flash_attention_score_def.cpp: DT_FLOAT) take it; so do eager and the graph, with the same bits."""
    q = torch.randn(1, 4, 16)
    out = _eager_and_graph("npu_fusion_attention", "FlashAttentionScore", (q, q, q, 2, "BSH"), {"scale": 0.25})
    assert out[0].dtype == F32


def test_dynamic_mx_quant_scale_dtype_is_the_wheels_on_both_paths():
    """torch-npu 2.13.0's Meta (op_plugin/meta/_meta_registrations.py `npu_dynamic_mx_quant`) returns mxscale as
    uint8; TorchAir's graph gave float8_e8m0fnu until op_plugin's lowering bitcast it (quant_converters.py)."""
    x = torch.randn(4, 64).half()
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode() as mode:
        meta = npu.npu_dynamic_mx_quant(mode.from_tensor(x))
    y, scale = _eager_and_graph("npu_dynamic_mx_quant", "DynamicMxQuant", (x,))
    assert (y.dtype, scale.dtype) == (meta[0].dtype, meta[1].dtype) == (torch.uint8, torch.uint8)


def test_moe_init_routing_v2_compiles_without_active_expert_range():
    """TorchAir's converter defaults active_expert_range to None where the schema says [] and writes it with
    `list.i.extend(None)` ("TypeError: must assign iterable") when the FX node leaves the argument out; op_plugin
    passes the schema's default (_lowering/schema_defaults.py), so the graph equals eager."""
    x, expert_idx = torch.randn(5, 8), torch.randint(0, 4, (5, 2), dtype=torch.int32)
    _eager_and_graph("npu_moe_init_routing_v2", "MoeInitRoutingV3", (x, expert_idx),
                     {"active_num": 10, "expert_num": 4, "expert_tokens_num_type": 1, "expert_tokens_num_flag": True})

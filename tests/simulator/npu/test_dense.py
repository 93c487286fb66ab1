"""The ops of op_plugin/_simulator/npu/dense.py (GELU, dtype cast, linear, transpose-batchmatmul, add-RMS-norm-cast,
group-norm-SiLU, windowed softmax, prefetch, format cast, top-k/top-p): eager against independent oracles and,
bit for bit, against the single-op graph TorchAir builds for it.

npu_ffn (CANN FFN, non-quantised, no experts): eager against the formula activation(x W1 + b1) W2 + b2 written in
float64 with the kernel's float16 rounding points, and compiled (TorchAir's converter, the FFN GE kernel) against
eager."""
import math

import pytest
import torch

from op_plugin._testing_harness import Npugraph, assert_close, check_compiled, run_node

from . import oracles
from .graph_equal import assert_eager_equals_graph

F32, F16, BF16 = torch.float32, torch.float16, torch.bfloat16
npu = torch.ops.npu
pytestmark = pytest.mark.usefixtures("torchair")


# ---- moved from tests/simulator/test_npu_ops_dense.py ----

def _gelu_oracle(x, approximate):
    x = x.double()
    if approximate == "none":
        return x * 0.5 * (1 + torch.erf(x / math.sqrt(2)))
    return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


@pytest.mark.parametrize("dtype", (F32, F16, BF16))
@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu(approximate, dtype):
    x = (torch.randn(4, 9) * 3).to(dtype)
    assert_close(npu.npu_gelu(x, approximate=approximate), _gelu_oracle(x, approximate).to(dtype), "npu_ops")
    check_compiled(lambda t: npu.npu_gelu(t, approximate=approximate), (x,), "GeluV2", kind="npu_ops")


def test_gelu_refusal():
    with pytest.raises(ValueError, match="approximate"):
        npu.npu_gelu(torch.randn(3), approximate="erf")


@pytest.mark.parametrize("src,dst", [(F32, torch.int32), (F16, F32), (F32, F16), (F32, torch.bool),
                                     (BF16, F32), (torch.int32, F16)])
def test_dtype_cast(src, dst):
    x = torch.tensor([0.0, 0.5, -1.7, 2.9, -0.2, 7.0]).to(src)
    want = torch.tensor([float(v) for v in x.tolist()], dtype=torch.float64)
    if dst == torch.int32:
        want = want.trunc()  # CANN's Cast truncates toward zero
    elif dst == torch.bool:
        want = want != 0
    got = npu.npu_dtype_cast(x, dst)
    assert got.dtype == dst and torch.equal(got, want.to(dst))
    assert torch.equal(npu._npu_dtype_cast(x, dst), want.to(dst))
    check_compiled(lambda t: npu.npu_dtype_cast(t, dst) , (x,), "Cast", kind="npu_ops")


def test_dtype_cast_refuses_the_formats_it_does_not_simulate():
    for number in (285, 290, 296):   # int4, hifloat8, fp4 (fp8 in range is simulated: npu/test_quant_lowbit.py)
        with pytest.raises(NotImplementedError, match="not simulated"):
            npu.npu_dtype_cast(torch.randn(4), number)
    with pytest.raises(NotImplementedError, match="reinterprets"):
        npu.npu_dtype_cast(torch.randn(4), 5, input_dtype=15)


def _linear_oracle(x, w, b):
    out = torch.zeros(x.shape[0], w.shape[0], dtype=torch.float64)
    for i in range(x.shape[0]):
        for j in range(w.shape[0]):
            out[i, j] = sum(float(x[i, k]) * float(w[j, k]) for k in range(x.shape[1])) + (float(b[j]) if b is not None
                                                                                          else 0.0)
    return out


@pytest.mark.parametrize("dtype", (F32, F16))
@pytest.mark.parametrize("with_bias", [True, False])
def test_linear(with_bias, dtype):
    x, w, b = torch.randn(3, 8).to(dtype), torch.randn(5, 8).to(dtype), torch.randn(5).to(dtype)
    bias = b if with_bias else None
    assert_close(npu.npu_linear(x, w, bias), _linear_oracle(x, w, bias).to(dtype), "npu_ops")
    check_compiled(lambda *a: npu.npu_linear(*a), (x, w, bias) if with_bias else (x, w), "MatMul", kind="npu_ops")


def _tbmm_oracle(x1, x2, perm_x1, perm_x2):
    a, b = x1.permute(perm_x1), x2.permute(perm_x2)  # [B, M, K], [B, K, N]
    batch, m, k = a.shape
    out = torch.zeros(m, batch, b.shape[2], dtype=torch.float64)
    for i in range(batch):
        for r in range(m):
            for c in range(b.shape[2]):
                out[r, i, c] = sum(float(a[i, r, j]) * float(b[i, j, c]) for j in range(k))
    return out


PERMS = {  # name: perm_x1, perm_x2, x1 shape, x2 shape
    "default": ([0, 1, 2], [0, 1, 2], (2, 3, 4), (2, 4, 5)),
    "x1_mbk": ([1, 0, 2], [0, 1, 2], (3, 2, 4), (2, 4, 5)),
    "x2_bnk": ([1, 0, 2], [0, 2, 1], (3, 2, 4), (2, 5, 4)),
}


@pytest.mark.parametrize("dtype", (F32, F16, BF16))
@pytest.mark.parametrize("name", sorted(PERMS))
def test_transpose_batchmatmul(name, dtype):
    p1, p2, s1, s2 = PERMS[name]
    x1, x2 = torch.randn(s1).to(dtype), torch.randn(s2).to(dtype)
    got = npu.npu_transpose_batchmatmul(x1, x2, perm_x1=p1, perm_x2=p2, perm_y=[1, 0, 2])
    assert_close(got, _tbmm_oracle(x1, x2, p1, p2).to(dtype), "npu_ops")

    def fn(a, b):
        return npu.npu_transpose_batchmatmul(a, b, perm_x1=p1, perm_x2=p2, perm_y=[1, 0, 2])
    check_compiled(fn, (x1, x2), "TransposeBatchMatMul", kind="npu_ops")


def test_transpose_batchmatmul_refusals():
    x1, x2 = torch.randn(2, 3, 4), torch.randn(2, 4, 5)
    with pytest.raises(NotImplementedError, match="scale"):
        npu.npu_transpose_batchmatmul(x1, x2, scale=torch.ones(10, dtype=torch.int64))
    with pytest.raises(NotImplementedError, match="batch_split_factor"):
        npu.npu_transpose_batchmatmul(x1, x2, batch_split_factor=2)
    with pytest.raises(ValueError, match="perm_y"):
        npu.npu_transpose_batchmatmul(x1, x2, perm_y=[0, 1, 2])
    with pytest.raises(Exception, match="batch_split_factor") as error:
        run_node("TransposeBatchMatMul", [x1, x2], name="tbmm", batch_split_factor=2)
    assert "tbmm" in str(error.value)


# ---- moved from tests/simulator/test_npu_ops_norm_fused.py ----

@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_add_rms_norm_cast_matches_the_formula(dtype):
    x1, x2, gamma = torch.randn(2, 3, 8, dtype=dtype), torch.randn(2, 3, 8, dtype=dtype), torch.randn(8, dtype=dtype)
    y1, y2, rstd, x = npu.npu_add_rms_norm_cast(x1, x2, gamma, 1e-6)
    assert (y1.dtype, y2.dtype, rstd.dtype, x.dtype) == (torch.float32, dtype, torch.float32, dtype)
    assert rstd.shape == (2, 3, 1) and torch.equal(y1, y2.float())   # y1Out = float(y2Out)
    for i in range(2):
        for j in range(3):
            row = [float(a) + float(b) for a, b in zip(x1[i, j].tolist(), x2[i, j].tolist(), strict=True)]
            row = [float(torch.tensor(v).to(dtype)) for v in row]   # x is rounded to the input dtype
            want_rstd = 1 / math.sqrt(sum(v * v for v in row) / 8 + 1e-6)
            assert float(rstd[i, j, 0]) == pytest.approx(want_rstd, rel=1e-5)
            want = torch.tensor([v * want_rstd * float(g) for v, g in zip(row, gamma.tolist(), strict=True)])
            torch.testing.assert_close(y2[i, j], want.to(dtype), rtol=1e-2, atol=1e-2)


def test_add_rms_norm_cast_compiled():
    x1, x2, gamma = torch.randn(4, 16, dtype=torch.float16), torch.randn(4, 16, dtype=torch.float16), torch.rand(16)
    check_compiled(lambda a, b, g: npu.npu_add_rms_norm_cast(a, b, g), (x1, x2, gamma.half()), "AddRmsNormCast",
                   kind="npu_ops")


def _group_norm_silu_oracle(x, gamma, beta, groups, eps):
    n, c = x.shape[:2]
    per = c // groups
    y, means, rstds = torch.empty(x.shape, dtype=torch.float64), torch.empty(n, groups), torch.empty(n, groups)
    for i in range(n):
        for g in range(groups):
            block = x[i, g * per:(g + 1) * per].double()
            mean = block.sum().item() / block.numel()
            var = ((block - mean) ** 2).sum().item() / block.numel()
            rstd = 1 / math.sqrt(var + eps)
            means[i, g], rstds[i, g] = mean, rstd
            for ch in range(g * per, (g + 1) * per):
                v = (x[i, ch].double() - mean) * rstd * float(gamma[ch]) + float(beta[ch])
                y[i, ch] = v / (1 + torch.exp(-v))
    return y, means, rstds


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_group_norm_silu_matches_the_formula(dtype):
    x, gamma, beta = torch.randn(2, 8, 3, 4).to(dtype), torch.randn(8).to(dtype), torch.randn(8).to(dtype)
    y, mean, rstd = npu.npu_group_norm_silu(x, gamma, beta, 4, 1e-5)
    want_y, want_mean, want_rstd = _group_norm_silu_oracle(x, gamma, beta, 4, 1e-5)
    tol = {"rtol": 1e-5, "atol": 1e-5} if dtype == torch.float32 else {"rtol": 2e-3, "atol": 2e-3}
    torch.testing.assert_close(y, want_y.to(dtype), **tol)
    torch.testing.assert_close(mean, want_mean.to(dtype), **tol)
    torch.testing.assert_close(rstd, want_rstd.to(dtype), **tol)


def test_group_norm_silu_compiled():
    x, gamma, beta = torch.randn(2, 8, 5), torch.randn(8), torch.randn(8)
    check_compiled(lambda x, g, b: npu.npu_group_norm_silu(x, g, b, 2, 1e-4), (x, gamma, beta), "GroupNormSilu",
                   kind="npu_ops")
    check_compiled(lambda x, g, b: npu.npu_group_norm_silu(x.half(), g.half(), b.half(), 4, 1e-5),
                   (x, gamma, beta), "GroupNormSilu", kind="npu_ops")


def test_prefetch_has_no_effect_and_checks_its_arguments():
    x = torch.randn(4, 8)
    before = x.clone()
    assert npu.npu_prefetch(x, x, 2) is None and torch.equal(x, before)
    with pytest.raises(ValueError, match="npu_prefetch: max_size 0"):
        npu.npu_prefetch(x, x, 0)


def test_add_rms_norm_v2_functional_is_add_rms_norm_reordered_and_leaves_its_inputs():
    x1, x2, gamma = torch.randn(2, 8).half(), torch.randn(2, 8).half(), torch.randn(8).half()
    before = x1.clone(), x2.clone()
    rstd, y, x = npu.npu_add_rms_norm_v2_functional(x1, x2, gamma)
    y1, y2, rstd2, x_sum = npu.npu_add_rms_norm_cast(x1, x2, gamma)
    assert torch.equal(rstd, rstd2) and torch.equal(y, y2) and torch.equal(x, x_sum)
    assert torch.equal(x1, before[0]) and torch.equal(x2, before[1])
    check_compiled(lambda a, b, g: npu.npu_add_rms_norm_v2_functional(a, b, g), (x1, x2, gamma), "AddRmsNorm",
                   kind="npu_ops")


def _window_softmax_oracle(x, mask, bias, scale):
    b, w, n, s1, s2 = x.shape
    out = torch.empty(x.shape, dtype=torch.float64)
    for i in range(b):
        for j in range(w):
            for h in range(n):
                for r in range(s1):
                    logits = [scale * float(x[i, j, h, r, c]) + float(mask[j, r, c]) + float(bias[h, r, c])
                              for c in range(s2)]
                    top = max(logits)
                    exps = [math.exp(v - top) for v in logits]
                    out[i, j, h, r] = torch.tensor([e / sum(exps) for e in exps], dtype=torch.float64)
    return out


@pytest.mark.parametrize("four_d", [False, True])
def test_masked_softmax_with_rel_pos_bias_matches_the_formula(four_d):
    x, mask, bias = torch.randn(2, 3, 2, 4, 5), torch.randn(3, 4, 5), torch.randn(2, 4, 5)
    want = _window_softmax_oracle(x, mask, bias, 0.5)
    arg = x.reshape(6, 2, 4, 5) if four_d else x
    got = npu.npu_masked_softmax_with_rel_pos_bias(arg, mask, bias, 0.5)
    torch.testing.assert_close(got.reshape(x.shape), want.float(), rtol=1e-5, atol=1e-6)


def test_masked_softmax_with_rel_pos_bias_compiled():
    x, mask, bias = torch.randn(4, 2, 3, 8, 8).half(), torch.randn(2, 8, 8).half(), torch.randn(3, 8, 8).half()
    check_compiled(lambda x, m, b: npu.npu_masked_softmax_with_rel_pos_bias(x, m, b, 0.125), (x, mask, bias),
                   "MaskedSoftmaxWithRelPosBias", kind="npu_ops")
    check_compiled(lambda x, b: npu.npu_masked_softmax_with_rel_pos_bias(x.reshape(8, 3, 8, 8), None, b),
                   (x, bias), "MaskedSoftmaxWithRelPosBias", kind="npu_ops")


# ---- moved from tests/simulator/test_npu_ops_format_sampling.py ----

@pytest.mark.parametrize("dtype", (torch.float32, torch.float16, torch.bfloat16))
@pytest.mark.parametrize("acl_format", [2, 29])
def test_format_cast_keeps_the_values(acl_format, dtype):
    x = torch.randn(4, 16).to(dtype)
    out = npu.npu_format_cast(x, acl_format)
    assert torch.equal(out, x) and out.data_ptr() != x.data_ptr()
    check_compiled(lambda t: npu.npu_format_cast(t, acl_format) * 2, (x,), "TensorMove", kind="npu_ops")


def test_format_cast_feeding_a_matmul_compiles():
    """The vllm-ascend habit: weights cast to NZ (29), then used by a matmul."""
    x, w = torch.randn(3, 16), torch.randn(8, 16)
    check_compiled(lambda a, b: npu.npu_linear(a, npu.npu_format_cast(b, 29)), (x, w), "MatMul", kind="npu_ops")


def test_format_cast_refuses_a_storage_dtype():
    with pytest.raises(NotImplementedError, match="customize_dtype"):
        npu.npu_format_cast(torch.randn(2, 2), 29, customize_dtype=1)


def _top_k_top_p_oracle(logits, p, k):
    """CANN's formula (ops-nn ApplyTopKTopPWithSorted), row by row in float64."""
    out = torch.empty(logits.shape, dtype=torch.float64)
    for b in range(logits.shape[0]):
        row = [float(v) for v in logits[b]]
        order = sorted(range(len(row)), key=lambda i: row[i])  # ascending, stable
        values = [row[i] for i in order]
        if k is not None:
            threshold = values[len(values) - int(k[b])]
            values = [-math.inf if v < threshold else v for v in values]
        if p is not None:
            top = max(values)
            weights = [math.exp(v - top) if v != -math.inf else 0.0 for v in values]
            total, running = sum(weights), 0.0
            kept = []
            for j, w in enumerate(weights):
                running += w / total
                drop = running <= 1 - float(p[b]) and j != len(values) - 1
                kept.append(-math.inf if drop else values[j])
            values = kept
        for position, index in enumerate(order):
            out[b, index] = values[position]
    return out


@pytest.mark.parametrize("which", ["both", "k_only", "p_only"])
def test_top_k_top_p(which):
    torch.manual_seed(3)
    logits = torch.randn(4, 32)
    p = torch.tensor([0.9, 0.5, 0.1, 1.0]) if which != "k_only" else None
    k = torch.tensor([5, 32, 1, 10], dtype=torch.int32) if which != "p_only" else None
    got = npu.npu_top_k_top_p(logits, p, k)
    want = _top_k_top_p_oracle(logits, p, k).float()
    assert torch.equal(torch.isinf(got), torch.isinf(want))
    torch.testing.assert_close(got[~torch.isinf(got)], want[~torch.isinf(want)])
    assert bool((~torch.isinf(got)).any(dim=1).all())  # every row keeps at least one value


def test_top_k_top_p_refusals():
    with pytest.raises(ValueError, match="both be None"):
        npu.npu_top_k_top_p(torch.randn(2, 4))
    with pytest.raises(ValueError, match=r"\[1, 4\]"):
        npu.npu_top_k_top_p(torch.randn(2, 4), None, torch.tensor([0, 2], dtype=torch.int32))


def test_top_k_top_p_in_graph_mode_is_refused_by_name():
    logits, k = torch.randn(2, 8), torch.tensor([2, 3], dtype=torch.int32)
    with pytest.raises(Exception, match="npu_top_k_top_p: GE mode cannot lower it"):
        Npugraph(lambda a, b: npu.npu_top_k_top_p(a, None, b))(logits, k)


# ---- issue 32: each op an adapter over its GE kernel: eager == graph bit for bit, and the former eager formulas
# (tests/simulator/npu/oracles.py) at the npu_ops tolerances ----

@pytest.mark.parametrize("dtype", (F32, F16, BF16))
def test_dense_ops_eager_are_the_graph(dtype):
    x, w, b = torch.randn(4, 8).to(dtype), torch.randn(6, 8).to(dtype), torch.randn(6).to(dtype)
    for approximate in ("none", "tanh"):
        assert_eager_equals_graph(lambda t, a=approximate: npu.npu_gelu(t, approximate=a), (x,), "GeluV2")
        assert_close(npu.npu_gelu(x, approximate=approximate), oracles.gelu(x, approximate), "npu_ops")
    assert_eager_equals_graph(lambda a, m, c: npu.npu_linear(a, m, c), (x, w, b), "MatMul")
    assert_eager_equals_graph(lambda a, m: npu.npu_linear(a, m), (x, w), "MatMul")
    assert_close(npu.npu_linear(x, w, b), oracles.linear(x, w, b), "npu_ops", scale=4.0)
    for dst in (6, 5, 15, 3):
        assert_eager_equals_graph(lambda t, d=dst: npu.npu_dtype_cast(t, d), (x * 10,), "Cast")
    got = npu._npu_dtype_cast(x, x.dtype)
    assert torch.equal(got, x) and got.data_ptr() != x.data_ptr()   # a new tensor, as the schema says
    bm = (torch.randn(3, 2, 4).to(dtype), torch.randn(2, 4, 5).to(dtype))
    assert_eager_equals_graph(lambda a, m: npu.npu_transpose_batchmatmul(a, m, perm_x1=[1, 0, 2]), bm,
                              "TransposeBatchMatMul")


@pytest.mark.parametrize("dtype", (F16, BF16))
def test_fused_norm_ops_eager_are_the_graph(dtype):
    x1, x2, gamma = torch.randn(2, 3, 8).to(dtype), torch.randn(2, 3, 8).to(dtype), torch.randn(8).to(dtype)
    assert_eager_equals_graph(lambda a, b, g: npu.npu_add_rms_norm_cast(a, b, g), (x1, x2, gamma), "AddRmsNormCast")
    assert_eager_equals_graph(lambda a, b, g: npu.npu_add_rms_norm_v2_functional(a, b, g), (x1, x2, gamma),
                              "AddRmsNorm")
    x, g, b = torch.randn(2, 8, 3, 4).to(dtype), torch.randn(8).to(dtype), torch.randn(8).to(dtype)
    # eps 1e-5 is the schema's default, which the FX node drops and TorchAir's converter filled with its own
    # 1e-4 (numeric_corrections.npu_group_norm_silu); 0.5 is another value, passed through
    for eps in (1e-5, 0.5):
        assert_eager_equals_graph(lambda t, gg, bb, eps=eps: npu.npu_group_norm_silu(t, gg, bb, 4, eps), (x, g, b),
                                  "GroupNormSilu")
    assert_close(npu.npu_group_norm_silu(x, g, b, 4, 1e-5), oracles.group_norm_silu(x, g, b, 4, 1e-5), "npu_ops",
                 scale=2.0)
    s, m, r = torch.randn(2, 3, 2, 4, 5).to(dtype), torch.randn(3, 4, 5).to(dtype), torch.randn(2, 4, 5).to(dtype)
    assert_eager_equals_graph(lambda t, mm, rr: npu.npu_masked_softmax_with_rel_pos_bias(t, mm, rr, 0.5), (s, m, r),
                              "MaskedSoftmaxWithRelPosBias")


def test_ffn_and_prefetch_eager_are_the_graph():
    x, w1, w2 = torch.randn(4, 8).half(), torch.randn(8, 16).half(), torch.randn(16, 8).half()
    for activation in ("relu", "silu", "gelu", "fastgelu"):
        assert_eager_equals_graph(lambda a, b, c, act=activation: npu.npu_ffn(a, b, c, act), (x, w1, w2), "FFN")
    assert_eager_equals_graph(lambda a, b, c: npu.npu_ffn(a, b, c, "relu", inner_precise=1), (x, w1, w2), "FFN")
    with pytest.raises(NotImplementedError, match="npu_ffn: .*expert"):
        npu.npu_ffn(x, w1, w2, "relu", expert_tokens=[4])
    with pytest.raises(ValueError, match="npu_prefetch: .*max_size"):
        npu.npu_prefetch(x, x, -1)


# ---- moved from tests/simulator/test_npu_ops_ffn.py ----

_ACT = {
    "relu": lambda v: max(v, 0.0),
    "silu": lambda v: v / (1 + math.exp(-v)),
    "gelu": lambda v: 0.5 * v * (1 + math.tanh(math.sqrt(2 / math.pi) * (v + 0.044715 * v ** 3))),
    "fastgelu": lambda v: v / (1 + math.exp(-1.702 * abs(v))) * math.exp(0.851 * (v - abs(v))),
}


def _oracle(x, w1, w2, b1, b2, activation, inner_precise):
    dtype = x.dtype
    h = x.double() @ w1.double() + b1.double()
    if dtype == torch.float16 and inner_precise == 1:
        h = h.to(dtype).double()
    h = torch.tensor([[_ACT[activation](float(v)) for v in row] for row in h.tolist()], dtype=torch.float64)
    return (h.to(dtype).double() @ w2.double() + b2.double()).to(dtype)


@pytest.mark.parametrize("activation", sorted(_ACT))
@pytest.mark.parametrize("dtype,inner_precise", [(torch.float16, 1), (torch.float16, 0), (torch.bfloat16, 0)])
def test_ffn_matches_the_formula(activation, dtype, inner_precise):
    x, w1, w2 = torch.randn(6, 16).to(dtype), (torch.randn(16, 32) / 4).to(dtype), (torch.randn(32, 8) / 4).to(dtype)
    bias = torch.float32 if dtype == torch.bfloat16 else dtype   # CANN: bias float16, float32 or int32
    b1, b2 = torch.randn(32).to(bias), torch.randn(8).to(bias)
    got = npu.npu_ffn(x, w1, w2, activation, bias1=b1, bias2=b2, inner_precise=inner_precise)
    tol = {"rtol": 1e-2, "atol": 1e-2} if dtype == torch.float16 else {"rtol": 3e-2, "atol": 3e-2}
    torch.testing.assert_close(got, _oracle(x, w1, w2, b1, b2, activation, inner_precise), **tol)


def test_ffn_refusals():
    x, w1, w2 = torch.randn(2, 4).half(), torch.randn(4, 8).half(), torch.randn(8, 4).half()
    with pytest.raises(NotImplementedError, match="npu_ffn: expert_tokens"):
        npu.npu_ffn(x, w1, w2, "relu", expert_tokens=[2])
    with pytest.raises(NotImplementedError, match="npu_ffn: activation 'swiglu'"):
        npu.npu_ffn(x, w1, w2, "swiglu")


@pytest.mark.parametrize("activation", ["gelu", "fastgelu"])
def test_ffn_compiled(activation):
    x, w1, w2 = torch.randn(32, 16).half(), (torch.randn(16, 64) / 4).half(), (torch.randn(64, 16) / 4).half()
    check_compiled(lambda x, a, b: npu.npu_ffn(x, a, b, activation, inner_precise=1), (x, w1, w2), "FFN",
                   kind="npu_ops")
    b1, b2 = torch.randn(64).half(), torch.randn(16).half()
    check_compiled(lambda x, a, b, c, d: npu.npu_ffn(x.bfloat16(), a.bfloat16(), b.bfloat16(), activation,
                                                     bias1=c.float(), bias2=d.float()),
                   (x, w1, w2, b1, b2), "FFN", kind="npu_ops")

"""npu_add_rms_norm_cast (CANN AddRmsNormCast), npu_group_norm_silu (GroupNormSilu) and npu_prefetch: eager
against oracles written element by element from CANN's formulas, compiled (TorchAir's converters, the GE
kernels) against eager."""
import math

import pytest
import torch

from op_plugin._testing_harness import check_compiled

pytestmark = pytest.mark.usefixtures("torchair")
npu = torch.ops.npu


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

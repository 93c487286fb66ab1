"""_npu_rms_norm_backward_quant (issue 23): the CPU reference and the RmsNormGradQuant GE kernel against oracles
that are not the code under test: torch.autograd of a float64 RMS norm, then a numpy rint loop for the int8 dx
(aclnnRmsNormGradQuant.md), and compiled against eager. (batch_norm_gather_stats_update's tests are in
tests/simulator/npu/test_batch_norm_stats.py.)"""
import numpy as np
import pytest
import torch

from op_plugin._testing_harness import check_compiled, run_node

npu = torch.ops.npu
pytestmark = pytest.mark.usefixtures("torchair")


def _rms_grads(dy, x, gamma, eps=1e-6):
    """float64 autograd of y = x / rms(x) * gamma: (dx, dgamma, rstd as float32 (rows,))."""
    x64 = x.double().requires_grad_()
    g64 = gamma.double().requires_grad_()
    rstd = torch.rsqrt(x64.pow(2).mean(-1, keepdim=True) + eps)
    (x64 * rstd * g64).backward(dy.double())
    return x64.grad, g64.grad, rstd.detach().squeeze(-1).float()


def _quantise(dx, scale, offset, div_mode):
    out = np.empty(dx.shape, dtype=np.int8)
    for pos in np.ndindex(*dx.shape):
        value = dx[pos] / scale if div_mode else dx[pos] * scale
        out[pos] = min(max(np.rint(value + offset), -128), 127)
    return torch.from_numpy(out)


@pytest.mark.parametrize("div_mode", (True, False))
@pytest.mark.parametrize("dtype", (torch.float16, torch.float32, torch.bfloat16))
def test_rms_norm_backward_quant_matches_autograd_and_a_rint_loop(dtype, div_mode):
    torch.manual_seed(0)
    x, dy, gamma = torch.randn(3, 4, 64).to(dtype), torch.randn(3, 4, 64).to(dtype), torch.rand(64).to(dtype) + 0.5
    dx64, dgamma64, rstd = _rms_grads(dy, x, gamma)
    scale = torch.tensor([0.02 if div_mode else 50.0])
    offset = torch.tensor([3], dtype=torch.int32)
    dx_q, dgamma = npu._npu_rms_norm_backward_quant(dy, x, rstd, gamma, scale, offset_x=offset, div_mode=div_mode)
    want = _quantise(dx64.numpy(), float(scale), 3, div_mode)
    assert dx_q.dtype == torch.int8 and dx_q.shape == x.shape and dgamma.dtype == torch.float32
    diff = (dx_q.int() - want.int()).abs()
    assert int(diff.max()) <= 1 and float((diff == 0).float().mean()) > 0.97  # one step at a rounding boundary
    torch.testing.assert_close(dgamma.double(), dgamma64, rtol=2e-2 if dtype != torch.float32 else 1e-4, atol=1e-2)


def test_rms_norm_backward_quant_hand_values():
    """One row of two: x = (3, 4) with rstd = 1/sqrt(12.5), gamma 1, dy = (1, 0): dx = rstd * (dy - xr * mean(dy * xr)).
    Worked by hand: xr = (0.8485, 1.1314), mean(dy * xr) = 0.4243,
    dx = 0.2828 * (1 - 0.36, -0.48) = (0.1810, -0.1358); / 0.01 -> (18, -14)."""
    x, dy, gamma = torch.tensor([[3.0, 4.0]]), torch.tensor([[1.0, 0.0]]), torch.ones(2)
    rstd = torch.tensor([12.5 ** -0.5])
    dx_q, dgamma = npu._npu_rms_norm_backward_quant(dy, x, rstd, gamma, torch.tensor([0.01]))
    assert dx_q.tolist() == [[18, -14]]
    torch.testing.assert_close(dgamma, torch.tensor([3 * 12.5 ** -0.5, 0.0]))


def test_rms_norm_backward_quant_ge_node_and_compiled():
    x, dy, gamma = torch.randn(2, 4, 64).half(), torch.randn(2, 4, 64).half(), torch.rand(64).half() + 0.5
    _, _, rstd = _rms_grads(dy, x, gamma)
    scale = torch.tensor([0.01])
    eager = npu._npu_rms_norm_backward_quant(dy, x, rstd, gamma, scale)
    got = run_node("RmsNormGradQuant", [dy, x, rstd, gamma, scale, None],
                   [(torch.int8, [2, 4, 64]), (torch.float32, [64])], dst_type=2)
    assert torch.equal(got[0], eager[0]) and torch.equal(got[1], eager[1])
    check_compiled(lambda a, b, r, g, s: npu._npu_rms_norm_backward_quant(a, b, r, g, s), (dy, x, rstd, gamma, scale),
                   "RmsNormGradQuant", kind="npu_ops")


def test_rms_norm_backward_quant_refusals():
    x, rstd, gamma, scale = torch.randn(2, 8), torch.rand(2), torch.rand(8), torch.tensor([0.1])
    with pytest.raises(NotImplementedError, match="_npu_rms_norm_backward_quant.*hifloat8"):
        npu._npu_rms_norm_backward_quant(x, x, rstd, gamma, scale, dst_type=290)
    with pytest.raises(ValueError, match="static"):
        npu._npu_rms_norm_backward_quant(x, x, rstd, gamma, scale, quant_mode="dynamic")
    with pytest.raises(ValueError, match="scale_x"):
        npu._npu_rms_norm_backward_quant(x, x, rstd, gamma, torch.ones(2))

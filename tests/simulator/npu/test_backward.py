"""torch_npu's backward ops and autograd formulas (issue 23): npu_rms_norm_backward, npu_swiglu_backward,
npu_rotary_mul_backward, npu_gelu_backward, npu_linear_backward, npu_dtype_cast_backward against
torch.autograd on plain-torch forwards written independently (float64); autograd through the npu ops
against the same; the backward ops through npugraph (TorchAir: RmsNormGrad, SwiGluGrad, RotaryMulGrad,
GeluGradV2) against eager, and a compiled training step against eager gradients.

_npu_rms_norm_backward_quant (issue 23): the CPU reference and the RmsNormGradQuant GE kernel against oracles
that are not the code under test: torch.autograd of a float64 RMS norm, then a numpy rint loop for the int8 dx
(aclnnRmsNormGradQuant.md), and compiled against eager. (batch_norm_gather_stats_update's tests are in
tests/simulator/npu/test_batch_norm_stats.py.)"""
import numpy as np
import pytest
import torch
import torch.nn.functional as F

from op_plugin._simulator import capture_graphs
from op_plugin._testing_harness import Npugraph, assert_close, check_compiled, run_node

from . import oracles
from .graph_equal import assert_eager_equals_graph

npu = torch.ops.npu
pytestmark = pytest.mark.usefixtures("torchair")
F16, BF16, F32 = torch.float16, torch.bfloat16, torch.float32


def _grads(forward, inputs, grad_out):
    """d(forward(*inputs) . grad_out)/d(inputs) by torch.autograd, in float64."""
    leaves = [t.detach().double().requires_grad_() for t in inputs]
    out = forward(*leaves)
    return torch.autograd.grad(out, leaves, grad_out.double())


def _plain_rms(x, gamma, eps=1e-6):
    return x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps) * gamma


def _plain_swiglu(x, dim=-1):
    a, b = x.chunk(2, dim=dim)
    return F.silu(a) * b


def _plain_rotary_half(x, r1, r2):
    d = x.shape[-1] // 2
    return x * r1 + torch.cat((-x[..., d:], x[..., :d]), -1) * r2


def _plain_rotary_interleave(x, r1, r2):
    rotated = torch.stack((-x[..., 1::2], x[..., ::2]), -1).flatten(-2)
    return x * r1 + rotated * r2


@pytest.mark.parametrize("dtype", (F32, F16))
def test_rms_norm_backward(dtype):
    x, gamma, dy = torch.randn(2, 3, 16).to(dtype), (torch.rand(16) + 0.5).to(dtype), torch.randn(2, 3, 16).to(dtype)
    _, rstd = npu.npu_rms_norm(x, gamma, 1e-6)
    dx, dgamma = npu.npu_rms_norm_backward(dy, x, gamma, rstd)
    want_dx, want_dgamma = _grads(_plain_rms, (x, gamma), dy)
    assert dgamma.dtype == F32
    assert_close(dx, want_dx.to(dtype), "npu_ops", scale=4)
    assert_close(dgamma, want_dgamma.float(), "npu_ops", dtype=dtype, scale=4)
    check_compiled(lambda *a: npu.npu_rms_norm_backward(*a), (dy, x, gamma, rstd), "RmsNormGrad", kind="npu_ops")


@pytest.mark.parametrize("dim", [-1, 1])
def test_swiglu_backward(dim):
    x, dy = torch.randn(3, 8, 6), torch.randn(3, 8, 6)
    dy = dy.chunk(2, dim=dim)[0].contiguous()
    want = _grads(lambda t: _plain_swiglu(t, dim), (x,), dy)[0]
    assert_close(npu.npu_swiglu_backward(dy, x, dim), want.float(), "npu_ops")
    check_compiled(lambda g, t: npu.npu_swiglu_backward(g, t, dim), (dy, x), "SwiGluGrad", kind="npu_ops")


@pytest.mark.parametrize("mode", ["half", "interleave"])
def test_rotary_mul_backward(mode):
    x, r1, r2 = torch.randn(2, 3, 4, 64), torch.randn(1, 3, 1, 64), torch.randn(1, 3, 1, 64)
    dy = torch.randn(2, 3, 4, 64)
    plain = _plain_rotary_half if mode == "half" else _plain_rotary_interleave
    want = _grads(plain, (x, r1, r2), dy)
    got = npu.npu_rotary_mul_backward(dy, x, r1, r2, mode)
    assert_close(got, tuple(w.float() for w in want), "npu_ops", scale=4)


def test_rotary_mul_backward_compiled():
    """TorchAir lowers it to RotaryMulGrad (rank 4, D a multiple of 64), the half rotation."""
    args = (torch.randn(2, 3, 4, 64), torch.randn(2, 3, 4, 64), torch.randn(1, 1, 4, 64), torch.randn(1, 1, 4, 64))
    check_compiled(lambda *a: npu.npu_rotary_mul_backward(*a), args, "RotaryMulGrad", kind="npu_ops", scale=4)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_backward(approximate):
    x, dy = torch.randn(4, 16) * 2, torch.randn(4, 16)
    want = _grads(lambda t: F.gelu(t, approximate=approximate), (x,), dy)[0]
    assert_close(npu.npu_gelu_backward(dy, x, approximate=approximate), want.float(), "npu_ops")


def test_linear_and_dtype_cast_backward():
    x, w, dy = torch.randn(3, 8), torch.randn(5, 8), torch.randn(3, 5)
    want = _grads(lambda a, b: a @ b.t(), (x, w), dy)
    assert_close(npu.npu_linear_backward(dy, x, w), tuple(t.float() for t in want), "npu_ops")
    g = torch.randn(4).half()
    assert torch.equal(npu.npu_dtype_cast_backward(g, torch.float32), g.float())


CASES = {  # op call, plain forward, inputs (float32)
    "rms_norm": (lambda x, g: npu.npu_rms_norm(x, g, 1e-6)[0], _plain_rms,
                 lambda: (torch.randn(2, 5, 8), torch.rand(8) + 0.5)),
    "swiglu": (lambda x: npu.npu_swiglu(x, -1), _plain_swiglu, lambda: (torch.randn(3, 8),)),
    "rotary_half": (lambda x, a, b: npu.npu_rotary_mul(x, a, b), _plain_rotary_half,
                    lambda: (torch.randn(2, 3, 4, 8), torch.randn(1, 3, 1, 8), torch.randn(1, 3, 1, 8))),
    "rotary_interleave": (lambda x, a, b: npu.npu_rotary_mul(x, a, b, "interleave"), _plain_rotary_interleave,
                          lambda: (torch.randn(2, 3, 4, 8), torch.randn(1, 3, 1, 8), torch.randn(1, 3, 1, 8))),
    "gelu": (lambda x: npu.npu_gelu(x, approximate="tanh"), lambda x: F.gelu(x, approximate="tanh"),
             lambda: (torch.randn(4, 6),)),
    "linear": (lambda x, w, b: npu.npu_linear(x, w, b), lambda x, w, b: x @ w.t() + b,
               lambda: (torch.randn(3, 8), torch.randn(5, 8), torch.randn(5))),
    "dtype_cast": (lambda x: npu.npu_dtype_cast(x, torch.float16).float() * 3, lambda x: x * 3,
                   lambda: (torch.randn(6),)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_autograd_through_the_npu_ops(name):
    op_call, plain, make = CASES[name]
    inputs = [t.requires_grad_() for t in make()]
    out = op_call(*inputs)
    dy = torch.randn_like(out)
    got = torch.autograd.grad(out, inputs, dy)
    want = _grads(plain, inputs, dy)
    # the dtype cast's gradient passes through float16: compare at float16's tolerance
    assert_close(got, tuple(w.float() for w in want), "npu_ops", scale=8, dtype=F16 if name == "dtype_cast" else None)


def test_autograd_refuses_a_rotate_matrix():
    x = torch.randn(2, 4, requires_grad=True)
    with pytest.raises(NotImplementedError, match="npu_rotary_mul"):
        npu.npu_rotary_mul(x, torch.ones(2, 4), torch.ones(2, 4), "half", torch.eye(4))


@pytest.mark.parametrize("name,grad_type", [("rms_norm", "RmsNormGrad"), ("swiglu", "SwiGluGrad"),
                                            ("gelu", "GeluGradV2")])
def test_compiled_training_step_matches_eager_gradients(name, grad_type):
    op_call, _, make = CASES[name]

    def step(*inputs):
        return (op_call(*inputs) ** 2).sum()

    eager_inputs = [t.requires_grad_() for t in make()]
    graph_inputs = [t.detach().clone().requires_grad_() for t in eager_inputs]
    step(*eager_inputs).backward()
    with capture_graphs() as graphs:
        Npugraph(step)(*graph_inputs).backward()
    assert grad_type in {op.type for g in graphs for op in g.op}
    for got, want in zip(graph_inputs, eager_inputs, strict=True):
        assert_close(got.grad, want.grad, "npu_ops", scale=4)


def test_compiled_training_through_npu_linear():
    """TorchAir has no converter for npu_linear_backward (GE mode fails on an NPU too); op_plugin's lowers
    it to two MatMuls (op_plugin/_lowering/npu_training_converters.py)."""
    op_call, _, make = CASES["linear"]

    def step(*inputs):
        return (op_call(*inputs) ** 2).sum()

    eager_inputs = [t.requires_grad_() for t in make()]
    graph_inputs = [t.detach().clone().requires_grad_() for t in eager_inputs]
    step(*eager_inputs).backward()
    with capture_graphs() as graphs:
        Npugraph(step)(*graph_inputs).backward()
    types = [op.type for g in graphs for op in g.op]
    assert types.count("MatMul") >= 3 and not any("Linear" in t for t in types)
    for got, want in zip(graph_inputs, eager_inputs, strict=True):
        assert_close(got.grad, want.grad, "npu_ops", scale=4)
    x, w, dy = torch.randn(4, 16), torch.randn(8, 16), torch.randn(4, 8)
    check_compiled(lambda *a: npu.npu_linear_backward(*a), (dy, x, w), "MatMul", kind="npu_ops")


# ---- issue 32: each backward op an adapter over its GE kernel: eager == graph bit for bit, and the former eager
# formulas (tests/simulator/npu/oracles.py) at the npu_ops tolerances ----

@pytest.mark.parametrize("dtype", (F32, F16, BF16))
def test_backward_ops_eager_are_the_graph_and_the_formulas(dtype):
    x, gamma, dy = torch.randn(2, 3, 16).to(dtype), torch.randn(16).to(dtype), torch.randn(2, 3, 16).to(dtype)
    _, rstd = npu.npu_rms_norm(x, gamma)
    assert_eager_equals_graph(lambda a, b, c, d: npu.npu_rms_norm_backward(a, b, c, d), (dy, x, gamma, rstd),
                              "RmsNormGrad")
    assert_close(npu.npu_rms_norm_backward(dy, x, gamma, rstd), oracles.rms_norm_backward(dy, x, gamma, rstd),
                 "npu_ops", scale=2.0)
    half = torch.randn(2, 3, 8).to(dtype)
    assert_eager_equals_graph(lambda g, t: npu.npu_swiglu_backward(g, t, -1), (half, x), "SwiGluGrad")
    assert_close(npu.npu_swiglu_backward(half, x, -1), oracles.swiglu_backward(half, x, -1), "npu_ops", scale=2.0)
    for approximate in ("none", "tanh"):
        assert_eager_equals_graph(lambda g, t, a=approximate: npu.npu_gelu_backward(g, t, approximate=a), (dy, x),
                                  "GeluGradV2")
        assert_close(npu.npu_gelu_backward(dy, x, approximate=approximate),
                     oracles.gelu_backward(dy, x, approximate), "npu_ops", scale=2.0)
    assert_eager_equals_graph(lambda g: npu.npu_dtype_cast_backward(g, 6), (dy,), "Cast")


def test_rotary_mul_backward_eager_is_rotary_position_embedding_grad():
    x, r1, r2, g = torch.randn(2, 3, 4, 16), torch.rand(1, 3, 1, 16), torch.rand(1, 3, 1, 16), torch.randn(2, 3, 4, 16)
    for code, mode in enumerate(("half", "interleave", "quarter", "interleave-half")):
        got = npu.npu_rotary_mul_backward(g, x, r1, r2, mode)
        want = run_node("RotaryPositionEmbeddingGrad", [g, r1, r2, x], [(F32, list(x.shape)), (F32, [1, 3, 1, 16]),
                                                                        (F32, [1, 3, 1, 16])], mode=code)
        assert all(torch.equal(a, b) for a, b in zip(got, want, strict=True))


# ---- moved from tests/simulator/test_npu_ops_norm_more.py ----

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

"""npu_ffn (CANN FFN, non-quantised, no experts): eager against the formula activation(x W1 + b1) W2 + b2 written in
float64 with the kernel's float16 rounding points, and compiled (TorchAir's converter, the FFN GE kernel) against
eager."""
import math

import pytest
import torch

from op_plugin._testing_harness import check_compiled

pytestmark = pytest.mark.usefixtures("torchair")
npu = torch.ops.npu

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

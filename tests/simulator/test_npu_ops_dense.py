"""npu_gelu, npu_dtype_cast, npu_linear, npu_transpose_batchmatmul (issue 23): the CPU kernels against
formulas written independently (GELU from erf/tanh, the matmuls as loops of dot products), and through
npugraph (TorchAir: GeluV2, Cast, MatMul, TransposeBatchMatMul) against eager; TorchAir's declared cases
of these converters run."""
import math

import pytest
import torch

from op_plugin._testing_harness import assert_close, check_compiled, run_node

npu = torch.ops.npu
pytestmark = pytest.mark.usefixtures("torchair")
F16, BF16, F32 = torch.float16, torch.bfloat16, torch.float32


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
    for number in (285, 290, 296):   # int4, hifloat8, fp4 (fp8 in range is simulated: test_npu_ops_fp8_int4.py)
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

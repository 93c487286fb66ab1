"""npu_apply_rotary_pos_emb and npu_interleave_rope (issue 23): CPU reference kernels against rotation
matrices built index by index, and through npugraph (TorchAir's converters: TensorMove + ApplyRotaryPosEmb,
InterleaveRope) against eager."""
import pytest
import torch

from op_plugin._testing_harness import assert_close, check_compiled

F32, F16, BF16 = torch.float32, torch.float16, torch.bfloat16
npu = torch.ops.npu
pytestmark = pytest.mark.usefixtures("torchair")


def _quarter(d):
    """x @ R = cat(-q1, q0, -q3, q2) of the four quarters of x."""
    r, q = torch.zeros(d, d), d // 4
    for i in range(q):
        r[i + q, i], r[i, i + q] = -1.0, 1.0
        r[i + 3 * q, i + 2 * q], r[i + 2 * q, i + 3 * q] = -1.0, 1.0
    return r


def _matrix(d, mode, rotation):
    return _quarter(d) if mode == "quarter" else rotation(d, mode)


# layout -> (query shape, key shape, cos shape)
LAYOUTS = {
    "BSND": ((2, 3, 4, 8), (2, 3, 2, 8), (2, 3, 1, 8)),
    "SBND": ((3, 2, 4, 8), (3, 2, 2, 8), (3, 2, 1, 8)),
    "BNSD": ((2, 4, 3, 8), (2, 2, 3, 8), (2, 1, 3, 8)),
    "TND": ((5, 4, 8), (5, 2, 8), (5, 1, 8)),
}


@pytest.mark.parametrize("dtype", (F32, F16, BF16))
@pytest.mark.parametrize("mode", ["half", "interleave", "quarter"])
@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_apply_rotary_pos_emb(layout, mode, dtype, rotation):
    qs, ks, cs = LAYOUTS[layout]
    q, k = torch.randn(qs).to(dtype), torch.randn(ks).to(dtype)
    cos, sin = torch.rand(cs).to(dtype), torch.rand(cs).to(dtype)
    got_q, got_k = npu.npu_apply_rotary_pos_emb(q, k, cos, sin, layout, mode)
    r = _matrix(qs[-1], mode, rotation)
    for got, x in ((got_q, q), (got_k, k)):
        want = x.float() * cos.float() + (x.float() @ r) * sin.float()
        assert_close(got, want.to(dtype), "npu_ops", equal_nan=True)
    assert got_q.data_ptr() != q.data_ptr()  # new tensors (the schema declares no alias)


def test_apply_rotary_pos_emb_refusals():
    q, c = torch.randn(1, 2, 2, 8), torch.rand(1, 2, 1, 8)
    with pytest.raises(ValueError, match="rotary_mode"):
        npu.npu_apply_rotary_pos_emb(q, q, c, c, "BSND", "third")
    with pytest.raises(ValueError, match="layout"):
        npu.npu_apply_rotary_pos_emb(q, q, c, c, "NSD")
    with pytest.raises(ValueError, match="narrower"):
        npu.npu_apply_rotary_pos_emb(q, q, c[..., :4], c[..., :4])
    with pytest.raises(TypeError, match="one dtype"):
        npu.npu_apply_rotary_pos_emb(q, q, c.half(), c.half())


@pytest.mark.parametrize("dtype", (F16, BF16))
@pytest.mark.parametrize("cshape", [(2, 1, 3, 8), (2, 1, 1, 8)])
def test_interleave_rope(cshape, dtype, rotation):
    x = torch.randn(2, 4, 3, 8).to(dtype)
    cos, sin = torch.rand(cshape).to(dtype), torch.rand(cshape).to(dtype)
    perm = torch.zeros(8, 8)  # x @ perm: evens first, then odds
    for i in range(4):
        perm[2 * i, i], perm[2 * i + 1, i + 4] = 1.0, 1.0
    q = x.float() @ perm
    want = q * cos.float() + (q @ rotation(8, "half")) * sin.float()
    assert_close(npu.npu_interleave_rope(x, cos, sin), want.to(dtype), "npu_ops", equal_nan=True)


@pytest.mark.parametrize("dtype", (F32, F16, BF16))
@pytest.mark.parametrize("mode", ["half", "interleave", "quarter"])
def test_apply_rotary_pos_emb_compiled(mode, dtype):
    def fn(q, k, cos, sin):
        return npu.npu_apply_rotary_pos_emb(q, k, cos, sin, "BSND", mode)
    qs, ks, cs = LAYOUTS["BSND"]
    args = (torch.randn(qs).to(dtype), torch.randn(ks).to(dtype), torch.rand(cs).to(dtype), torch.rand(cs).to(dtype))
    check_compiled(fn, args, "ApplyRotaryPosEmb", kind="npu_ops")


@pytest.mark.parametrize("dtype", (F16, BF16))
def test_interleave_rope_compiled(dtype):
    args = (torch.randn(2, 4, 3, 8).to(dtype), torch.rand(2, 1, 3, 8).to(dtype), torch.rand(2, 1, 3, 8).to(dtype))
    check_compiled(lambda x, c, s: npu.npu_interleave_rope(x, c, s), args, "InterleaveRope", kind="npu_ops")


def test_rope_compiled_with_dynamic_batch():
    def fn(q, k, cos, sin):
        q2, k2 = npu.npu_apply_rotary_pos_emb(q, k, cos, sin)
        return q2 + 1, k2 * 2
    for b in (2, 3, 5):
        args = (torch.randn(b, 3, 4, 8), torch.randn(b, 3, 2, 8), torch.rand(b, 3, 1, 8), torch.rand(b, 3, 1, 8))
        check_compiled(fn, args, "ApplyRotaryPosEmb", kind="npu_ops", dynamic=True)

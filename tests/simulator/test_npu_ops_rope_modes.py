"""npu_rotary_mul's CANN modes beyond half/interleave (issue 23): "quarter" and "interleave-half"
(RotaryPositionEmbedding modes 2 and 3), their backward (npu_rotary_mul_backward), and the GE kernel
RotaryPositionEmbeddingGrad (modes 0-3), against rotation/permutation matrices built index by index and
torch.autograd through them (float64)."""
import pytest
import torch

from op_plugin._testing_harness import Npugraph, assert_close, run_node

npu = torch.ops.npu
pytestmark = pytest.mark.usefixtures("torchair")
MODES = {"half": 0, "interleave": 1, "quarter": 2, "interleave-half": 3}


def _rotation_matrix(d, mode):
    """R with x @ R = the mode's x_rotate (on the de-interleaved x for interleave-half)."""
    r = torch.zeros(d, d, dtype=torch.float64)
    if mode in ("half", "interleave-half"):
        h = d // 2
        for i in range(h):
            r[i + h, i], r[i, i + h] = -1.0, 1.0  # out[i] = -x[i + h], out[i + h] = x[i]
    elif mode == "interleave":
        for i in range(0, d, 2):
            r[i + 1, i], r[i, i + 1] = -1.0, 1.0  # out[2i] = -x[2i + 1], out[2i + 1] = x[2i]
    else:
        q = d // 4
        for i in range(q):
            r[i + q, i], r[i, i + q] = -1.0, 1.0
            r[i + 3 * q, i + 2 * q], r[i + 2 * q, i + 3 * q] = -1.0, 1.0
    return r


def _first_step(d, mode):
    """P with x @ P = the part CANN multiplies by cos: x, or x de-interleaved (evens then odds)."""
    p = torch.eye(d, dtype=torch.float64)
    if mode == "interleave-half":
        p = torch.zeros(d, d, dtype=torch.float64)
        for i in range(d // 2):
            p[2 * i, i], p[2 * i + 1, i + d // 2] = 1.0, 1.0
    return p


def _plain(x, r1, r2, mode):
    d = x.shape[-1]
    part1 = x @ _first_step(d, mode)
    return part1 * r1 + (part1 @ _rotation_matrix(d, mode)) * r2


def _inputs(dtype=torch.float32):
    return (torch.randn(2, 3, 4, 16).to(dtype), torch.rand(1, 3, 1, 16).to(dtype), torch.rand(1, 3, 1, 16).to(dtype))


@pytest.mark.parametrize("dtype", (torch.float32, torch.float16, torch.bfloat16))
@pytest.mark.parametrize("mode", ["quarter", "interleave-half"])
def test_rotary_mul_modes(mode, dtype):
    x, r1, r2 = _inputs(dtype)
    want = _plain(x.double(), r1.double(), r2.double(), mode)
    assert_close(npu.npu_rotary_mul(x, r1, r2, mode), want.to(dtype), "npu_ops")


@pytest.mark.parametrize("mode", sorted(MODES))
def test_rotary_position_embedding_node_matches_the_modes(mode):
    x, cos, sin = _inputs()
    (got,) = run_node("RotaryPositionEmbedding", [x, cos, sin], mode=MODES[mode])
    assert_close(got, _plain(x.double(), cos.double(), sin.double(), mode).float(), "npu_ops")


def _autograd(x, r1, r2, dy, mode):
    leaves = [t.double().requires_grad_() for t in (x, r1, r2)]
    return torch.autograd.grad(_plain(*leaves, mode), leaves, dy.double())


@pytest.mark.parametrize("mode", sorted(MODES))
def test_rotary_mul_backward_modes(mode):
    x, r1, r2 = _inputs()
    dy = torch.randn_like(x)
    want = _autograd(x, r1, r2, dy, mode)
    got = npu.npu_rotary_mul_backward(dy, x, r1, r2, mode)
    assert_close(got, tuple(w.float() for w in want), "npu_ops", scale=4)
    leaves = [t.clone().requires_grad_() for t in (x, r1, r2)]  # autograd through the op itself
    through_op = torch.autograd.grad(npu.npu_rotary_mul(*leaves, mode), leaves, dy)
    assert_close(through_op, tuple(w.float() for w in want), "npu_ops", scale=4)


@pytest.mark.parametrize("mode", sorted(MODES))
def test_rotary_position_embedding_grad_node(mode):
    x, cos, sin = _inputs()
    dy = torch.randn_like(x)
    want = _autograd(x, cos, sin, dy, mode)
    got = run_node("RotaryPositionEmbeddingGrad", {"dy": dy, "cos": cos, "sin": sin, "x": x}, 3, mode=MODES[mode])
    assert_close(tuple(got), tuple(w.float() for w in want), "npu_ops", scale=4)


def test_rotary_position_embedding_grad_refuses_a_missing_x():
    x, cos, sin = _inputs()
    with pytest.raises(Exception, match="x is not fed") as error:
        run_node("RotaryPositionEmbeddingGrad", {"dy": x, "cos": cos, "sin": sin}, 3, name="rope_grad", mode=0)
    assert "rope_grad" in str(error.value)


@pytest.mark.parametrize("mode", ["quarter", "interleave-half"])
def test_quarter_modes_are_lowered_as_half_off_ascend_950(mode):
    """TorchAir lowers npu_rotary_mul without `rotate` to RotaryMul (no mode: the half rotation) unless the
    SoC is Ascend 950 (arch35); the simulator's host is no Ascend SoC, so graph mode computes the half form,
    as an A2/A3 host's TorchAir would. Recorded here, documented in docs/torch-npu-ops.md."""
    x, r1, r2 = _inputs()
    got = Npugraph(lambda a, b, c: npu.npu_rotary_mul(a, b, c, mode))(x, r1, r2)
    assert_close(got, _plain(x.double(), r1.double(), r2.double(), "half").float(), "npu_ops")


def test_cos_sin_must_broadcast_to_x():
    """CANN: cos/sin broadcast to x's shape (the output has x's shape); a larger cos is refused."""
    x, big = torch.randn(1, 2, 3, 8), torch.rand(2, 2, 3, 8)
    with pytest.raises(ValueError, match="broadcast to input's shape"):
        npu.npu_rotary_mul(x, big, big)
    for op_type, mode in (("RotaryMul", None), ("RotaryPositionEmbedding", 0)):
        attrs = {} if mode is None else {"mode": mode}
        with pytest.raises(Exception, match="do not broadcast to x's shape"):
            run_node(op_type, [x, big, big], **attrs)
    (got,) = run_node("RotaryPositionEmbedding", [torch.randn(5, 2, 8), torch.rand(5, 1, 8), torch.rand(5, 1, 8)],
                      mode=1)  # TND with T1D cos/sin
    assert got.shape == (5, 2, 8)

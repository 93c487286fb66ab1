"""Random GE kernels (kernels/random.py) and the emulated NPU generator (op_plugin._simulator.npu.generator).

The numbers cannot equal CPU eager bit for bit (the simulator draws from torch's CPU generator
seeded by (seed, offset), not CANN's Philox), so these tests check what the ops define: shape,
dtype, value range, distribution moments, and determinism: the same seed gives the same numbers,
an advanced offset gives different ones.
"""
from __future__ import annotations

import pytest
import torch

from op_plugin._simulator import GeExecutionError, capture_graphs
from op_plugin._simulator.npu import generator as rng
from op_plugin._simulator.interpreter.kernels.random.random import stream
from op_plugin._testing_harness import Npugraph, run_node

F16, F32, BF16, I32, I64, U8, U64 = (torch.float16, torch.float32, torch.bfloat16, torch.int32, torch.int64,
                                     torch.uint8, torch.uint64)
DT = {F32: 0, F16: 1, I32: 3, U8: 4, I64: 9, torch.bool: 12, BF16: 27}  # GE-enum dtype numbers


def key_counter(seed, offset):
    return torch.tensor([seed], dtype=U64), torch.tensor([0, offset], dtype=U64), torch.tensor(1, dtype=I32)


def _i64(value):
    return torch.tensor(value, dtype=I64)


# ---- the generator protocol ----------------------------------------------------------------------

def test_generator_follows_torch_manual_seed_and_offsets_restart():
    gen = rng.npu_generator()
    torch.manual_seed(1234)
    assert gen.initial_seed() == 1234 and gen.get_offset() == 0
    gen.set_offset(12)
    assert gen.get_offset() == 12  # nothing reseeded: the offset keeps counting
    torch.randn(3)  # CPU draws do not touch the NPU generator's offset
    assert gen.get_offset() == 12
    torch.manual_seed(1234)  # the same seed again: offsets restart, as on an NPU
    assert gen.get_offset() == 0
    gen.set_offset(24)
    torch.manual_seed(5)
    assert gen.initial_seed() == 5 and gen.get_offset() == 0


def test_generator_own_manual_seed():
    gen = rng.npu_generator()
    gen.manual_seed(77)
    gen.set_offset(8)
    assert gen.initial_seed() == 77 and gen.get_offset() == 8


def test_stream_depends_only_on_seed_and_offset():
    a = torch.rand(8, generator=stream(3, 12))
    assert torch.equal(a, torch.rand(8, generator=stream(3, 12)))
    assert not torch.equal(a, torch.rand(8, generator=stream(3, 24)))
    assert not torch.equal(a, torch.rand(8, generator=stream(4, 12)))


# ---- kernels, one-node graphs ---------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [F32, F16, BF16, torch.float64])
def test_uniform_v2_range_moments_determinism(dtype):
    shape = torch.tensor([200, 100], dtype=I64)
    y = run_node("StatelessRandomUniformV2", [shape, *key_counter(7, 0)], dtype={F32: 0, F16: 1, BF16: 27,
                                                                                 torch.float64: 11}[dtype])[0]
    assert y.shape == (200, 100) and y.dtype == dtype
    assert float(y.min()) >= 0.0 and float(y.max()) < 1.0
    assert abs(float(y.float().mean()) - 0.5) < 0.01 and abs(float(y.float().var()) - 1 / 12) < 0.005
    again = run_node("StatelessRandomUniformV2", [shape, *key_counter(7, 0)], dtype=DT.get(dtype, 11))[0]
    assert torch.equal(y, again)
    other = run_node("StatelessRandomUniformV2", [shape, *key_counter(7, 12)], dtype=DT.get(dtype, 11))[0]
    assert not torch.equal(y, other)


def test_normal_v2_moments_and_empty_shape():
    y = run_node("StatelessRandomNormalV2", [torch.tensor([100000], dtype=I32), *key_counter(1, 4)], dtype=0)[0]
    assert abs(float(y.mean())) < 0.02 and abs(float(y.std()) - 1) < 0.02
    empty = run_node("StatelessRandomNormalV2", [torch.tensor([0, 3], dtype=I64), *key_counter(1, 4)], dtype=0)[0]
    assert empty.shape == (0, 3)
    scalar = run_node("StatelessRandomNormalV2", [torch.zeros(0, dtype=I64), *key_counter(1, 4)], dtype=0)[0]
    assert scalar.shape == ()


def test_stateless_v2_refuses_threefry_and_bad_dtypes():
    shape = torch.tensor([4], dtype=I64)
    key, counter, _ = key_counter(1, 0)
    with pytest.raises(GeExecutionError, match="alg 2"):
        run_node("StatelessRandomUniformV2", [shape, key, counter, torch.tensor(2, dtype=I32)], dtype=0)
    with pytest.raises(GeExecutionError, match="key has dtype int64"):
        run_node("StatelessRandomUniformV2", [shape, key.long(), counter, torch.tensor(1, dtype=I32)], dtype=0)
    with pytest.raises(GeExecutionError, match="not in the prototype"):
        run_node("StatelessRandomUniformV2", [shape, *key_counter(1, 0)], dtype=3)


@pytest.mark.parametrize("p, out", [(0.0, F32), (1.0, F16), (0.3, torch.bool), (0.8, I64)])
def test_bernoulli_scalar_prob(p, out):
    y = run_node("StatelessBernoulli", [torch.tensor([100, 100], dtype=I64), torch.tensor(p), _i64(3), _i64(0)],
                 dtype=DT[out])[0]
    assert y.shape == (100, 100) and y.dtype == out
    assert set(y.float().unique().tolist()) <= {0.0, 1.0}
    assert abs(float(y.float().mean()) - p) < 0.02


def test_bernoulli_tensor_prob_broadcasts_and_checks_range():
    prob = torch.tensor([0.0, 1.0, 0.5]).repeat(2000, 1)
    y = run_node("StatelessBernoulli", [torch.tensor([2000, 3], dtype=I64), prob, _i64(3), _i64(8)], dtype=0)[0]
    assert float(y[:, 0].sum()) == 0 and float(y[:, 1].sum()) == 2000 and abs(float(y[:, 2].mean()) - 0.5) < 0.04
    with pytest.raises(GeExecutionError, match=r"\[0, 1\]"):
        run_node("StatelessBernoulli", [torch.tensor([3], dtype=I64), torch.tensor(1.5), _i64(3), _i64(0)], dtype=0)


def test_dropout_gen_mask_layout_and_do_mask():
    shape = torch.tensor([5, 60], dtype=I64)  # 300 elements -> 384 bits -> 48 bytes
    args = [shape, torch.tensor(0.75), _i64(11), _i64(0), torch.tensor([0, 24], dtype=I64)]
    mask = run_node("StatelessDropOutGenMask", args)[0]
    assert mask.dtype == U8 and mask.shape == (48,)
    bits = ((mask.reshape(-1, 1).int() >> torch.arange(8)) & 1).reshape(-1)
    assert int(bits[300:].sum()) == 0  # the padding bits are zero
    assert abs(float(bits[:300].float().mean()) - 0.75) < 0.08
    assert torch.equal(mask, run_node("StatelessDropOutGenMask", args)[0])
    x = torch.randn(5, 60)
    y = run_node("DropOutDoMask", [x, mask, torch.tensor(0.75)])[0]
    keep = bits[:300].reshape(5, 60).bool()
    torch.testing.assert_close(y, torch.where(keep, x / 0.75, torch.zeros(())))
    with pytest.raises(GeExecutionError, match="bits for"):
        run_node("DropOutDoMask", [torch.randn(400), mask, torch.tensor(0.75)])


def test_randperm_is_a_permutation_in_dtype():
    for dtype in (I64, I32, F32):
        y = run_node("StatelessRandperm", [_i64(50), _i64(2), _i64(0)], dtype=DT[dtype], layout=1)[0]
        assert y.dtype == dtype and torch.equal(y.sort().values.long(), torch.arange(50))
    assert run_node("StatelessRandperm", [_i64(0), _i64(2), _i64(0)], dtype=9)[0].shape == (0,)


@pytest.mark.parametrize("replacement", [False, True])
def test_multinomial(replacement):
    weights = torch.tensor([[0.0, 1.0, 3.0, 0.0], [1.0, 1.0, 1.0, 1.0]])
    samples = 2 if not replacement else 4000
    y = run_node("MultinomialWithReplacement", [weights, _i64(5), _i64(0)], numsamples=samples,
                 replacement=replacement)[0]
    assert y.dtype == I64 and y.shape == (2, samples)
    assert not bool(((y[0] == 0) | (y[0] == 3)).any())  # zero-weight categories never drawn
    if replacement:
        assert abs(float((y[0] == 2).float().mean()) - 0.75) < 0.03
    else:
        assert len(set(y[1].tolist())) == 2 and sorted(y[0].tolist()) == [1, 2]
    with pytest.raises(GeExecutionError, match="numsamples 5"):
        run_node("MultinomialWithReplacement", [weights, _i64(5), _i64(0)], numsamples=5)
    with pytest.raises(GeExecutionError, match="positive weight"):
        run_node("MultinomialWithReplacement", [weights, _i64(5), _i64(0)], numsamples=3)


# ---- through TorchAir's converters --------------------------------------------------------------

def compile_twice(fn, *args):
    """Two runs under torch.manual_seed(0), then one more: (first, repeated, next), and the GE types."""
    compiled = Npugraph(fn)
    torch.manual_seed(0)
    with capture_graphs() as graphs:
        first = compiled(*args)
    following = compiled(*args)
    torch.manual_seed(0)
    repeated = compiled(*args)
    return first, repeated, following, [op.type for graph in graphs for op in graph.op]


def _assert_deterministic(first, repeated, following):
    assert torch.equal(first, repeated), "same seed, same numbers"
    assert not torch.equal(first, following), "the next run (advanced offset) draws new numbers"


def test_compiled_bernoulli_p():
    first, repeated, following, types_ = compile_twice(lambda x: torch.bernoulli(x, 0.25), torch.zeros(64, 64))
    assert "StatelessBernoulli" in types_ and first.shape == (64, 64) and first.dtype == F32
    assert abs(float(first.mean()) - 0.25) < 0.03
    _assert_deterministic(first, repeated, following)


def test_compiled_randperm_and_multinomial():
    first, repeated, following, types_ = compile_twice(lambda n: torch.randperm(30) + n, torch.tensor(0))
    assert "StatelessRandperm" in types_ and torch.equal(first.sort().values, torch.arange(30))
    _assert_deterministic(first, repeated, following)
    w = torch.tensor([[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]])
    first, repeated, following, types_ = compile_twice(lambda p: torch.multinomial(p, 4), w)
    assert "MultinomialWithReplacement" in types_ and first.shape == (1, 4) and len(set(first[0].tolist())) == 4
    assert torch.equal(first, repeated)


@pytest.mark.parametrize("draw, low, high, mean, var", [
    (lambda x: torch.rand(200, 100) + x, 0.0, 1.0, 0.5, 1 / 12),
    (lambda x: torch.randn(200, 100) + x, None, None, 0.0, 1.0),
    (lambda x: torch.empty(200, 100).uniform_(-2.0, 4.0) + x, -2.0, 4.0, 1.0, 3.0),
])
def test_compiled_rand_randn_uniform(draw, low, high, mean, var):
    first, repeated, following, _ = compile_twice(draw, torch.tensor(0.0))
    assert first.shape == (200, 100) and first.dtype == F32
    if low is not None:
        assert float(first.min()) >= low and float(first.max()) < high
    assert abs(float(first.mean()) - mean) < 0.05 * max(1.0, var) and abs(float(first.var()) - var) < 0.05 * var
    _assert_deterministic(first, repeated, following)


def test_compiled_dropout():
    first, repeated, following, types_ = compile_twice(
        lambda x: torch.ops.aten.native_dropout(x, 0.25, True)[0], torch.ones(64, 64))
    assert "StatelessDropOutGenMask" in types_ and "DropOutDoMask" in types_
    assert bool(((first == 0) | torch.isclose(first, torch.tensor(1 / 0.75))).all())
    assert abs(float((first == 0).float().mean()) - 0.25) < 0.03
    _assert_deterministic(first, repeated, following)

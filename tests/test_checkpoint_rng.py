"""Issue 27: random ops inside activation-checkpointed regions through npugraph.

`torch.utils.checkpoint` (use_reentrant=False with preserve_rng_state True or False, and
use_reentrant=True, which dynamo traces into the same checkpoint region) under torch.compile
saves the NPU generator's state before each random op of the region (`run_and_save_rng_state`) and
replays the op with it when the backward recomputes the region (`run_with_rng_state`): op_plugin's
corrections of TorchAir's converters (op_plugin/_lowering/rng_converters.py), the emulated NPU
generator's state (op_plugin/_simulator/npu/generator.py).

Oracle: the compiled dropout mask cannot equal CPU eager's (another generator), so the mask is read
back from the compiled forward's output (the pre-dropout values are sigmoids, never 0) and eager
torch recomputes the block with that mask: the compiled gradients equal those eager gradients only if
the recomputation drew the forward's mask."""
import struct

import pytest
import torch
from torch.utils.checkpoint import checkpoint

P = 0.4


class _Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.first, self.second = torch.nn.Linear(8, 16), torch.nn.Linear(16, 8)

    def region(self, x):
        hidden = torch.nn.functional.dropout(torch.sigmoid(self.first(x)), P, training=True)
        return torch.nn.functional.dropout(torch.sigmoid(self.second(hidden)), P, training=True), hidden

    def forward(self, x, preserve_rng_state=True, use_reentrant=False):
        out, hidden = checkpoint(self.region, x, use_reentrant=use_reentrant, preserve_rng_state=preserve_rng_state)
        return out, hidden


def _eager_with_masks(block, x, keep_hidden, keep_out):
    hidden = torch.sigmoid(block.first(x)) * keep_hidden / (1 - P)
    return torch.sigmoid(block.second(hidden)) * keep_out / (1 - P), hidden


def _grads(block, x):
    return [x.grad] + [p.grad for p in block.parameters()]


def _train_once(block, x, compiled, weight):
    out, hidden = compiled(x)
    ((out * weight).sum() + hidden.sum()).backward()
    return out.detach(), hidden.detach()


@pytest.mark.parametrize("dynamic", [False, True])
@pytest.mark.parametrize("preserve_rng_state, use_reentrant", [(True, False), (False, False), (True, True)])
def test_recomputed_region_draws_the_forwards_masks(preserve_rng_state, use_reentrant, dynamic):
    torch.manual_seed(0)
    block, weight = _Block(), torch.randn(8)
    torch._dynamo.reset()
    compiled = torch.compile(lambda x: block(x, preserve_rng_state, use_reentrant), backend="npugraph",
                             dynamic=dynamic)
    for rows in (4, 6):  # dynamic: a second size through the same graph
        x = torch.randn(rows, 8, requires_grad=True)
        block.zero_grad()
        out, hidden = _train_once(block, x, compiled, weight)
        keep_hidden, keep_out = hidden != 0, out != 0
        for keep in (keep_hidden, keep_out):  # the masks are random, not all kept or all dropped
            assert 0 < keep.float().mean() < 1
        got = _grads(block, x)
        x_ref = x.detach().clone().requires_grad_()
        block.zero_grad()
        out_ref, hidden_ref = _eager_with_masks(block, x_ref, keep_hidden, keep_out)
        ((out_ref * weight).sum() + hidden_ref.sum()).backward()
        torch.testing.assert_close(out, out_ref.detach())
        torch.testing.assert_close(hidden, hidden_ref.detach())
        for g, want in zip(got, _grads(block, x_ref), strict=True):
            torch.testing.assert_close(g, want)


def test_same_seed_same_masks_next_run_new_masks():
    """An Ascend host's semantics: torch.manual_seed(s) restarts the NPU generator (seed s, offset 0),
    so the same seed gives the same masks; each run advances the offset, so the next run differs."""
    torch.manual_seed(0)
    block = _Block()
    torch._dynamo.reset()
    compiled = torch.compile(block, backend="npugraph")
    x = torch.randn(4, 8)
    torch.manual_seed(123)
    first = compiled(x)[0]
    second = compiled(x)[0]
    torch.manual_seed(123)
    again = compiled(x)[0]
    torch.testing.assert_close(again, first, rtol=0, atol=0)
    assert not torch.equal(first != 0, second != 0)


@pytest.mark.parametrize("seed", [2**63, 2**64 - 1])
def test_unsigned_seeds_at_or_above_two_to_the_63(seed):
    """torch.manual_seed(-1) and torch.seed() give seeds >= 2**63 (uint64); TorchAir bakes the seed
    into an int64 Const: the emulated generator hands it the same 64 bits as a signed int64."""
    torch.manual_seed(0)
    block = _Block()
    torch._dynamo.reset()
    compiled = torch.compile(block, backend="npugraph")
    x = torch.randn(4, 8, requires_grad=True)
    torch.manual_seed(seed)
    out, hidden = compiled(x)
    (out.sum() + hidden.sum()).backward()
    torch.manual_seed(seed)
    again, _ = compiled(x)
    torch.testing.assert_close(again.detach(), out.detach(), rtol=0, atol=0)
    assert 0 < (out != 0).float().mean() < 1


def test_generator_state_has_torch_npus_layout():
    """torch.npu.get_rng_state(): 16 bytes, uint64 seed then int64 offset, little-endian."""
    from op_plugin._simulator.npu.generator import npu_generator

    generator = npu_generator()
    torch.manual_seed(2**64 - 3)
    generator.set_offset(40)
    state = generator.get_state()
    assert state.dtype == torch.uint8 and state.shape == (16,)
    assert bytes(state.tolist()) == struct.pack("<Qq", 2**64 - 3, 40)


@pytest.mark.parametrize("seed", [3, 2**64 - 1])
def test_rand_in_a_checkpointed_region_is_replayed(seed):
    """y = x * rand(x.shape) in a checkpointed region: dy/dx is the forward's rand, read back as y / x."""
    def region(x):
        return x * torch.rand(x.shape)

    torch._dynamo.reset()
    compiled = torch.compile(lambda x: checkpoint(region, x, use_reentrant=False), backend="npugraph")
    x = (torch.rand(4, 8) + 0.5).requires_grad_()
    torch.manual_seed(seed)
    y = compiled(x)
    y.sum().backward()
    drawn = (y / x).detach()
    assert bool(((drawn >= 0) & (drawn < 1)).all()) and drawn.std() > 0.1
    torch.testing.assert_close(x.grad, drawn)

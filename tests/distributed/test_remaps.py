"""Issue 24, defect (a): on a CPU host `dist.broadcast`, `dist.all_to_all`, `dist.send`/`dist.recv` in
compiled code go through TorchAir's traceable-collective remaps, which TorchAir adds when imported.
The simulator imports TorchAir lazily; a distributed process now loads it at dynamo's first trace,
so even the first compile of such code traces whole (fullgraph=True), in a process that has compiled
nothing before. After that, other backends (aot_eager) still run those collectives on CPU tensors."""
import sys

import torch
import torch.distributed as dist

WORLD = 2


def _input(rank: int, shape) -> torch.Tensor:
    return torch.randn(shape, generator=torch.Generator().manual_seed(300 + rank))


# ---- cases (run on every rank) ----------------------------------------------------------------------

def first_trace_case():
    assert "torchair" not in sys.modules, "TorchAir was loaded before the first trace"
    rank = dist.get_rank()

    def fn(x):
        y = x * 2
        dist.broadcast(y, src=0)
        outputs = [torch.empty(2, 3) for _ in range(WORLD)]
        dist.all_to_all(outputs, list((y + x).chunk(WORLD)))
        return torch.cat(outputs) + 1

    x = _input(rank, (4, 3))
    compiled = torch.compile(fn, backend="npugraph", fullgraph=True)(x)
    eager = fn(x)
    assert torch.equal(compiled, eager), (compiled, eager)
    expected = torch.cat([(_input(0, (4, 3)) * 2 + _input(r, (4, 3))).chunk(WORLD)[rank] for r in range(WORLD)]) + 1
    torch.testing.assert_close(compiled, expected)
    return "torchair" in sys.modules


def aot_eager_case():
    rank = dist.get_rank()

    def fn(x):
        y = x + 1
        dist.broadcast(y, src=1)
        return y * 3

    x = _input(rank, (5,))
    compiled = torch.compile(fn, backend="aot_eager", fullgraph=True)(x)
    assert torch.equal(compiled, fn(x))
    return "torchair" in sys.modules


# ---- tests (parent side) ---------------------------------------------------------------------------

def test_collective_remaps_in_place_at_the_first_trace(fresh_ranks):
    group = fresh_ranks(WORLD)
    assert group.torchair_loaded_at_start == [False] * WORLD  # import op_plugin does not load it
    assert group.run(first_trace_case) == [True] * WORLD
    assert group.run(aot_eager_case) == [True] * WORLD

"""Megatron-style tensor parallelism compiled with npugraph: a column-parallel then row-parallel MLP
with one all_reduce, on 2 ranks, and the same block inside TP x DP subgroups on 4 ranks. Every rank
is compared with eager (the same sharded module, not compiled) and with the unsharded model; dynamic
graphs are run at two batch sizes."""
import pytest
import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol

HIDDEN, FFN = 8, 16


def _full_weights():
    generator = torch.Generator().manual_seed(7)
    return {"w1": torch.randn(FFN, HIDDEN, generator=generator) / 3, "b1": torch.randn(FFN, generator=generator),
            "w2": torch.randn(HIDDEN, FFN, generator=generator) / 4, "b2": torch.randn(HIDDEN, generator=generator)}


def _batch(rows: int, seed: int) -> torch.Tensor:
    return torch.randn(rows, HIDDEN, generator=torch.Generator().manual_seed(seed))


def _unsharded(x, w):
    return torch.relu(x @ w["w1"].T + w["b1"]) @ w["w2"].T + w["b2"]


class ParallelMLP(torch.nn.Module):
    """fc1 split by output features (column parallel), fc2 by input features (row parallel): one
    all_reduce over the tensor-parallel group joins the partial sums."""

    def __init__(self, weights, tp_rank: int, tp_size: int, tp_group):
        super().__init__()
        shard = FFN // tp_size
        rows = slice(tp_rank * shard, (tp_rank + 1) * shard)
        self.w1 = torch.nn.Parameter(weights["w1"][rows].clone())
        self.b1 = torch.nn.Parameter(weights["b1"][rows].clone())
        self.w2 = torch.nn.Parameter(weights["w2"][:, rows].clone())
        self.b2 = torch.nn.Parameter(weights["b2"].clone())
        self.tp_group = tp_group

    def forward(self, x):
        partial = torch.relu(x @ self.w1.T + self.b1) @ self.w2.T
        return funcol.all_reduce(partial, "sum", self.tp_group) + self.b2


def _check(compiled, eager, unsharded):
    torch.testing.assert_close(compiled, eager, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(compiled, unsharded)
    return float((compiled - eager).abs().max())


# ---- cases (run on every rank) ----------------------------------------------------------------------

def tp_mlp_case(dynamic):
    rank, world = dist.get_rank(), dist.get_world_size()
    weights = _full_weights()
    model = ParallelMLP(weights, rank, world, dist.group.WORLD)
    compiled = torch.compile(model, backend="npugraph", dynamic=dynamic, fullgraph=True)
    differences = []
    with torch.no_grad():
        for rows in ([3, 5] if dynamic else [3]):
            x = _batch(rows, seed=11)  # tensor parallel: every rank sees the same batch
            differences.append(_check(compiled(x), model(x), _unsharded(x, weights)))
    return differences


def tp_dp_case(dynamic):
    """4 ranks: TP groups {0,1} {2,3}, DP groups {0,2} {1,3}; each DP replica gets its own batch and
    the outputs are averaged over the DP group."""
    rank = dist.get_rank()
    tp_groups = [dist.new_group([0, 1]), dist.new_group([2, 3])]
    dp_groups = [dist.new_group([0, 2]), dist.new_group([1, 3])]
    dp_index, tp_rank = divmod(rank, 2)
    weights = _full_weights()
    model = ParallelMLP(weights, tp_rank, 2, tp_groups[dp_index])
    dp_group = dp_groups[tp_rank]

    def step(x):
        return funcol.all_reduce(model(x), "sum", dp_group) / 2

    compiled = torch.compile(step, backend="npugraph", dynamic=dynamic, fullgraph=True)
    differences = []
    with torch.no_grad():
        for rows in ([2, 4] if dynamic else [2]):
            unsharded = sum(_unsharded(_batch(rows, seed=20 + d), weights) for d in range(2)) / 2
            x = _batch(rows, seed=20 + dp_index)
            differences.append(_check(compiled(x), step(x), unsharded))
    return differences


# ---- tests (parent side) ---------------------------------------------------------------------------

DYNAMIC = [pytest.param(False, id="static"), pytest.param(True, id="dynamic")]


@pytest.mark.parametrize("dynamic", DYNAMIC)
def test_tp_mlp_two_ranks(ranks, dynamic):
    ranks(2).run(tp_mlp_case, dynamic)


@pytest.mark.parametrize("dynamic", DYNAMIC)
def test_tp_dp_subgroups_four_ranks(ranks, dynamic):
    ranks(4).run(tp_dp_case, dynamic)

"""torch_npu's expert-parallel MoE ops on 2 gloo ranks: npu_moe_distribute_dispatch and
npu_moe_distribute_combine and their _v2, eager (CPU reference kernels) and compiled with npugraph
(TorchAir lowers them to MoeDistributeDispatch(V2) / MoeDistributeCombine(V2)), static and dynamic.

The row order of expand_x within an expert and the values of expand_idx / ep_recv_counts are
implementation-defined (CANN's docs), so the tests check only what is defined: per local expert, the
multiset of token rows expand_x holds and their count, against every rank's routing regenerated on
this rank; and combine(expert(dispatch(x))) against a dense per-token MoE computed from this rank's
tokens alone (no communication): x[t] = sum_j scale[t, j] * expert_{ids[t, j]}(x[t])."""
import pytest
import torch
import torch.distributed as dist

from op_plugin._simulator.npu.collective_matmul import hccl_comm_name

WORLD, EXPERTS, TOP_K, HIDDEN = 2, 4, 2, 8
LOCAL = EXPERTS // WORLD


def _inputs(rank: int, batch: int):
    """x, expert_ids (distinct top-k experts per token; expert 3 gets no token on rank 1) and scales."""
    gen = torch.Generator().manual_seed(100 * rank + batch)
    x = torch.randn(batch, HIDDEN, generator=gen).bfloat16()
    scores = torch.rand(batch, EXPERTS, generator=gen)
    if rank == 1:
        scores[:, 3] = -1.0
    ids = scores.topk(TOP_K, dim=1).indices.to(torch.int32)
    scales = torch.softmax(torch.randn(batch, TOP_K, generator=gen), dim=1)
    return x, ids, scales


def _expert_weight(expert: int) -> torch.Tensor:
    return torch.randn(HIDDEN, HIDDEN, generator=torch.Generator().manual_seed(1000 + expert)).bfloat16()


def _expert(rows: torch.Tensor, expert: int) -> torch.Tensor:
    return (rows.float() @ _expert_weight(expert).float()).bfloat16()


def _moe_layer(x, ids, scales, weights, hcom, rank, v2):
    """dispatch, each row through its local expert (the expert found from expert_token_nums, without
    data-dependent shapes), combine; the _v2 ops when v2."""
    dispatch = torch.ops.npu.npu_moe_distribute_dispatch_v2 if v2 else torch.ops.npu.npu_moe_distribute_dispatch
    combine = torch.ops.npu.npu_moe_distribute_combine_v2 if v2 else torch.ops.npu.npu_moe_distribute_combine
    expand_x, _, expand_idx, token_nums, ep_recv_counts, _, _ = dispatch(x, ids, hcom, WORLD, rank, EXPERTS)
    ends = torch.cumsum(token_nums, 0)
    row = torch.arange(expand_x.shape[0]).unsqueeze(1)
    local = (row >= ends.unsqueeze(0)).sum(1)  # the local expert of each row (LOCAL for the padding rows)
    out = torch.zeros(expand_x.shape, dtype=torch.float32)
    for e in range(LOCAL):
        out = out + (local == e).unsqueeze(1).float() * (expand_x.float() @ weights[e].float())
    combined = combine(out.bfloat16(), ids, expand_idx, ep_recv_counts, scales, hcom, WORLD, rank, EXPERTS)
    return expand_x, token_nums, combined


def _rows(t: torch.Tensor) -> list:
    return sorted(tuple(r) for r in t.float().tolist())


def _check_dispatch(rank, batch, expand_x, token_nums):
    """expand_x holds, per local expert, exactly the rows routed to it from every rank."""
    every = [_inputs(r, batch) for r in range(WORLD)]
    assert token_nums.dtype == torch.int64 and token_nums.shape == (LOCAL,)
    start = 0
    for e in range(LOCAL):
        expert = rank * LOCAL + e
        want = [x[t] for x, ids, _ in every for t in range(batch) for j in range(TOP_K) if ids[t, j] == expert]
        count = int(token_nums[e])
        assert count == len(want), (expert, count, len(want))
        got = expand_x[start:start + count]
        assert _rows(got) == _rows(torch.stack(want) if want else got[:0]), f"expert {expert}: other rows"
        start += count
    assert torch.count_nonzero(expand_x[start:]) == 0, "rows past the routed ones must be zeros"


def _dense_moe(rank, batch):
    """The per-token MoE on this rank's tokens alone: sum_j scale * expert(x), in float32."""
    x, ids, scales = _inputs(rank, batch)
    out = torch.zeros(batch, HIDDEN)
    for t in range(batch):
        for j in range(TOP_K):
            out[t] += scales[t, j] * _expert(x[t:t + 1], int(ids[t, j]))[0].float()
    return out


def moe_case(dynamic, v2):
    rank = dist.get_rank()
    hcom = hccl_comm_name()
    weights = [_expert_weight(rank * LOCAL + e) for e in range(LOCAL)]
    compiled_fn = torch.compile(_moe_layer, backend="npugraph", dynamic=dynamic, fullgraph=True)
    for batch in ([5, 7] if dynamic else [5]):
        x, ids, scales = _inputs(rank, batch)
        eager = _moe_layer(x, ids, scales, weights, hcom, rank, v2)
        compiled = compiled_fn(x, ids, scales, weights, hcom, rank, v2)
        for mode, (expand_x, token_nums, combined) in (("eager", eager), ("compiled", compiled)):
            _check_dispatch(rank, batch, expand_x, token_nums)
            assert combined.dtype == torch.bfloat16 and combined.shape == (batch, HIDDEN)
            torch.testing.assert_close(combined.float(), _dense_moe(rank, batch), rtol=1e-2, atol=1e-2,
                                       msg=lambda m, w=mode: f"{w} vs the dense MoE: {m}")
        torch.testing.assert_close(compiled[0], eager[0], rtol=0, atol=0)
        torch.testing.assert_close(compiled[1], eager[1], rtol=0, atol=0)
        torch.testing.assert_close(compiled[2], eager[2], rtol=1e-2, atol=1e-2)


def uneven_batch_case():
    """Ranks with different BS and global_bs=0 (CANN requires global_bs = max BS * ep_world_size then)."""
    rank = dist.get_rank()
    x, ids, _ = _inputs(rank, 4 + 2 * rank)
    try:
        torch.ops.npu.npu_moe_distribute_dispatch(x, ids, hccl_comm_name(), WORLD, rank, EXPERTS)
    except (ValueError, RuntimeError) as error:
        return str(error)
    raise AssertionError("a dispatch over ranks with different batch sizes ran")


def divergent_graph_case():
    """Compiled, ranks with different BS: the ranks' agreement on the MoeDistributeDispatch node fails on
    both, naming it, before any row moves."""
    rank = dist.get_rank()
    x, ids, _ = _inputs(rank, 4 + 2 * rank)
    hcom = hccl_comm_name()

    def dispatch(x, ids):
        return torch.ops.npu.npu_moe_distribute_dispatch(x, ids, hcom, WORLD, rank, EXPERTS)[0]

    try:
        torch.compile(dispatch, backend="npugraph", dynamic=False, fullgraph=True)(x, ids)
    except Exception as error:  # whatever wraps the executor's error
        return str(error)
    raise AssertionError("a rank-divergent MoE graph ran")


def subgroup_case():
    """4 ranks, EP groups {0, 2} and {1, 3} (each its own hcom): the MoE layer compiled dynamic against
    eager and the dense MoE."""
    rank = dist.get_rank()
    groups = [dist.new_group([0, 2]), dist.new_group([1, 3])]
    group, ep_rank = groups[rank % 2], rank // 2
    hcom = hccl_comm_name(group)
    weights = [_expert_weight(ep_rank * LOCAL + e) for e in range(LOCAL)]
    compiled_fn = torch.compile(_moe_layer, backend="npugraph", dynamic=True, fullgraph=True)
    for batch in (3, 6):
        x, ids, scales = _inputs(ep_rank, batch)
        eager = _moe_layer(x, ids, scales, weights, hcom, ep_rank, False)
        compiled = compiled_fn(x, ids, scales, weights, hcom, ep_rank, False)
        _check_dispatch(ep_rank, batch, compiled[0], compiled[1])
        torch.testing.assert_close(compiled[0], eager[0], rtol=0, atol=0)
        torch.testing.assert_close(compiled[2].float(), _dense_moe(ep_rank, batch), rtol=1e-2, atol=1e-2)
    return hcom


def cumulative_counts_case():
    """expert_token_nums_type=0 gives the prefix sums of the counts."""
    rank = dist.get_rank()
    x, ids, _ = _inputs(rank, 6)
    hcom = hccl_comm_name()
    counts = torch.ops.npu.npu_moe_distribute_dispatch(x, ids, hcom, WORLD, rank, EXPERTS)[3]
    sums = torch.ops.npu.npu_moe_distribute_dispatch(x, ids, hcom, WORLD, rank, EXPERTS, expert_token_nums_type=0)[3]
    assert torch.equal(sums, torch.cumsum(counts, 0)), (counts, sums)
    return counts.tolist()


def refusals_case():
    rank = dist.get_rank()
    x, ids, scales = _inputs(rank, 4)
    hcom = hccl_comm_name()
    dispatch = torch.ops.npu.npu_moe_distribute_dispatch
    calls = (lambda: dispatch(x, ids, hcom, WORLD, rank, EXPERTS, quant_mode=2),
             lambda: dispatch(x, ids, hcom, WORLD, rank, EXPERTS, tp_world_size=2),
             lambda: dispatch(x, ids, hcom, WORLD, rank, EXPERTS, shared_expert_rank_num=1),
             lambda: dispatch(x.float(), ids, hcom, WORLD, rank, EXPERTS),
             lambda: dispatch(x, ids, "hccl_world_group", WORLD, rank, EXPERTS),
             lambda: torch.ops.npu.npu_moe_distribute_combine(
                 x, ids, torch.zeros(8, dtype=torch.int32), torch.zeros(4, dtype=torch.int32), scales, hcom, WORLD,
                 rank, EXPERTS, shared_expert_x=x),
             lambda: torch.ops.npu.npu_moe_distribute_dispatch_v2(x, ids, hcom, WORLD, rank, EXPERTS,
                                                                  zero_expert_num=1))
    messages = []
    for call in calls:
        try:
            call()
        except (ValueError, RuntimeError) as error:
            messages.append(str(error))
        else:
            raise AssertionError("an unsupported MoE dispatch/combine call ran")
    return messages


@pytest.mark.parametrize("v2", [pytest.param(False, id="v1"), pytest.param(True, id="v2")])
@pytest.mark.parametrize("dynamic", [pytest.param(False, id="static"), pytest.param(True, id="dynamic")])
def test_moe_dispatch_combine_match_the_dense_moe(ranks, dynamic, v2):
    ranks(WORLD).run(moe_case, dynamic, v2)


def test_moe_dispatch_cumulative_token_counts(ranks):
    counts = ranks(WORLD).run(cumulative_counts_case)
    assert sum(sum(c) for c in counts) == WORLD * 6 * TOP_K, counts  # every routed pair lands on one expert


def test_moe_dispatch_combine_refusals(ranks):
    messages = ranks(WORLD).run(refusals_case)[0]
    assert "npu_moe_distribute_dispatch" in messages[0] and "quant_mode=2" in messages[0]
    assert "tp_world_size=2" in messages[1]
    assert "shared_expert_rank_num=1" in messages[2]
    assert "npu_moe_distribute_dispatch" in messages[3] and "float32" in messages[3]
    assert "built for HCCL" in messages[4]
    assert "npu_moe_distribute_combine" in messages[5] and "shared_expert_x" in messages[5]
    assert "npu_moe_distribute_dispatch_v2" in messages[6] and "special" in messages[6]


def test_moe_dispatch_refuses_uneven_batches(ranks):
    messages = ranks(WORLD).run(uneven_batch_case)
    assert all("npu_moe_distribute_dispatch" in m and "batch sizes [4, 6]" in m for m in messages), messages


def test_moe_over_expert_parallel_subgroups_four_ranks(ranks):
    names = ranks(4).run(subgroup_case)
    assert names[0] == names[2] != names[1] == names[3], names
    assert names[0].endswith("rank_list=0,2") and names[1].endswith("rank_list=1,3"), names


def test_moe_rank_divergent_graph_names_the_node(ranks):
    messages = ranks(WORLD).run(divergent_graph_case)
    for message in messages:
        assert "MoeDistributeDispatch" in message and "disagree" in message and "another shape" in message, message

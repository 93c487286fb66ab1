"""combine's `shared_expert_x` on 2 gloo ranks (issue 34), eager and compiled with npugraph.

npu_moe_distribute_combine_v2: CANN's CombineV2 adds the shared expert's output to every token, unweighted
(hicann ops-transformer mc2/moe_distribute_combine_v2: the kernel adds `sharedExpertX` to the float32 sum of
the weighted expert rows and rounds once; the doc: "tokens computed by shared experts", shape (BS, H) or
(d0, d1, H) with d0 * d1 = BS, expand_x's dtype). Oracle: a float64 reference written from that,
x[t] = sum_j scale[t, j] * expert_{ids[t, j]}(x[t]) + shared[t], from this rank's tokens alone.

npu_moe_distribute_combine (v1): torch_npu documents shared_expert_x as reserved and ignores it (CANN's
aclnnMoeDistributeCombine has no such input); eager refuses it by name, and tracing refuses it in the
wheel's Meta (`npu_moe_distribute_combine_meta` has no such parameter, on an NPU host too)."""
import pytest
import torch
import torch.distributed as dist

from op_plugin._simulator.npu.collective_matmul import hccl_comm_name

WORLD, EXPERTS, TOP_K, HIDDEN = 2, 4, 2, 8
LOCAL = EXPERTS // WORLD


def _inputs(rank: int, batch: int):
    gen = torch.Generator().manual_seed(300 + 100 * rank + batch)
    x = torch.randn(batch, HIDDEN, generator=gen).bfloat16()
    ids = torch.rand(batch, EXPERTS, generator=gen).topk(TOP_K, dim=1).indices.to(torch.int32)
    scales = torch.softmax(torch.randn(batch, TOP_K, generator=gen), dim=1)
    shared = (4 * torch.randn(batch, HIDDEN, generator=gen)).bfloat16()  # large: its absence cannot pass
    return x, ids, scales, shared


def _weight(expert: int) -> torch.Tensor:
    return torch.randn(HIDDEN, HIDDEN, generator=torch.Generator().manual_seed(2000 + expert)).bfloat16()


def _layer(x, ids, scales, shared, weights, hcom, rank):
    """dispatch_v2, each row through its local expert, combine_v2 with the shared expert's output."""
    expand_x, _, assist, token_nums, ep_recv_counts, _, _ = torch.ops.npu.npu_moe_distribute_dispatch_v2(
        x, ids, hcom, WORLD, rank, EXPERTS)
    ends = torch.cumsum(token_nums, 0)
    local = (torch.arange(expand_x.shape[0]).unsqueeze(1) >= ends.unsqueeze(0)).sum(1)
    out = torch.zeros(expand_x.shape, dtype=torch.float32)
    for e in range(LOCAL):
        out = out + (local == e).unsqueeze(1).float() * (expand_x.float() @ weights[e].float())
    return torch.ops.npu.npu_moe_distribute_combine_v2(out.bfloat16(), ids, assist, ep_recv_counts, scales, hcom,
                                                       WORLD, rank, EXPERTS, shared_expert_x=shared)


def _reference(x, ids, scales, shared):
    """float64, from CANN's definition; each expert row rounded to bfloat16 as the layer feeds combine."""
    out = shared.double().clone()
    for t in range(x.shape[0]):
        for j in range(TOP_K):
            row = (x[t:t + 1].float() @ _weight(int(ids[t, j])).float()).bfloat16()[0]
            out[t] += scales[t, j].double() * row.double()
    return out


def shared_expert_case(dynamic, three_d):
    rank = dist.get_rank()
    hcom = hccl_comm_name()
    weights = [_weight(rank * LOCAL + e) for e in range(LOCAL)]
    compiled = torch.compile(_layer, backend="npugraph", dynamic=dynamic, fullgraph=True)
    batch = 6
    x, ids, scales, shared = _inputs(rank, batch)
    given = shared.reshape(2, batch // 2, HIDDEN) if three_d else shared
    want = _reference(x, ids, scales, shared)
    without = _reference(x, ids, scales, torch.zeros_like(shared))
    assert (want - without).abs().max() > 1.0  # the shared expert changes the result
    for mode, fn in (("eager", _layer), ("compiled", compiled)):
        got = fn(x, ids, scales, given, weights, hcom, rank)
        assert got.dtype == torch.bfloat16 and got.shape == (batch, HIDDEN), (mode, got.dtype, got.shape)
        # one bfloat16 rounding of the total (2**-8 relative) on top of the float32 sum
        torch.testing.assert_close(got.double(), want, rtol=2 ** -7, atol=1e-2,
                                   msg=lambda m, w=mode: f"{w} vs the float64 reference: {m}")


def v1_shared_expert_refused_case(compiled):
    rank = dist.get_rank()
    hcom = hccl_comm_name()
    x, ids, scales, shared = _inputs(rank, 4)

    def layer(x, ids, scales, shared):
        expand_x, _, expand_idx, _, ep_recv_counts, _, _ = torch.ops.npu.npu_moe_distribute_dispatch(
            x, ids, hcom, WORLD, rank, EXPERTS)
        return torch.ops.npu.npu_moe_distribute_combine(expand_x, ids, expand_idx, ep_recv_counts, scales, hcom,
                                                        WORLD, rank, EXPERTS, shared_expert_x=shared)

    fn = torch.compile(layer, backend="npugraph", fullgraph=True) if compiled else layer
    try:
        fn(x, ids, scales, shared)
    except Exception as error:  # whatever wraps the converter's error
        return str(error)
    raise AssertionError("npu_moe_distribute_combine ran with its reserved shared_expert_x")


@pytest.mark.parametrize("three_d", [pytest.param(False, id="bs_h"), pytest.param(True, id="d0_d1_h")])
@pytest.mark.parametrize("dynamic", [pytest.param(False, id="static"), pytest.param(True, id="dynamic")])
def test_combine_v2_adds_the_shared_expert_output(ranks, dynamic, three_d):
    ranks(WORLD).run(shared_expert_case, dynamic, three_d)


@pytest.mark.parametrize("compiled", [pytest.param(False, id="eager"), pytest.param(True, id="npugraph")])
def test_combine_v1_refuses_its_reserved_shared_expert_x(ranks, compiled):
    for message in ranks(WORLD).run(v1_shared_expert_refused_case, compiled):
        assert "npu_moe_distribute_combine" in message and "shared_expert_x" in message, message
        assert "reserved" in message if not compiled else "unexpected keyword argument" in message, message

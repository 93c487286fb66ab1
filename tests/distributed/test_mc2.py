"""torch_npu's MC2 ops (matmul fused with a collective) on 2 gloo ranks: npu_mm_all_reduce_base,
npu_all_gather_base_mm and npu_mm_reduce_scatter_base, eager (CPU reference kernels) and compiled
with npugraph (TorchAir lowers them to MatmulAllReduce, AllGatherMatmul, MatmulReduceScatter),
static and dynamic. Every rank is compared with plain torch matmuls and torch.distributed
collectives, and with the unsharded float32 computation from every rank's inputs."""
import pytest
import torch
import torch.distributed as dist

from op_plugin._simulator.npu.collective_matmul import hccl_comm_name

WORLD, K, N = 2, 16, 8


def _tensor(seed: int, *shape, dtype=torch.bfloat16) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


def _inputs(rank: int, rows: int):
    return {"a": _tensor(10 + rank, rows, K), "w": _tensor(20 + rank, K, N), "bias": _tensor(30 + rank, N),
            "x3": _tensor(40, rows, N), "g": _tensor(50 + rank, rows, K), "wg": _tensor(60, K, N),
            "bg": _tensor(61, N), "s": _tensor(70 + rank, WORLD * rows, K), "ws": _tensor(80 + rank, K, N)}


def _mc2(a, w, bias, x3, g, wg, bg, s, ws):
    hcom = hccl_comm_name()
    reduced = torch.ops.npu.npu_mm_all_reduce_base(a, w, hcom, reduce_op="sum", bias=bias, x3=x3)
    gathered_mm, gathered = torch.ops.npu.npu_all_gather_base_mm(g, wg, hcom, WORLD, bias=bg)
    scattered = torch.ops.npu.npu_mm_reduce_scatter_base(s, ws, hcom, WORLD)
    return reduced, gathered_mm, gathered, scattered


def _plain_torch(a, w, bias, x3, g, wg, bg, s, ws):
    """The same ops as plain matmuls (float32, rounded to bf16 as a cube unit outputs) and
    torch.distributed collectives."""
    partial = torch.addmm(bias.float(), a.float(), w.float()).bfloat16()
    reduced = (partial.float() + x3.float()).bfloat16()  # each rank adds its x3 before the all-reduce (CANN)
    dist.all_reduce(reduced)
    pieces = [torch.empty_like(g) for _ in range(WORLD)]
    dist.all_gather(pieces, g)
    gathered = torch.cat(pieces)
    gathered_mm = torch.addmm(bg.float(), gathered.float(), wg.float()).bfloat16()
    local = (s.float() @ ws.float()).bfloat16()
    scattered = torch.empty(s.shape[0] // WORLD, N, dtype=torch.bfloat16)
    dist.reduce_scatter(scattered, list(local.chunk(WORLD)))
    return reduced, gathered_mm, gathered, scattered


def _unsharded(rank: int, rows: int):
    """float32 from every rank's inputs, computed on this rank alone."""
    every = [{k: v.float() for k, v in _inputs(r, rows).items()} for r in range(WORLD)]
    reduced = sum(e["a"] @ e["w"] + e["bias"] + e["x3"] for e in every)
    gathered = torch.cat([e["g"] for e in every])
    scattered = sum(e["s"] @ e["ws"] for e in every).chunk(WORLD)[rank]
    return reduced, gathered @ every[0]["wg"] + every[0]["bg"], gathered, scattered


# ---- cases (run on every rank) ----------------------------------------------------------------------

def mc2_case(dynamic):
    rank = dist.get_rank()
    compiled_fn = torch.compile(_mc2, backend="npugraph", dynamic=dynamic, fullgraph=True)
    for rows in ([4, 6] if dynamic else [4]):
        inputs = _inputs(rank, rows)
        eager = _mc2(**inputs)
        compiled = compiled_fn(**inputs)
        plain = _plain_torch(**inputs)
        for name, c, e, p, u in zip(("mm_all_reduce", "all_gather_mm", "gather_out", "mm_reduce_scatter"),
                                    compiled, eager, plain, _unsharded(rank, rows), strict=True):
            assert c.dtype == torch.bfloat16 and c.shape == p.shape, (name, c.shape, p.shape)
            torch.testing.assert_close(c, e, rtol=0, atol=0, msg=lambda m, n=name: f"{n} compiled vs eager: {m}")
            torch.testing.assert_close(c, p, rtol=0, atol=0, msg=lambda m, n=name: f"{n} vs plain torch: {m}")
            torch.testing.assert_close(c.float(), u, rtol=0.02, atol=0.1, msg=lambda m, n=name: f"{n}: {m}")


def subgroup_case():
    """4 ranks, tensor-parallel groups {0,1} {2,3}: npu_mm_all_reduce_base over this rank's group
    (its hcom from hccl_comm_name(group)), compiled dynamic, against eager and plain torch."""
    rank = dist.get_rank()
    groups = [dist.new_group([0, 1]), dist.new_group([2, 3])]
    group = groups[rank // 2]
    hcom = hccl_comm_name(group)

    def row_parallel(a, w):
        return torch.ops.npu.npu_mm_all_reduce_base(a, w, hcom)

    compiled_fn = torch.compile(row_parallel, backend="npugraph", dynamic=True, fullgraph=True)
    for rows in (3, 5):
        a, w = _tensor(rank, rows, K), _tensor(10 + rank, K, N)
        plain = (a.float() @ w.float()).bfloat16()
        dist.all_reduce(plain, group=group)
        compiled = compiled_fn(a, w)
        torch.testing.assert_close(compiled, row_parallel(a, w), rtol=0, atol=0)
        torch.testing.assert_close(compiled, plain, rtol=0, atol=0)
    return hcom


def refusals_case():
    hcom = hccl_comm_name()
    messages = []
    for call in (lambda: torch.ops.npu.npu_mm_all_reduce_base(torch.ones(2, K), torch.ones(K, N), hcom),
                 lambda: torch.ops.npu.npu_mm_all_reduce_base(_tensor(1, 2, K), _tensor(2, K, N), hcom,
                                                              reduce_op="max"),
                 lambda: torch.ops.npu.npu_mm_reduce_scatter_base(_tensor(1, 3, K), _tensor(2, K, N), hcom, WORLD),
                 lambda: torch.ops.npu.npu_all_gather_base_mm(_tensor(1, 2, K), _tensor(2, K, N), "hccl_world_group",
                                                              WORLD)):
        try:
            call()
        except (ValueError, RuntimeError) as error:
            messages.append(str(error))
        else:
            raise AssertionError("an unsupported MC2 call ran")
    return messages


# ---- tests (parent side) ---------------------------------------------------------------------------

@pytest.mark.parametrize("dynamic", [pytest.param(False, id="static"), pytest.param(True, id="dynamic")])
def test_mc2_ops_match_plain_matmul_and_collectives(ranks, dynamic):
    ranks(WORLD).run(mc2_case, dynamic)


def test_mc2_refusals(ranks):
    messages = ranks(WORLD).run(refusals_case)[0]
    assert "npu_mm_all_reduce_base" in messages[0] and "the GE prototype takes float16, bfloat16, int8" in messages[0]
    assert "npu_mm_all_reduce_base" in messages[1] and "reduce_op='max'" in messages[1]
    assert "npu_mm_reduce_scatter_base" in messages[2] and "multiple of rank_size 2" in messages[2]
    assert "npu_all_gather_base_mm" in messages[3] and "built for HCCL" in messages[3]


def test_mc2_over_tensor_parallel_subgroups_four_ranks(ranks):
    names = ranks(4).run(subgroup_case)
    assert names[0] == names[1] != names[2] == names[3], names
    assert names[0].endswith("rank_list=0,1") and names[2].endswith("rank_list=2,3"), names

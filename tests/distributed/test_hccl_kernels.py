"""The Hcom kernels called directly on 2 gloo ranks, for what TorchAir does not emit on a CPU host
(HcomAllGatherV, HcomReduceScatterV and HcomAllToAll need torch_npu's uneven collectives or CANN >=
8.2) and for displacements with gaps: each result against the CANN prototype's definition computed
from every rank's input (counts and displacements in elements; AllGatherV/ReduceScatterV also in rows,
as HCCL's graph kernels and TorchAir's converters count them)."""
import torch
import torch.distributed as dist

from op_plugin._simulator.interpreter.errors import KernelError
from op_plugin._simulator.interpreter.kernels.hccl import collectives as hccl

WORLD = 2


def _group() -> str:
    """The name TorchAir gives the default gloo group on a CPU host."""
    tag = dist.distributed_c10d._get_group_tag(dist.group.WORLD)
    return f"tag={tag};rank_list={','.join(str(r) for r in range(WORLD))}"


def _ints(*values) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.int64)


def _data(rank: int, count: int) -> torch.Tensor:
    return torch.arange(count, dtype=torch.float32) + 100 * (rank + 1)


# ---- cases (run on every rank) ----------------------------------------------------------------------

def all_gather_v_case():
    rank, group = dist.get_rank(), _group()
    counts = [2, 3]
    x = _data(rank, counts[rank])
    packed = hccl.hcom_all_gather_v(x, _ints(counts[rank]), _ints(*counts), None, group=group)
    assert torch.equal(packed, torch.cat([_data(r, c) for r, c in enumerate(counts)]))
    gapped = hccl.hcom_all_gather_v(x, _ints(counts[rank]), _ints(*counts), _ints(4, 0), group=group)
    expected = torch.zeros(6)
    expected[4:6], expected[0:3] = _data(0, 2), _data(1, 3)
    assert torch.equal(gapped, expected)
    rows = hccl.hcom_all_gather_v(x.repeat(4, 1).T, _ints(counts[rank]), _ints(*counts), None, group=group)
    assert torch.equal(rows, torch.cat([_data(r, c).repeat(4, 1).T for r, c in enumerate(counts)]))


def reduce_scatter_v_case():
    rank, group = dist.get_rank(), _group()
    x = _data(rank, 5)
    total = _data(0, 5) + _data(1, 5)
    mine = hccl.hcom_reduce_scatter_v(x, _ints([1, 4][rank]), _ints(1, 4), None, reduction="sum", group=group)
    assert torch.equal(mine, total.split([1, 4])[rank])
    x2 = x.repeat(3, 1).T  # [5, 3]: counts in rows
    rows = hccl.hcom_reduce_scatter_v(x2, _ints([2, 3][rank]), _ints(2, 3), None, reduction="max", group=group)
    assert torch.equal(rows, torch.maximum(_data(0, 5), _data(1, 5)).repeat(3, 1).T.split([2, 3])[rank])


def all_to_all_case():
    rank, group = dist.get_rank(), _group()
    x = _data(rank, 6).reshape(2, 3)
    y = hccl.hcom_all_to_all(x, group=group)
    assert y.shape == x.shape
    assert torch.equal(y.reshape(-1), torch.cat([_data(r, 6).chunk(WORLD)[rank] for r in range(WORLD)]))


def all_to_all_v_gapped_case():
    rank, group = dist.get_rank(), _group()
    x = _data(rank, 8)
    # every rank sends 2 elements to rank 0 from offset 5 and 1 element to rank 1 from offset 0, and
    # receives rank 0's piece at offset 3 and rank 1's at offset 0 of its output
    sends, sdispls = _ints(2, 1), _ints(5, 0)
    recvs = _ints(*([2, 2] if rank == 0 else [1, 1]))
    rdispls = _ints(3, 0) if rank == 0 else _ints(1, 0)
    y = hccl.hcom_all_to_all_v(x, sends, sdispls, recvs, rdispls, group=group)
    if rank == 0:
        expected = torch.zeros(5)
        expected[3:5], expected[0:2] = _data(0, 8)[5:7], _data(1, 8)[5:7]
    else:
        expected = torch.stack([_data(1, 8)[0], _data(0, 8)[0]])
    assert torch.equal(y, expected), (y, expected)


def broadcast_case():
    rank, group = dist.get_rank(), _group()
    a, b = _data(rank, 3), _data(rank, 4).to(torch.int32)
    y = hccl.hcom_broadcast([a, b], root_rank=1, group=group)
    assert torch.equal(y[0], _data(1, 3)) and torch.equal(y[1], _data(1, 4).to(torch.int32))
    assert torch.equal(a, _data(rank, 3))  # the inputs are left as they were


def refusals_case():
    group = _group()
    messages = []
    for call in (lambda: hccl.hcom_all_reduce(torch.ones(2), reduction="avg", group=group),
                 lambda: hccl.hcom_all_gather(torch.ones(2), rank_size=4, group=group),
                 lambda: hccl.hcom_all_reduce(torch.ones(2), reduction="sum", group="tag=user:nope;rank_list=0,1"),
                 lambda: hccl.hcom_all_reduce(torch.ones(2), reduction="sum", group="127.0.0.1%eth0_60000_0_1700"),
                 lambda: hccl.hcom_broadcast([torch.ones(2)], root_rank=2, group=group)):
        try:
            call()
        except KernelError as error:
            messages.append(str(error))
        else:
            messages.append(None)
    return messages


# ---- tests (parent side) ---------------------------------------------------------------------------

def test_all_gather_v(ranks):
    ranks(WORLD).run(all_gather_v_case)


def test_reduce_scatter_v(ranks):
    ranks(WORLD).run(reduce_scatter_v_case)


def test_all_to_all(ranks):
    ranks(WORLD).run(all_to_all_case)


def test_all_to_all_v_with_gaps(ranks):
    ranks(WORLD).run(all_to_all_v_gapped_case)


def test_broadcast_of_several_tensors(ranks):
    ranks(WORLD).run(broadcast_case)


def test_refusals(ranks):
    avg, rank_size, unknown, hccl_name, root = ranks(WORLD).run(refusals_case)[0]
    assert "reduction 'avg'" in avg
    assert "rank_size 4 but group" in rank_size
    assert "no process group of this process has tag 'user:nope'" in unknown
    assert "built for HCCL" in hccl_name
    assert "root_rank 2 is not a rank of group" in root

"""`init_process_group("hccl")` on the virtual NPU (op_plugin/_simulator/device/hccl.py): collectives on npu
tensors over gloo on host memory. Every multi-rank check starts its ranks in child processes on 127.0.0.1
(torchrun or mp.spawn) under a hard timeout, with the collectives' own timeout at 60 s. The oracle: each rank
computes every rank's inputs itself and checks the results against plain arithmetic on CPU tensors (two ranks,
so a sum is a + b, exact in any order)."""
from __future__ import annotations

import socket
import subprocess
import sys
import textwrap

from .test_device import TIMEOUT, _env, _ok, built_extension  # noqa: F401  (the module fixture builds the C++ part)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _run_script(command_head: list[str], code: str, tmp_path) -> str:
    script = tmp_path / "ranks.py"
    script.write_text(textwrap.dedent(code), encoding="utf-8")
    result = subprocess.run([*command_head, str(script)], cwd=tmp_path, env=_env(), capture_output=True, text=True,
                            timeout=TIMEOUT, check=False)
    assert result.returncode == 0, f"stdout:\n{result.stdout[-2000:]}\nstderr:\n{result.stderr[-6000:]}"
    return result.stdout


def _torchrun(code: str, tmp_path, ranks: int = 2) -> str:
    return _run_script([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(ranks),
                        "--master-addr", "127.0.0.1", "--master-port", str(_free_port())], code, tmp_path)


_COLLECTIVES = """
    import os
    from datetime import timedelta
    import torch
    import torch.distributed as dist
    from torch.distributed import _functional_collectives as funcol

    local = int(os.environ["LOCAL_RANK"])
    torch.npu.set_device(local)
    dist.init_process_group("hccl", timeout=timedelta(seconds=60))
    rank, world = dist.get_rank(), dist.get_world_size()
    assert dist.get_backend() == "hccl" and dist.is_hccl_available() and world == 2
    device = torch.device("npu", local)

    def inputs(r):  # every rank's input, which each rank computes itself
        return torch.randn(world * 3, generator=torch.Generator().manual_seed(100 + r))

    everyone = [inputs(r) for r in range(world)]
    total = everyone[0] + everyone[1]
    mine = lambda: everyone[rank].to(device)

    def check(name, got, want):
        assert got.device == device, (name, got.device)
        assert torch.equal(got.cpu(), want), (name, got.cpu(), want)

    x = mine()
    pointer = x.data_ptr()
    dist.all_reduce(x)
    assert x.data_ptr() == pointer  # in place: gloo wrote into the npu tensor's memory
    check("all_reduce", x, total)
    x = mine()
    dist.all_reduce(x, op=dist.ReduceOp.MAX)
    check("all_reduce max", x, torch.maximum(everyone[0], everyone[1]))
    x = mine()
    dist.all_reduce(x, async_op=True).wait()
    check("all_reduce async", x, total)

    out = torch.empty(world * world * 3, device=device)
    dist.all_gather_into_tensor(out, mine())
    check("all_gather_into_tensor", out, torch.cat(everyone))
    outs = [torch.empty(world * 3, device=device) for _ in range(world)]
    dist.all_gather(outs, mine())
    for r in range(world):
        check("all_gather", outs[r], everyone[r])
    out = torch.empty(3, device=device)
    dist.reduce_scatter_tensor(out, mine())
    check("reduce_scatter_tensor", out, total[rank * 3:(rank + 1) * 3])
    x = mine()
    dist.broadcast(x, src=1)
    check("broadcast", x, everyone[1])
    out = torch.empty(world * 3, device=device)
    dist.all_to_all_single(out, mine())
    check("all_to_all_single", out, torch.cat([everyone[r][rank * 3:(rank + 1) * 3] for r in range(world)]))

    x = mine()
    dist.reduce(x, dst=1)
    if rank == 1:
        check("reduce", x, total)
    gathered = [torch.empty(world * 3, device=device) for _ in range(world)] if rank == 0 else None
    dist.gather(mine(), gathered, dst=0)
    if rank == 0:
        for r in range(world):
            check("gather", gathered[r], everyone[r])
    out = torch.empty(3, device=device)
    dist.scatter(out, list(mine().chunk(world)) if rank == 1 else None, src=1)
    check("scatter", out, everyone[1][rank * 3:(rank + 1) * 3])
    outs = [torch.empty(3, device=device) for _ in range(world)]
    dist.all_to_all(outs, list(mine().chunk(world)))
    for r in range(world):
        check("all_to_all", outs[r], everyone[r][rank * 3:(rank + 1) * 3])
    pieces = [mine(), mine() * 2]
    dist.all_reduce_coalesced(pieces)
    check("all_reduce_coalesced", pieces[1], everyone[0] * 2 + everyone[1] * 2)

    peer = 1 - rank
    got = torch.empty(world * 3, device=device)
    for work in dist.batch_isend_irecv([dist.P2POp(dist.isend, mine(), peer), dist.P2POp(dist.irecv, got, peer)]):
        work.wait()
    check("isend/irecv", got, everyone[peer])
    if rank == 0:
        dist.send(mine(), dst=1)
    else:
        got = torch.empty(world * 3, device=device)
        dist.recv(got, src=0)
        check("send/recv", got, everyone[0])
    dist.barrier()

    pair, alone = dist.new_group([0, 1]), dist.new_group([0])
    assert dist.get_backend(pair) == "hccl"
    x = mine()
    dist.all_reduce(x, group=pair)
    check("all_reduce on new_group", x, total)
    if rank == 0:
        x = mine()
        dist.all_reduce(x, group=alone)
        check("all_reduce on a group of one", x, everyone[0])

    reduced = funcol.all_reduce(mine(), "sum", dist.group.WORLD)
    check("functional all_reduce", funcol.wait_tensor(reduced), total)
    objects = [None] * world
    dist.all_gather_object(objects, {"rank": rank})
    assert objects == [{"rank": r} for r in range(world)], objects
    dist.destroy_process_group()
    print(f"rank {rank} ok")
"""


def test_torchrun_collectives_equal_the_cpu_arithmetic(tmp_path):
    out = _torchrun(_COLLECTIVES, tmp_path)
    assert "rank 0 ok" in out and "rank 1 ok" in out, out


_SPAWN = """
    import copy, sys
    from datetime import timedelta
    import torch
    import torch.distributed as dist
    import torch.multiprocessing as mp
    from torch.nn.parallel import DistributedDataParallel

    def data(r):
        return torch.randn(3, 4, generator=torch.Generator().manual_seed(r))

    def work(rank, world, port):
        torch.npu.set_device(rank)
        dist.init_process_group(backend="hccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                                timeout=timedelta(seconds=60), device_id=torch.device("npu", rank))
        assert dist.get_backend() == "hccl"
        x = torch.full((4,), float(rank + 1), device="npu")
        dist.all_reduce(x)
        assert x.device == torch.device("npu", rank) and x.tolist() == [3.0] * 4, x

        torch.manual_seed(0)
        reference = torch.nn.Linear(4, 2)
        model = DistributedDataParallel(copy.deepcopy(reference).to(f"npu:{rank}"), device_ids=[rank])
        model(data(rank).npu()).sum().backward()
        grads = []
        for r in range(world):  # the oracle: each rank's gradient on CPU, averaged as DDP averages
            local = copy.deepcopy(reference)
            local(data(r)).sum().backward()
            grads.append(local.weight.grad)
        got = model.module.weight.grad
        assert got.device == torch.device("npu", rank)
        assert torch.allclose(got.cpu(), (grads[0] + grads[1]) / 2, rtol=1e-6, atol=1e-7), (got, grads)

        quick = dist.new_group([0, 1], timeout=timedelta(seconds=3))
        if rank == 0:  # rank 1 never joins: gloo gives up after the group's timeout
            try:
                dist.all_reduce(torch.ones(2, device="npu"), group=quick)
            except RuntimeError as error:
                print("timed out:", str(error).splitlines()[0][:200])
            else:
                raise AssertionError("a collective without its peer returned")
        dist.barrier()
        dist.destroy_process_group()
        print(f"rank {rank} ok", flush=True)

    if __name__ == "__main__":
        mp.spawn(work, args=(2, int(sys.argv[1])), nprocs=2, join=True)
"""


def test_mp_spawn_with_device_id_runs_ddp(tmp_path):
    port = _free_port()
    script = tmp_path / "spawned.py"
    script.write_text(textwrap.dedent(_SPAWN), encoding="utf-8")
    result = subprocess.run([sys.executable, str(script), str(port)], cwd=tmp_path, env=_env(),
                            capture_output=True, text=True, timeout=TIMEOUT, check=False)
    assert result.returncode == 0, f"stdout:\n{result.stdout[-2000:]}\nstderr:\n{result.stderr[-6000:]}"
    assert "rank 0 ok" in result.stdout and "rank 1 ok" in result.stdout and "timed out" in result.stdout


def test_refusals_name_the_call(tmp_path):
    out = _ok(f"""
        from datetime import timedelta
        import torch
        import torch.distributed as dist

        def refused(call, *needles):
            try:
                call()
            except (RuntimeError, ValueError) as error:
                assert all(needle in str(error) for needle in needles), str(error)
                print(str(error).splitlines()[0][:160])
            else:
                raise AssertionError(needles)

        dist.init_process_group("hccl", init_method="tcp://127.0.0.1:{_free_port()}", rank=0, world_size=1,
                                timeout=timedelta(seconds=60))
        gloo = dist.group.WORLD._get_backend(torch.device("npu"))
        assert gloo.options._timeout == timedelta(seconds=60)  # the user's timeout reaches gloo
        x = torch.ones(4, device="npu")
        refused(lambda: dist.all_gather_into_tensor(torch.empty(4, device="npu"), torch.ones(4)),
                "hccl on the virtual NPU: dist.all_gather_into_tensor", "cpu and npu:0")
        refused(lambda: dist.all_gather_into_tensor(torch.empty(4, device="npu:1"), x),
                "hccl on the virtual NPU: dist.all_gather_into_tensor", "npu:0 and npu:1")
        refused(lambda: dist.all_reduce(torch.ones(4)), "No backend type associated with device type cpu")
        refused(lambda: dist.all_reduce(x, op=dist._make_nccl_premul_sum(2.0)),
                "hccl on the virtual NPU: dist.all_reduce (c10d::allreduce_)", "PREMUL_SUM")
        on_gloo = dist.new_group([0], backend="gloo")
        refused(lambda: dist.all_reduce(x, group=on_gloo), "hccl on the virtual NPU: dist.all_reduce",
                "without an npu backend")
        dist.destroy_process_group()

        # npu's default backend is hccl: device_id alone picks it; a new group after a destroyed one works
        dist.init_process_group(init_method="tcp://127.0.0.1:{_free_port()}", rank=0, world_size=1,
                                device_id=torch.device("npu", 0), timeout=timedelta(seconds=60))
        assert dist.get_backend() == "hccl"
        y = torch.arange(4.0, device="npu")
        dist.all_reduce(y)
        assert y.tolist() == [0.0, 1.0, 2.0, 3.0]
        dist.destroy_process_group()
        print("done")
    """, tmp_path)
    assert out.strip().endswith("done"), out


def test_npugraph_compiles_beside_an_hccl_group(tmp_path):
    """TorchAir asks every hccl group's npu backend for `get_hccl_comm_name` whenever it builds a GE graph
    (`hcom_utils.record_pg_to_graph`): with an hccl group in the process, any npugraph compile needs it."""
    out = _ok(f"""
        from datetime import timedelta
        import torch
        import torch.distributed as dist
        import op_plugin  # noqa: F401  (the npugraph backend)

        dist.init_process_group("hccl", init_method="tcp://127.0.0.1:{_free_port()}", rank=0, world_size=1,
                                timeout=timedelta(seconds=60))
        name = dist.group.WORLD._get_backend(torch.device("npu")).get_hccl_comm_name(0)
        assert name.startswith("tag=") and name.endswith(";rank_list=0"), name
        compiled = torch.compile(lambda x: x * 2 + 1, backend="npugraph")
        y = compiled(torch.arange(4.0, device="npu"))
        assert y.device == torch.device("npu", 0) and y.tolist() == [1.0, 3.0, 5.0, 7.0], y
        dist.destroy_process_group()
        print(name)
    """, tmp_path)
    assert out.strip().startswith("tag="), out


def test_collectives_in_compiled_graphs_on_npu_tensors(tmp_path):
    """A GE graph's Hcom kernels run on CPU views of npu tensors, through the hccl group's CPU companion; every
    rank's compiled result equals the eager collective's (GE mode, and TorchAir's own get_npu_backend)."""
    out = _torchrun("""
        import os
        from datetime import timedelta
        import torch, torch_npu, torchair
        import torch.distributed as dist
        from torch.distributed import _functional_collectives as funcol

        local = int(os.environ["LOCAL_RANK"])
        torch.npu.set_device(local)
        dist.init_process_group("hccl", timeout=timedelta(seconds=60))
        rank = dist.get_rank()

        def step(x):
            y = funcol.all_reduce(x * 2, "sum", dist.group.WORLD)
            return funcol.all_gather_tensor(y + 1, 0, dist.group.WORLD)

        x = torch.arange(6.0, device=f"npu:{local}").reshape(2, 3) + 10 * rank
        eager = step(x)
        for backend in ("npugraph", torchair.get_npu_backend()):
            torch._dynamo.reset()
            out = torch.compile(step, backend=backend, dynamic=False)(x)
            assert out.device == torch.device("npu", local), out.device
            assert torch.equal(out.cpu(), eager.cpu()), (rank, out.cpu(), eager.cpu())
        expected = ((torch.arange(6.0).reshape(2, 3) * 2) * 2 + 20) + 1   # sum over ranks 0 and 1, then + 1
        assert torch.equal(eager.cpu(), torch.cat([expected, expected])), eager.cpu()
        dist.destroy_process_group()
        print(f"rank{rank}ok", flush=True)
    """, tmp_path)
    assert "rank0ok" in out and "rank1ok" in out, out  # the ranks' lines may interleave


def test_torch_npu_uneven_collectives_eager_and_compiled(tmp_path):
    """torch_npu.distributed.all_gather_into_tensor_uneven / reduce_scatter_tensor_uneven (hccl_uneven.py): rank
    r's rows land at the offset of the ranks before it, and the reduction keeps rank r's rows of the sum; eagerly,
    and compiled through TorchAir (its HcomAllGatherV / HcomReduceScatterV lowering); the oracle is the
    arithmetic each rank does itself on CPU tensors."""
    out = _torchrun("""
        import os
        from datetime import timedelta
        import torch, torch_npu, torchair
        import torch.distributed as dist

        local = int(os.environ["LOCAL_RANK"])
        torch.npu.set_device(local)
        dist.init_process_group("hccl", timeout=timedelta(seconds=60))
        rank, device, rows = dist.get_rank(), torch.device("npu", local), [3, 1]

        def gather(out, x, sizes):
            torch_npu.distributed.all_gather_into_tensor_uneven(out, x, sizes)
            return out

        def scatter(out, x, sizes):
            torch_npu.distributed.reduce_scatter_tensor_uneven(out, x, sizes)
            return out

        mine = torch.full((rows[rank], 2), rank + 1, dtype=torch.int32)
        gathered = torch.cat([torch.full((3, 2), 1, dtype=torch.int32), torch.full((1, 2), 2, dtype=torch.int32)])
        summed = torch.arange(8, dtype=torch.int32).reshape(4, 2) * 3   # (1 + 2) times the rows
        kept = summed[:3] if rank == 0 else summed[3:]
        for backend in (None, torchair.get_npu_backend()):
            run_gather = gather if backend is None else torch.compile(gather, backend=backend, fullgraph=True)
            run_scatter = scatter if backend is None else torch.compile(scatter, backend=backend, fullgraph=True)
            got = run_gather(torch.zeros(4, 2, dtype=torch.int32, device=device), mine.to(device), rows)
            assert torch.equal(got.cpu(), gathered), (backend, rank, got)
            x = (torch.arange(8, dtype=torch.int32).reshape(4, 2) * (rank + 1)).to(device)
            got = run_scatter(torch.zeros(rows[rank], 2, dtype=torch.int32, device=device), x, rows)
            assert torch.equal(got.cpu(), kept), (backend, rank, got)
        even = torch.zeros(2, 2, dtype=torch.int32, device=device)
        torch_npu.distributed.all_gather_into_tensor_uneven(even, torch.full((1, 2), rank, dtype=torch.int32,
                                                                             device=device))  # no sizes: even
        assert even.cpu().tolist() == [[0, 0], [1, 1]], even
        try:
            torch_npu.distributed.all_gather_into_tensor_uneven(even, mine.to(device), [2, 1])
        except RuntimeError as error:
            assert "split sizes [2, 1] must be 2 non-negative row counts (one per rank) summing to 2" in str(error)
        else:
            raise AssertionError("mismatched split sizes were not refused")
        print("rank", rank, "ok")
        dist.destroy_process_group()
    """, tmp_path)
    assert out.count("ok") == 2, out


def test_layouts_and_unequal_sizes_hccl_takes_and_gloo_does_not(tmp_path):
    """HCCL moves bytes: all_gather_into_tensor's output and reduce_scatter_tensor's input stacked per rank or in
    another shape of the same size, all_to_all with a different size per peer (zero among them) and all_gather into
    tensors of other shapes than the input; gloo takes one layout and one size, so hccl.py adapts each call. The
    oracle: the arithmetic each rank does itself on CPU tensors."""
    out = _torchrun("""
        import os
        from datetime import timedelta
        import torch
        import torch.distributed as dist

        local = int(os.environ["LOCAL_RANK"])
        torch.npu.set_device(local)
        dist.init_process_group("hccl", timeout=timedelta(seconds=60))
        rank, device = dist.get_rank(), torch.device("npu", local)
        x = torch.arange(4.0).reshape(2, 2) + 10 * rank
        both = torch.cat([torch.arange(4.0).reshape(2, 2), torch.arange(4.0).reshape(2, 2) + 10])

        for shape in ((2, 2, 2), (8, 1), (2, 4)):  # stacked, another shape, concatenated-by-columns size
            out = torch.zeros(shape, device=device)
            dist.all_gather_into_tensor(out, x.to(device))
            assert torch.equal(out.cpu().reshape(-1), both.reshape(-1)), (shape, out)

        stacked = (torch.arange(8.0).reshape(2, 2, 2) * (rank + 1)).to(device)
        mine = torch.zeros(2, 2, device=device)
        dist.reduce_scatter_tensor(mine, stacked)
        assert torch.equal(mine.cpu(), torch.arange(8.0).reshape(2, 2, 2)[rank] * 3), mine

        sends = {0: [1, 0], 1: [2, 3]}          # elements rank r sends to each peer
        inputs = [torch.full((n,), float(10 * rank + peer), device=device) for peer, n in enumerate(sends[rank])]
        outputs = [torch.zeros(sends[peer][rank], device=device) for peer in range(2)]
        dist.all_to_all(outputs, inputs)
        for peer in range(2):
            assert outputs[peer].cpu().tolist() == [float(10 * peer + rank)] * sends[peer][rank], (peer, outputs)

        gathered = [torch.zeros(4, 1, device=device), torch.zeros(1, 4, device=device)]
        dist.all_gather(gathered, x.reshape((4, 1) if rank == 0 else (1, 4)).to(device))
        assert torch.equal(gathered[0].cpu().reshape(-1), torch.arange(4.0)), gathered
        assert torch.equal(gathered[1].cpu().reshape(-1), torch.arange(4.0) + 10), gathered
        print("rank", rank, "ok")
        dist.destroy_process_group()
    """, tmp_path)
    assert out.count("ok") == 2, out


def test_process_group_hccl_is_the_class_of_an_hccl_groups_backend(tmp_path):
    """torch_npu._C._distributed_c10d.ProcessGroupHCCL is the class of an hccl group's npu backend (a gloo
    ProcessGroupGloo here), so tests patching its get_hccl_comm_name (TorchAir's hcom cache tests) reach the calls
    TorchAir makes while it builds a GE graph."""
    out = _ok(f"""
        from datetime import timedelta
        from unittest.mock import patch
        import torch, torch_npu, torchair
        import torch.distributed as dist

        dist.init_process_group("hccl", init_method="tcp://127.0.0.1:{_free_port()}", rank=0, world_size=1,
                                timeout=timedelta(seconds=60))
        hccl = torch_npu._C._distributed_c10d.ProcessGroupHCCL
        backend = dist.group.WORLD._get_backend(torch.device("npu"))
        assert isinstance(backend, hccl), type(backend)
        name = backend.get_hccl_comm_name(0)
        with patch.object(hccl, "get_hccl_comm_name", return_value=name) as calls:
            compiled = torch.compile(lambda x: x * 2, backend=torchair.get_npu_backend())
            assert compiled(torch.ones(2, device="npu")).tolist() == [2.0, 2.0]
        assert calls.call_count >= 1, calls.call_args_list
        dist.destroy_process_group()
        print("ok")
    """, tmp_path)
    assert "ok" in out

"""Each collective TorchAir puts in a GE graph, compiled with npugraph on 2 gloo ranks, static and
dynamic: every rank's result equals eager (the same function run without compiling, over the same
gloo group) exactly, and the value computed from every rank's input on one rank."""
import pytest
import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol

WORLD = 2


def _input(rank: int, shape, dtype=torch.float32) -> torch.Tensor:
    generator = torch.Generator().manual_seed(100 + rank)
    if dtype.is_floating_point:
        return torch.randn(shape, generator=generator).to(dtype)
    return torch.randint(-5, 6, shape, generator=generator, dtype=dtype)


def _compiled_and_eager(fn, args, dynamic):
    compiled = torch.compile(fn, backend="npugraph", dynamic=dynamic, fullgraph=True)(*args)
    eager = fn(*args)
    return compiled, eager


def _same(compiled, eager):
    assert compiled.dtype == eager.dtype and compiled.shape == eager.shape, (compiled, eager)
    assert torch.equal(compiled, eager), f"max |compiled - eager| = {(compiled.float() - eager.float()).abs().max()}"


# ---- cases (run on every rank) ----------------------------------------------------------------------

def all_reduce_case(reduction, dtype_name, dynamic):
    dtype = getattr(torch, dtype_name)
    rank = dist.get_rank()

    def fn(x):
        return funcol.all_reduce(x * 2, reduction, dist.group.WORLD) + 1

    compiled, eager = _compiled_and_eager(fn, (_input(rank, (4, 6), dtype),), dynamic)
    _same(compiled, eager)
    stacked = torch.stack([_input(r, (4, 6), dtype) * 2 for r in range(WORLD)]).float()
    combine = {"sum": stacked.sum(0), "max": stacked.amax(0), "min": stacked.amin(0), "product": stacked.prod(0)}
    expected = (combine[reduction] + 1).to(dtype)
    tolerance = {"atol": 0.05, "rtol": 0.02} if dtype == torch.bfloat16 else {}
    torch.testing.assert_close(compiled, expected, **tolerance)


def all_gather_case(dynamic):
    rank = dist.get_rank()

    def fn(x):
        return funcol.all_gather_tensor(x + 1, 0, dist.group.WORLD) * 3

    compiled, eager = _compiled_and_eager(fn, (_input(rank, (3, 5)),), dynamic)
    _same(compiled, eager)
    torch.testing.assert_close(compiled, torch.cat([_input(r, (3, 5)) + 1 for r in range(WORLD)]) * 3)


def reduce_scatter_case(dynamic):
    rank = dist.get_rank()

    def fn(x):
        return funcol.reduce_scatter_tensor(x - 1, "sum", 0, dist.group.WORLD)

    compiled, eager = _compiled_and_eager(fn, (_input(rank, (4, 3)),), dynamic)
    _same(compiled, eager)
    total = sum(_input(r, (4, 3)) - 1 for r in range(WORLD))
    torch.testing.assert_close(compiled, total.chunk(WORLD)[rank])


def broadcast_case(dynamic):
    rank = dist.get_rank()

    def fn(x):
        y = x * 2
        dist.broadcast(y, src=1)
        return y + x

    compiled, eager = _compiled_and_eager(fn, (_input(rank, (5,)),), dynamic)
    _same(compiled, eager)
    torch.testing.assert_close(compiled, _input(1, (5,)) * 2 + _input(rank, (5,)))


def _splits(sender: int, uneven: bool) -> list[int]:
    """Rows rank `sender` sends to each rank."""
    return [[1, 3], [2, 2]][sender] if uneven else [2, 2]


def all_to_all_single_case(uneven, dynamic):
    rank = dist.get_rank()
    send = _splits(rank, uneven)
    recv = [_splits(r, uneven)[rank] for r in range(WORLD)]

    def fn(x):
        return funcol.all_to_all_single(x * 2, recv, send, dist.group.WORLD) + 1

    compiled, eager = _compiled_and_eager(fn, (_input(rank, (4, 3)),), dynamic)
    _same(compiled, eager)
    pieces = [(_input(r, (4, 3)) * 2).split(_splits(r, uneven))[rank] for r in range(WORLD)]
    torch.testing.assert_close(compiled, torch.cat(pieces) + 1)


def send_recv_case(dynamic):
    rank = dist.get_rank()

    def fn(x):
        y = x + 1
        if rank == 0:
            dist.send(y, dst=1)
            return y * 1
        z = torch.empty_like(y)
        dist.recv(z, src=0)
        return z * 10

    compiled, eager = _compiled_and_eager(fn, (_input(rank, (2, 3)),), dynamic)
    _same(compiled, eager)
    expected = _input(0, (2, 3)) + 1 if rank == 0 else (_input(0, (2, 3)) + 1) * 10
    torch.testing.assert_close(compiled, expected)


# ---- tests (parent side) ---------------------------------------------------------------------------

DYNAMIC = [pytest.param(False, id="static"), pytest.param(True, id="dynamic")]


@pytest.mark.parametrize("dynamic", DYNAMIC)
@pytest.mark.parametrize("reduction, dtype", [("sum", "float32"), ("max", "float32"), ("min", "int32"),
                                              ("product", "int32"), ("sum", "bfloat16")])
def test_all_reduce(ranks, reduction, dtype, dynamic):
    ranks(WORLD).run(all_reduce_case, reduction, dtype, dynamic)


@pytest.mark.parametrize("dynamic", DYNAMIC)
def test_all_gather(ranks, dynamic):
    ranks(WORLD).run(all_gather_case, dynamic)


@pytest.mark.parametrize("dynamic", DYNAMIC)
def test_reduce_scatter(ranks, dynamic):
    ranks(WORLD).run(reduce_scatter_case, dynamic)


@pytest.mark.parametrize("dynamic", DYNAMIC)
def test_broadcast(ranks, dynamic):
    ranks(WORLD).run(broadcast_case, dynamic)


@pytest.mark.parametrize("dynamic", DYNAMIC)
@pytest.mark.parametrize("uneven", [pytest.param(False, id="even"), pytest.param(True, id="uneven")])
def test_all_to_all_single(ranks, uneven, dynamic):
    ranks(WORLD).run(all_to_all_single_case, uneven, dynamic)


@pytest.mark.parametrize("dynamic", DYNAMIC)
def test_send_recv(ranks, dynamic):
    ranks(WORLD).run(send_recv_case, dynamic)

"""`all_reduce(x, "avg")` and `reduce_scatter_tensor(x, "avg")` compiled with npugraph: TorchAir
alone raises `ge unsupported reduce type AVG`; op_plugin's completion lowers it as HCCL's SUM then
a division by the group size (torch_npu's ProcessGroupHCCL, and gloo, compute AVG so). Every rank
is compared with eager (gloo's AVG) and with the mean of every rank's input computed on one rank;
integer tensors, for which eager's AVG raises on every backend, are refused naming the op."""
import pytest
import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol


def _input(rank: int, shape, dtype) -> torch.Tensor:
    generator = torch.Generator().manual_seed(300 + rank)
    return (torch.randn(shape, generator=generator) * 3).to(dtype)


def _tolerance(dtype):
    return {"atol": 0.05, "rtol": 0.02} if dtype in (torch.bfloat16, torch.float16) else {"atol": 1e-6, "rtol": 1e-6}


# ---- cases (run on every rank) ----------------------------------------------------------------------

def all_reduce_avg_case(dtype_name, dynamic, subgroups):
    dtype = getattr(torch, dtype_name)
    rank, world = dist.get_rank(), dist.get_world_size()
    if subgroups:  # 4 ranks: averages over {0,1} {2,3}, then over {0,2} {1,3}
        pairs = [dist.new_group([0, 1]), dist.new_group([2, 3])]
        crossed = [dist.new_group([0, 2]), dist.new_group([1, 3])]
        first, second = pairs[rank // 2], crossed[rank % 2]
    else:
        first = second = dist.group.WORLD

    def fn(x):
        return funcol.all_reduce(funcol.all_reduce(x + 1, "avg", first) * 2, "avg", second) - 1

    compiled_fn = torch.compile(fn, backend="npugraph", dynamic=dynamic, fullgraph=True)
    for rows in ([3, 6] if dynamic else [3]):
        x = _input(rank, (rows, 5), dtype)
        compiled, eager = compiled_fn(x), fn(x)
        assert compiled.dtype == eager.dtype and compiled.shape == eager.shape
        torch.testing.assert_close(compiled, eager, **_tolerance(dtype))
        inputs = torch.stack([_input(r, (rows, 5), dtype).double() for r in range(world)])
        expected = (inputs + 1).mean(0) * 2 - 1  # the mean of pair means over crossed pairs is the mean
        torch.testing.assert_close(compiled.double(), expected, **_tolerance(dtype))


def reduce_scatter_avg_case(dynamic):
    rank, world = dist.get_rank(), dist.get_world_size()

    def fn(x):
        return funcol.reduce_scatter_tensor(x * 3, "avg", 0, dist.group.WORLD)

    compiled_fn = torch.compile(fn, backend="npugraph", dynamic=dynamic, fullgraph=True)
    for rows in ([2 * world, 4 * world] if dynamic else [2 * world]):
        x = _input(rank, (rows, 3), torch.float32)
        compiled = compiled_fn(x)
        torch.testing.assert_close(compiled, fn(x), atol=1e-6, rtol=1e-6)
        mean = torch.stack([_input(r, (rows, 3), torch.float32) * 3 for r in range(world)]).mean(0)
        torch.testing.assert_close(compiled, mean.chunk(world)[rank])


def integer_avg_refused_case(dtype_name):
    dtype = getattr(torch, dtype_name)
    x = torch.arange(6, dtype=dtype).reshape(2, 3)

    def fn(t):
        return funcol.all_reduce(t, "avg", dist.group.WORLD)

    try:
        fn(x).tolist()  # funcol waits lazily: the result is read to run it
    except RuntimeError as error:  # eager's AVG divides in place: no integer result exists
        eager_error = str(error)
    else:
        raise AssertionError("eager integer AVG no longer raises: compare the compiled value instead")
    try:
        torch.compile(fn, backend="npugraph", fullgraph=True)(x)
    except Exception as error:  # dynamo wraps the converter's error
        message = str(error)
    else:
        raise AssertionError("integer AVG compiled although eager raises")
    assert "reduce_type='avg'" in message and "not floating point" in message, message
    return eager_error


# ---- tests (parent side) ---------------------------------------------------------------------------

DYNAMIC = [pytest.param(False, id="static"), pytest.param(True, id="dynamic")]


@pytest.mark.parametrize("dynamic", DYNAMIC)
@pytest.mark.parametrize("dtype_name", ["float32", "bfloat16"])
def test_all_reduce_avg_two_ranks(ranks, dtype_name, dynamic):
    ranks(2).run(all_reduce_avg_case, dtype_name, dynamic, False)


@pytest.mark.parametrize("dynamic", DYNAMIC)
def test_all_reduce_avg_four_ranks(ranks, dynamic):
    ranks(4).run(all_reduce_avg_case, "float32", dynamic, False)


def test_all_reduce_avg_subgroups_four_ranks(ranks):
    ranks(4).run(all_reduce_avg_case, "float16", True, True)


@pytest.mark.parametrize("dynamic", DYNAMIC)
def test_reduce_scatter_avg(ranks, dynamic):
    ranks(2).run(reduce_scatter_avg_case, dynamic)


@pytest.mark.parametrize("dtype_name", ["int32", "int64"])
def test_integer_avg_refused_as_eager_raises(ranks, dtype_name):
    errors = ranks(2).run(integer_avg_refused_case, dtype_name)
    assert all("can't be cast" in error for error in errors), errors

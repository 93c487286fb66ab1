"""all_to_all_single's split sizes in GE mode, on 2 gloo ranks: a rank with no rows to send (TorchAir's
decomposition gave it zero receive counts and the even HcomAllToAll: a rank-divergent graph), split sizes
read from a tensor inside the graph (refused by name, as an Ascend host cannot lower them either), and the
two forms that work instead: the splits passed in as Python ints (dynamic=True: one graph for new values)
and the .tolist() behind a graph break. Every compiled result is compared with eager over the same gloo
group and with the rows computed from every rank's input. docs/distributed.md."""
import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol

WORLD = 2
ROW = 3


def _rows(rank: int, splits: list[int]) -> torch.Tensor:
    """Rank `rank`'s input: sum(splits) rows of ROW values that say which rank and row they come from."""
    n = sum(splits)
    return (torch.arange(n * ROW, dtype=torch.float32).reshape(n, ROW) + 1000 * rank)


def _expected(rank: int, sends: list[list[int]]) -> torch.Tensor:
    """What `rank` receives: from each rank r in order, the rows r sends it (sends[r] = r's input splits)."""
    pieces = []
    for r in range(WORLD):
        start = sum(sends[r][:rank])
        pieces.append(_rows(r, sends[r])[start:start + sends[r][rank]])
    return torch.cat(pieces)


def _counting_npugraph(counter: list):
    from torch._dynamo.backends.registry import lookup_backend

    npugraph = lookup_backend("npugraph")

    def backend(gm, example_inputs):
        counter.append(1)
        return npugraph(gm, example_inputs)

    return backend


# ---- cases (run on every rank) ----------------------------------------------------------------------

def zero_rows_case():
    """Rank 0 sends no row but receives one; the GE graph must be HcomAllToAllV on both ranks."""
    from op_plugin._simulator import capture_graphs

    rank = dist.get_rank()
    sends = [[0, 0], [1, 2]]
    receives = [[s[rank] for s in sends] for rank in range(WORLD)]

    def fn(x):
        return funcol.all_to_all_single(x, receives[rank], sends[rank], dist.group.WORLD) * 2

    x = _rows(rank, sends[rank])
    with capture_graphs() as graphs:
        compiled = torch.compile(fn, backend="npugraph", fullgraph=True)(x)
    types = {op.type for graph in graphs for op in graph.op if op.type.startswith("Hcom")}
    assert types == {"HcomAllToAllV"}, types
    assert torch.equal(compiled, fn(x))
    assert torch.equal(compiled, _expected(rank, sends) * 2)


def splits_in_graph_case():
    """Splits exchanged and read (.tolist()) inside the graph, for the dispatch and the combine back (whose
    input's dim 0 is data-dependent too): refused, naming the op and what works."""
    rank = dist.get_rank()
    counts = torch.tensor([2, 3] if rank == 0 else [4, 2])

    def fn(x, counts):
        received = funcol.all_to_all_single(counts, None, None, dist.group.WORLD)
        y = funcol.all_to_all_single(x, received.tolist(), counts.tolist(), dist.group.WORLD)
        return funcol.all_to_all_single(y * 2, counts.tolist(), received.tolist(), dist.group.WORLD)

    try:
        torch.compile(fn, backend="npugraph", fullgraph=True)(_rows(rank, counts.tolist()), counts)
    except Exception as error:  # BackendCompilerFailed wrapping the converter's refusal
        text = str(error)
        for part in ("all_to_all_single with split sizes read from a tensor", ".tolist()", "Python ints",
                     "dynamic=True", "torch.compiler.disable", "aot_eager"):
            assert part in text, (part, text)
        return
    raise AssertionError("split sizes read from a tensor in a GE graph compiled")


def splits_as_ints_case():
    """The splits computed eagerly and passed as lists of ints: one dynamic graph serves new split values."""
    rank = dist.get_rank()
    compiles: list = []

    def fn(x, output_splits, input_splits):
        return funcol.all_to_all_single(x + 1, output_splits, input_splits, dist.group.WORLD)

    compiled = torch.compile(fn, backend=_counting_npugraph(compiles), fullgraph=True, dynamic=True)
    for sends in ([[2, 3], [4, 2]], [[3, 5], [2, 6]]):
        received = [s[rank] for s in sends]
        x = _rows(rank, sends[rank])
        out = compiled(x, received, sends[rank])
        assert torch.equal(out, fn(x, received, sends[rank]))
        assert torch.equal(out, _expected(rank, sends) + 1)
    assert len(compiles) == 1, f"{len(compiles)} compiles"


def splits_behind_graph_break_case():
    """MoE-style dispatch with the counts' .tolist() in a torch.compiler.disable function: the graphs before
    and after the break are GE graphs, and the result is eager's."""
    rank = dist.get_rank()

    @torch.compiler.disable
    def as_ints(t):
        return t.tolist()

    def dispatch(x, counts):
        received = funcol.all_to_all_single(counts, None, None, dist.group.WORLD)
        return funcol.all_to_all_single(x * 2, as_ints(received), as_ints(counts), dist.group.WORLD) - 1

    counts = torch.tensor([2, 3] if rank == 0 else [4, 2])
    x = _rows(rank, counts.tolist())
    out = torch.compile(dispatch, backend="npugraph")(x, counts)
    assert torch.equal(out, dispatch(x, counts))
    assert torch.equal(out, _expected(rank, [[2, 3], [4, 2]]) * 2 - 1)


# ---- tests (pytest side) ----------------------------------------------------------------------------

def test_a_rank_with_no_rows_to_send(ranks):
    ranks(WORLD).run(zero_rows_case)


def test_splits_read_from_a_tensor_in_the_graph_are_refused(ranks):
    ranks(WORLD).run(splits_in_graph_case)


def test_splits_passed_as_ints_reuse_one_dynamic_graph(ranks):
    ranks(WORLD).run(splits_as_ints_case)


def test_splits_behind_a_graph_break(ranks):
    ranks(WORLD).run(splits_behind_graph_break_case)

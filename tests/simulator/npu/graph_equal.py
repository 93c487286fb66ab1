"""Eager == graph, bit for bit: an npu op's eager kernel and the GE kernel TorchAir's converter lowers it to are
one implementation, so a function calling the op gives the same bits eagerly and compiled with npugraph."""
import torch

from op_plugin._simulator import capture_graphs


def _copy(value):
    return value.clone() if isinstance(value, torch.Tensor) else value


def assert_eager_equals_graph(fn, args, ge_types=()):
    """Compile `fn` (npugraph, fullgraph), run it on copies of `args`, run `fn` eagerly on `args`; every GE type
    of `ge_types` must be in the graphs built, and every output (and every argument, for in-place ops) equal bit
    for bit (their bit patterns: -0.0, NaN payloads and fp8 codes count)."""
    torch._dynamo.reset()
    compiled = torch.compile(fn, backend="npugraph", fullgraph=True)
    copies = [_copy(a) for a in args]
    with capture_graphs() as graphs:
        got = compiled(*copies)
    want = fn(*args)
    types = [op.type for graph in graphs for op in graph.op]
    missing = [t for t in ([ge_types] if isinstance(ge_types, str) else ge_types) if t not in types]
    assert not missing, f"GE types {missing} not in the graphs: {types}"
    got_leaves = torch.utils._pytree.tree_leaves((got, copies))
    want_leaves = torch.utils._pytree.tree_leaves((want, list(args)))
    assert len(got_leaves) == len(want_leaves)
    for index, (g, w) in enumerate(zip(got_leaves, want_leaves, strict=True)):
        if not isinstance(w, torch.Tensor):
            assert g == w, f"leaf {index}: {g!r} != {w!r}"
            continue
        assert g.dtype == w.dtype and g.shape == w.shape, f"leaf {index}: {g.dtype} {g.shape} vs {w.dtype} {w.shape}"
        if not torch.equal(_bits(g), _bits(w)):
            raise AssertionError(f"leaf {index}: eager and graph differ (max {(g.double() - w.double()).abs().max()})")


def _bits(t: torch.Tensor) -> torch.Tensor:
    """A tensor's bit patterns (floats as same-size ints: -0.0, NaN payloads and fp8 codes count)."""
    t = t.contiguous()
    if t.is_floating_point():
        return t.view({1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()])
    return t


def assert_op_eager_equals_graph(name: str, ge_type: str, call) -> None:
    """`assert_eager_equals_graph` for the npu op `name` ("op" or "op.overload") on `call()`'s
    (args, kwargs), a function of the op's tensor arguments compiled (the kwargs stay Python values)."""
    torch.manual_seed(0)
    args, kwargs = call()
    base, _, overload = name.partition(".")
    op = getattr(getattr(torch.ops.npu, base), overload or "default")

    def fn(*tensors):
        return op(*tensors, **kwargs)

    assert_eager_equals_graph(fn, list(args), ge_type)

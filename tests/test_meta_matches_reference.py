"""The generated Meta functions agree with the reference kernels on shapes and dtypes, for random
sizes of every `dims:` name (hypothesis), and keep symbolic sizes symbolic."""
import sympy
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.proxy_tensor import make_fx


def _shapes_and_dtypes(out):
    return [(tuple(t.shape), t.dtype) for t in torch.utils._pytree.tree_leaves(out) if isinstance(t, torch.Tensor)]


def _fake(mode, tree):
    return torch.utils._pytree.tree_map_only(torch.Tensor, mode.from_tensor, tree)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_meta_shapes_match_reference(case, data):
    dims = {name: data.draw(st.integers(2, 12), label=name) for name in case.used_dims()}
    if case.spec.name == "npu_custom_kv_cache_update_":   # positions are drawn unique from the cache length
        dims = {k: min(v, 4) for k, v in dims.items()}
    args, kwargs = case.inputs(dims, seed=1)
    with FakeTensorMode() as mode:
        fake_out = case.op(*_fake(mode, args), **_fake(mode, kwargs))
    real_out = case.op(*args, **kwargs)
    assert _shapes_and_dtypes(fake_out) == _shapes_and_dtypes(real_out)


def specialised_sizes(fn, args, kwargs) -> list[str]:
    """Trace `fn` with every tensor size symbolic (scalars stay constants, as for a compiled op's
    attributes); return the guards that pinned a size to a number."""
    leaves, spec = torch.utils._pytree.tree_flatten((args, kwargs))
    tensor_at = [i for i, x in enumerate(leaves) if isinstance(x, torch.Tensor)]

    def call(*tensors):
        filled = list(leaves)
        for i, t in zip(tensor_at, tensors):
            filled[i] = t
        a, k = torch.utils._pytree.tree_unflatten(filled, spec)
        return fn(*a, **k)

    gm = make_fx(call, tracing_mode="symbolic")(*(leaves[i] for i in tensor_at))
    shape_env = next(n.meta["val"].fake_mode.shape_env for n in gm.graph.nodes if n.op == "placeholder")
    return [str(g.expr) for g in shape_env.guards if isinstance(g.expr, sympy.Eq)
            and any(arg.is_number for arg in g.expr.args)]


def test_meta_keeps_sizes_symbolic(case):
    """Traced with symbolic sizes, the op adds no guard fixing a size to a number (a Meta function
    using int() or a Python-level comparison on sizes would)."""
    args, kwargs = case.inputs()
    assert specialised_sizes(case.op, args, kwargs) == []


def test_specialisation_is_detected():
    """The check above can fail: int() on a size pins it."""
    def specialising(x):
        return torch.empty(int(x.shape[0]) * 2)
    assert specialised_sizes(specialising, (torch.randn(4, 3),), {}) != []

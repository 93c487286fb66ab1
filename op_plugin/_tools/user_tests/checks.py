"""The checks run on a user's own ops, per op x YAML sample (`op-plugin test`, `op_plugin.testing`,
and the project's own tests of its shipped ops).

Each check takes a `SampleCase` and raises `AssertionError` (a finding) or `CheckSkipped`; it
returns a short detail on success. Oracles are never the code under test: opcheck (torch's own
consistency checks), the reference kernel for the Meta function and the backward, eager for graph
mode, and the user's own second implementation or golden values (oracles.py), which are what check
the formula of an op lowered to a custom GE type (the simulator runs its reference kernel).
"""
from __future__ import annotations

from collections.abc import Callable

import sympy
import torch
import torch._dynamo  # reset() below may run before any torch.compile has imported it

from ... import _registry
from ..._base.errors import option_fix
from ..._registry.fake_overrides import replaced_fake
from .error_text import clean_message
from .oracles import CheckSkipped, check_golden, check_oracle, custom_type_note
from .samples import SampleCase, assert_results_close, clone_tree

BACKWARD_TOLERANCE = dict(atol=2e-5, rtol=2e-4)  # float32; a formula differs from autograd in rounding only


def _floating(tree) -> list[torch.Tensor]:
    return [t for t in torch.utils._pytree.tree_leaves(tree) if isinstance(t, torch.Tensor) and t.is_floating_point()]


def _differentiable(case: SampleCase) -> bool:
    st = _registry.find(case.spec.qualname)
    return bool(case.spec.differentiable and st is not None and st.backward is not None)


def check_opcheck(case: SampleCase) -> str:
    """torch.library.opcheck: schema, fake tensor, autograd registration, AOT dispatch."""
    differentiable = _differentiable(case) and torch.is_grad_enabled()  # not under `op-plugin test --no-grad`
    args, kwargs = case.inputs(requires_grad=differentiable)
    # raise_exception=False: each failing test with its own message, not torch's "(scroll up for stack
    # trace)" wrapper, whose trace a report does not show
    results = torch.library.opcheck(case.op, args, kwargs, raise_exception=False)
    failed = {name: result for name, result in results.items() if result != "SUCCESS"}
    assert not failed, "opcheck: " + "; ".join(f"{name} failed: {clean_message(error)}"
                                               for name, error in failed.items())
    return "opcheck: " + ", ".join(sorted(results))


def _shapes_and_dtypes(out):
    return [(tuple(t.shape), t.dtype) for t in torch.utils._pytree.tree_leaves(out) if isinstance(t, torch.Tensor)]


def check_meta_matches_reference(case: SampleCase, dims: dict | None = None) -> str:
    """The Meta function (under FakeTensorMode) gives the eager kernel's shapes and dtypes."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    args, kwargs = case.inputs(dims, seed=1)
    with FakeTensorMode() as mode:
        fake_args, fake_kwargs = torch.utils._pytree.tree_map_only(torch.Tensor, mode.from_tensor, (args, kwargs))
        fake_out = case.op(*fake_args, **fake_kwargs)
    real_out = case.op(*args, **kwargs)
    meta, real = _shapes_and_dtypes(fake_out), _shapes_and_dtypes(real_out)
    assert meta == real, f"Meta gives {meta}, the eager kernel {real}"
    return f"{len(real)} output(s) agree"


def specialised_sizes(fn: Callable, args, kwargs) -> list[str]:
    """Trace `fn` with every tensor size symbolic (scalars stay constants, as for a compiled op's
    attributes); return the guards that pinned a size to a number (what int() on a size does), each
    with the sizes it pins, e.g. `Eq(s1, 3) (input 0 dim 1)`."""
    from torch.fx.experimental.proxy_tensor import make_fx

    leaves, spec = torch.utils._pytree.tree_flatten((args, kwargs))
    tensor_at = [i for i, x in enumerate(leaves) if isinstance(x, torch.Tensor)]

    def call(*tensors):
        filled = list(leaves)
        for i, t in zip(tensor_at, tensors, strict=True):
            filled[i] = t
        a, k = torch.utils._pytree.tree_unflatten(filled, spec)
        return fn(*a, **k)

    gm = make_fx(call, tracing_mode="symbolic")(*(leaves[i] for i in tensor_at))
    placeholders = [n.meta.get("val") for n in gm.graph.nodes if n.op == "placeholder"]
    where: dict = {}
    for position, value in enumerate(placeholders):
        if isinstance(value, torch.Tensor):
            for dim, size in enumerate(value.shape):
                if isinstance(size, torch.SymInt):
                    # the raw expression: after a guard pins it, `expr` already reads as the number
                    for symbol in getattr(size.node, "_expr", size.node.expr).free_symbols:
                        where.setdefault(symbol, f"input {position} dim {dim}")
    shape_env = next((v.fake_mode.shape_env for v in placeholders if isinstance(v, torch.Tensor)), None)
    if shape_env is None:
        return []
    found = []
    for guard in shape_env.guards:
        if isinstance(guard.expr, sympy.Eq) and any(arg.is_number for arg in guard.expr.args):
            sizes = ", ".join(where[s] for s in sorted(guard.expr.free_symbols, key=str) if s in where)
            found.append(f"{guard.expr} ({sizes})" if sizes else str(guard.expr))
    return found


def check_symbolic_meta(case: SampleCase) -> str:
    """Traced with symbolic sizes, the op (its Meta function) pins no size to a number."""
    args, kwargs = case.inputs()
    pinned = specialised_sizes(case.op, args, kwargs)
    tensor_names = [name for name, value in _named_leaves(case.spec, args, kwargs) if isinstance(value, torch.Tensor)]
    for i, name in enumerate(tensor_names):
        pinned = [p.replace(f"input {i} dim ", f"{name} dim ") for p in pinned]
    st = _registry.find(case.spec.qualname)
    fake = replaced_fake(case.spec.qualname)
    if fake is not None:
        who = f"the torch.library.register_fake function ({fake.source})"
    elif st is not None and st.meta is not None:
        who = "the user-written Meta function"
    else:
        who = "the generated Meta function"
    assert not pinned, (f"{who} specialises symbolic sizes (int() or a Python comparison on a size?): "
                        f"guards {pinned}; torch.compile(dynamic=True) would recompile for every new size")
    return "sizes stay symbolic"


def _require_ge_lowering(case: SampleCase) -> None:
    st = _registry.find(case.spec.qualname)
    if case.spec.ge is None and (st is None or st.converter is None):
        raise CheckSkipped("no `ge:` mapping or @converter: the op has no GE lowering")


def _named_leaves(spec, args, kwargs):
    """(argument name, leaf) in the order pytree flattens (args, kwargs); a list argument's items
    are named name[i]."""
    names = [a.name for a in spec.schema.args]
    result = []
    # strict=False: the positional args may cover only a prefix of the schema's arguments
    for name, value in [*zip(names, args, strict=False), *kwargs.items()]:
        if isinstance(value, (list, tuple)):
            result += [(f"{name}[{i}]", v) for i, v in enumerate(value)]
        else:
            result.append((name, value))
    return result


def compiled_vs_eager(case: SampleCase, compiled, dims=None, seed=5) -> tuple:
    """Run `compiled` and the op eagerly on the sample's inputs (copies); outputs and mutated
    arguments must agree. Returns the (args, kwargs) `compiled` ran on."""
    args, kwargs = case.inputs(dims, seed=seed)
    eager_args, eager_kwargs = clone_tree((args, kwargs))
    with torch.no_grad():
        got = compiled(*args, **kwargs)
        want = case.op(*eager_args, **eager_kwargs)
    assert_results_close(got, want)
    # in-place ops mutate the same way (arguments counted in order)
    assert_results_close((args, kwargs), (eager_args, eager_kwargs), label="argument")
    return args, kwargs


def check_npugraph_static(case: SampleCase) -> str:
    """npugraph (static shapes) == eager, outputs and mutated arguments."""
    _require_ge_lowering(case)
    op = case.op
    torch._dynamo.reset()
    compiled = torch.compile(lambda *a, **k: op(*a, **k), backend="npugraph", fullgraph=True)
    compiled_vs_eager(case, compiled)
    if custom_type_note(case.spec):  # the simulator ran the reference kernel for the custom type
        return f"matches eager (custom GE type {case.spec.ge.type}: the lowering is checked, not the formula)"
    return "matches eager"


def check_npugraph_dynamic(case: SampleCase) -> str:
    """npugraph with dynamic=True == eager at three sizes, with one compile."""
    _require_ge_lowering(case)
    from .counting_backend import CountingNpugraph

    op = case.op
    torch._dynamo.reset()
    backend = CountingNpugraph()
    compiled = torch.compile(lambda *a, **k: op(*a, **k), backend=backend, dynamic=True, fullgraph=True)
    variants = case.variants(3)
    for dims in variants:
        compiled_vs_eager(case, compiled, dims)
    assert backend.compiles == 1, f"{backend.compiles} compiles for sizes {variants} (expected 1: a recompile)"
    return f"{len(variants)} sizes, 1 compile"


def check_backward(case: SampleCase) -> str:
    """The backward formula against autograd through the reference kernel, float32, a random
    cotangent on every floating output."""
    if not torch.is_grad_enabled():
        raise CheckSkipped(f"{option_fix('no_grad')}: inference only")   # --no-grad in the CLI, no_grad=True in Python
    if not _differentiable(case):
        raise CheckSkipped("no backward")
    reference = _registry.find(case.spec.qualname).reference
    if reference is None:
        raise CheckSkipped("no reference kernel to differentiate")

    def leaf(t):
        return t.detach().float().requires_grad_() if t.is_floating_point() else t

    args, kwargs = torch.utils._pytree.tree_map_only(torch.Tensor, leaf, case.inputs(seed=3))
    if not _floating((args, kwargs)):
        raise CheckSkipped("no floating inputs")
    ref_args, ref_kwargs = torch.utils._pytree.tree_map_only(torch.Tensor, leaf, (args, kwargs))
    got = _grads(case.op, args, kwargs)
    want = _grads(reference, ref_args, ref_kwargs)
    assert len(got) == len(want) and got, "no gradients"
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        if w is None:
            assert g is None or not g.any(), f"input {i} gets a gradient the reference does not give"
            continue
        assert g is not None, f"input {i} gets no gradient but the reference gives one"
        torch.testing.assert_close(g, w, **BACKWARD_TOLERANCE, msg=lambda m, i=i: f"gradient of input {i}: {m}")
    return f"{len(got)} gradient(s) agree"


def _grads(fn, args, kwargs, cotangent_seed: int = 7):
    outs = _floating(fn(*args, **kwargs))
    generator = torch.Generator().manual_seed(cotangent_seed)
    cotangents = [torch.randn(o.shape, generator=generator, dtype=o.dtype) for o in outs]
    leaves = [t for t in _floating((args, kwargs)) if t.requires_grad]
    return torch.autograd.grad(outs, leaves, cotangents, allow_unused=True)


# name -> check, in the order they run
CHECKS: dict[str, Callable[[SampleCase], str]] = {
    "opcheck": check_opcheck,
    "meta": check_meta_matches_reference,
    "symbolic": check_symbolic_meta,
    "npugraph": check_npugraph_static,
    "dynamic": check_npugraph_dynamic,
    "backward": check_backward,
    "oracle": check_oracle,     # a user's second implementation (oracles.py)
    "golden": check_golden,     # a user's expected values, as their own cases
}
# run by default only when an op of the file has an oracle or golden values
ORACLE_CHECKS = ("oracle", "golden")

"""Every shipped backward formula against an oracle that is not itself: autograd through the op's
reference kernel (plain differentiable torch code), with a random cotangent on every floating
output, so a gradient through any output (rstd of the RMS norms included) is checked. Every sample
runs in float32: the formulas are compared, not half-precision rounding."""
from __future__ import annotations

import pytest
import torch

from op_plugin import _registry
from op_plugin.testing import sample_cases

TOLERANCE = dict(atol=2e-5, rtol=2e-4)  # float32; the formulas differ from autograd in rounding only


def _differentiable(case) -> bool:
    st = _registry.find(case.spec.qualname)
    return case.spec.differentiable and st.backward is not None


def _floating_tensors(tree) -> list[torch.Tensor]:
    return [t for t in torch.utils._pytree.tree_leaves(tree) if isinstance(t, torch.Tensor) and t.is_floating_point()]


def _grads(fn, args, kwargs, cotangent_seed: int):
    outputs = fn(*args, **kwargs)
    outs = _floating_tensors(outputs)
    generator = torch.Generator().manual_seed(cotangent_seed)
    cotangents = [torch.randn(o.shape, generator=generator, dtype=o.dtype) for o in outs]
    leaves = [t for t in _floating_tensors((args, kwargs)) if t.requires_grad]
    return torch.autograd.grad(outs, leaves, cotangents, allow_unused=True)


def test_every_backward_has_a_case():
    ops = {c.spec.qualname for c in sample_cases() if _differentiable(c)}
    with_backward = {st.qualname for st in _registry.loaded() if st.backward is not None and st.spec.differentiable}
    assert ops == with_backward


def test_backward_matches_autograd_through_the_reference(case):
    if not _differentiable(case):
        pytest.skip(f"{case.spec.qualname} has no backward")
    reference = _registry.find(case.spec.qualname).reference
    def float32_leaf(t):
        return t.detach().float().requires_grad_() if t.is_floating_point() else t

    args, kwargs = torch.utils._pytree.tree_map_only(torch.Tensor, float32_leaf, case.inputs(seed=3))
    if not _floating_tensors((args, kwargs)):
        pytest.skip(f"{case.id} has no floating inputs")
    ref_args, ref_kwargs = torch.utils._pytree.tree_map_only(torch.Tensor, float32_leaf, (args, kwargs))
    got = _grads(case.op, args, kwargs, cotangent_seed=7)
    want = _grads(reference, ref_args, ref_kwargs, cotangent_seed=7)
    assert len(got) == len(want) and got, case.id
    for i, (g, w) in enumerate(zip(got, want)):
        if w is None:
            assert g is None or not g.any(), f"{case.id}: input {i} gets a gradient the reference does not give"
            continue
        assert g is not None, f"{case.id}: input {i} gets no gradient but the reference gives one"
        torch.testing.assert_close(g, w, **TOLERANCE, msg=lambda m: f"{case.id} input {i}: {m}")

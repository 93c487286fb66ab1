"""torch.library.opcheck for every shipped op and every YAML sample (generated, not hand-listed)."""
import torch
from torch.library import opcheck

import op_plugin
from op_plugin import _registry
from op_plugin._registry.load import parse_yaml


def test_opcheck(case):
    st = _registry.find(case.spec.qualname)
    differentiable = case.spec.differentiable and st.backward is not None
    args, kwargs = case.inputs(requires_grad=differentiable)
    results = opcheck(case.op, args, kwargs)
    assert set(results.values()) == {"SUCCESS"}, results
    tensors = [t for t in torch.utils._pytree.tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)]
    if differentiable and any(t.is_floating_point() for t in tensors):
        # opcheck runs its autograd checks only when some input requires grad
        assert any(t.requires_grad for t in tensors)


def test_every_shipped_op_is_complete():
    """Each shipped op has samples, a reference kernel, and a backward unless it mutates."""
    for path in op_plugin.shipped_yaml_files():
        for spec in parse_yaml(path):
            st = _registry.find(spec.qualname)
            assert spec.samples, f"{spec.qualname} has no samples"
            assert st.reference is not None, f"{spec.qualname} has no reference kernel"
            assert (st.backward is not None) == spec.differentiable, spec.qualname

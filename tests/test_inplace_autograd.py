"""In-place YAML ops keep autograd honest: the mutated tensor's version counter moves (so a saved
tensor that was overwritten is detected), and a mutated input that requires grad is refused."""
from __future__ import annotations

import pytest
import torch

import op_plugin  # registers the shipped ops

kv_update = torch.ops.npu.npu_custom_kv_cache_update_


def test_inplace_op_bumps_the_version_counter():
    cache, update = torch.zeros(2, 4, 3), torch.ones(2, 2, 3)
    before = cache._version
    out = kv_update(cache, update, torch.tensor([0, 2]), 1)
    assert out is cache and cache._version > before


def test_overwritten_saved_tensor_is_detected_by_autograd():
    weight = torch.randn(2, 4, 3, requires_grad=True)
    cache = torch.zeros(2, 4, 3)
    product = weight * cache           # saves `cache` for the gradient of `weight`
    with torch.no_grad():
        kv_update(cache, torch.ones(2, 1, 3), torch.tensor([1]), 1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        product.sum().backward()


def test_mutating_a_tensor_that_requires_grad_is_refused():
    cache = torch.zeros(2, 4, 3, requires_grad=True).clone()
    with pytest.raises(op_plugin.OpPluginError, match="in-place op and has no gradient"):
        kv_update(cache, torch.ones(2, 1, 3), torch.tensor([1]), 1)


def test_version_moves_even_when_the_reference_kernel_writes_behind_autograd(tmp_path):
    """The op's own ADInplaceOrView kernel bumps the counter: a reference kernel may write through
    `.data`, numpy or a device library, which autograd cannot see."""
    from op_plugin._registry import detach
    from op_plugin._registry.load import unload

    path = tmp_path / "bump.yaml"
    path.write_text("ops:\n  - func: npu_probe_add_one_(Tensor(a!) x) -> Tensor(a!)\n", encoding="utf-8")
    (qualname,) = op_plugin.load_yaml(path)

    @op_plugin.reference(qualname)
    def add_one_(x):
        x.data.add_(1)                 # invisible to the version counter
        return x

    try:
        x = torch.zeros(3)
        before = x._version
        torch.ops.npu.npu_probe_add_one_(x)
        assert x.tolist() == [1.0, 1.0, 1.0] and x._version > before
    finally:
        unload(qualname)
        detach(qualname, "reference")

"""npu_scatter_nd_update and npu_scatter_nd_update_ (issue 23): the CPU reference against a loop over the
index tuples, the in-place form functionalized as torch_npu does it (functional variant + copy back), so
a KV-cache write compiles with npugraph (TorchAir: ScatterNdUpdate) and leaves the cache as eager does."""
import pytest
import torch

from op_plugin._simulator.npu import ops as npu_ops
from op_plugin._simulator import capture_graphs
from op_plugin._testing_harness import Npugraph, check_compiled, run_node

npu = torch.ops.npu
pytestmark = pytest.mark.usefixtures("torchair")


def _oracle(var, indices, updates):
    out = var.clone()
    k = indices.shape[-1]
    flat_idx, flat_upd = indices.reshape(-1, k).tolist(), updates.reshape(-1, *var.shape[k:])
    for j, index in enumerate(flat_idx):
        out[tuple(index)] = flat_upd[j]
    return out


CASES = {  # var shape, indices, updates shape
    "rows": ((8, 4), [[1], [5], [2]], (3, 4)),
    "cells": ((4, 5), [[0, 1], [3, 4]], (2,)),
    "cache_slots": ((6, 2, 3), [[[4]], [[0]]], (2, 1, 2, 3)),
    "none": ((3, 2), torch.zeros(0, 1, dtype=torch.long), (0, 2)),
}


@pytest.mark.parametrize("dtype", (torch.float32, torch.float16, torch.int32))
@pytest.mark.parametrize("name", sorted(CASES))
def test_scatter_nd_update(name, dtype):
    shape, indices, ushape = CASES[name]
    var = torch.randn(shape).to(dtype)
    indices = torch.as_tensor(indices, dtype=torch.int64)
    updates = torch.randn(ushape).to(dtype)
    want = _oracle(var, indices, updates)
    assert torch.equal(npu.npu_scatter_nd_update(var, indices, updates), want)
    copy = var.clone()
    assert npu.npu_scatter_nd_update_(copy, indices.int(), updates) is copy
    assert torch.equal(copy, want)


def test_scatter_nd_update_refusals():
    var = torch.zeros(4, 2)
    with pytest.raises(IndexError, match="outside"):
        npu.npu_scatter_nd_update(var, torch.tensor([[4]]), torch.ones(1, 2))
    with pytest.raises(ValueError, match="twice"):
        npu.npu_scatter_nd_update(var, torch.tensor([[1], [1]]), torch.ones(2, 2))
    with pytest.raises(ValueError, match="shape"):
        npu.npu_scatter_nd_update(var, torch.tensor([[1]]), torch.ones(1, 3))
    with pytest.raises(Exception, match="twice") as error:
        run_node("ScatterNdUpdate", {"var": var, "indices": torch.tensor([[1], [1]]), "updates": torch.ones(2, 2)},
                 [(torch.float32, [4, 2])], name="kv_write")
    assert "kv_write" in str(error.value)


def test_torch_npus_in_place_ops_with_a_functional_variant_are_functionalized():
    functionalized = torch._C._dispatch_get_registrations_for_dispatch_key("Functionalize")
    assert "npu::npu_scatter_nd_update_" in functionalized and "npu::scatter_update_" in functionalized
    assert "npu::npu_scatter_nd_update" not in functionalized  # the functional form needs none


def test_kv_cache_write_in_place_compiles_and_updates_the_cache():
    def step(cache, slots, new_kv, query):
        npu.npu_scatter_nd_update_(cache, slots, new_kv)
        return (cache * query).sum(-1)

    def make():
        return (torch.randn(16, 2, 8), torch.tensor([[3], [9]]), torch.randn(2, 2, 8), torch.randn(16, 2, 8))

    eager_args, graph_args = make(), None
    graph_args = tuple(a.clone() for a in eager_args)
    want = step(*eager_args)
    compiled = Npugraph(step)
    with capture_graphs() as graphs:
        got = compiled(*graph_args)
    torch.testing.assert_close(got, want)
    assert torch.equal(graph_args[0], eager_args[0])  # the copy back: the caller's cache holds the write
    types = {op.type for graph in graphs for op in graph.op}
    assert "ScatterNdUpdate" in types


def test_functional_scatter_nd_update_compiled():
    args = (torch.randn(8, 4), torch.tensor([[1], [6]]), torch.randn(2, 4))
    check_compiled(lambda v, i, u: npu.npu_scatter_nd_update(v, i, u) + 1, args, "ScatterNdUpdate", kind="npu_ops")


def test_kv_cache_write_compiled_dynamic():
    def step(cache, slots, new_kv):
        npu.npu_scatter_nd_update_(cache, slots, new_kv)
        return cache + 0
    compiled = Npugraph(step, dynamic=True)
    for rows in (2, 3):
        cache, slots, kv = torch.randn(12, 4), torch.arange(rows).unsqueeze(-1) * 3, torch.randn(rows, 4)
        want_cache = cache.clone()
        want = step(want_cache, slots, kv)
        got = compiled(cache, slots, kv)
        torch.testing.assert_close(got, want)
        assert torch.equal(cache, want_cache)
    assert "npu_scatter_nd_update_" in npu_ops.COVERED

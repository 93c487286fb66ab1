"""The simulator's fix to TorchAir's unique-name search changes no byte of the GE graphs it builds."""
import pytest
import torch

from op_plugin._simulator import capture_graphs
from op_plugin._simulator.hosting.torchair_fixes import IndexedNames


class Repeated(torch.nn.Module):
    """Many nodes of a few op types, so names like Add_57 and user-style collisions occur."""

    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(8, 8) for _ in range(12))

    def forward(self, x):
        for layer in self.layers:
            x = torch.relu(layer(x)) + x * 0.5
        return x.sum(-1)


def _ops(graph):
    return [op.SerializeToString(deterministic=True) for op in graph.op]


def _lower(dynamic):
    torch._dynamo.reset()
    torch.manual_seed(0)
    compiled = torch.compile(Repeated(), backend="npugraph", dynamic=dynamic)
    with capture_graphs() as graphs:
        compiled(torch.randn(3, 8))
    return graphs[-1]


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
def test_graphs_are_byte_identical_with_and_without_the_fix(torchair, monkeypatch, dynamic):
    from torchair.ge._ge_graph import GeGraph

    lookups = []
    contains = IndexedNames.__contains__
    monkeypatch.setattr(IndexedNames, "__contains__", lambda self, name: lookups.append(name) or contains(self, name))
    fixed = _lower(dynamic)
    assert len(lookups) > 60   # the fix was in effect
    monkeypatch.setattr(GeGraph, "next_unique_name", GeGraph.next_unique_name._op_plugin_original)
    original = _lower(dynamic)
    assert len(fixed.op) > 60
    assert _ops(fixed) == _ops(original)


def test_indexed_names_behave_as_the_list_for_what_torchair_does():
    names = IndexedNames(["Add", "Add_1"])
    names.append("Mul")
    assert "Mul" in names and "Add_1" in names and "Add_2" not in names
    assert list(names) == ["Add", "Add_1", "Mul"]
    with pytest.raises(TypeError):
        names.extend(["x"])   # would leave the index stale: refused

"""Every shipped op and sample through torch.compile(backend="npugraph"): TorchAir lowers it with
the generated converters and the simulator executes the GE graph; numbers must equal eager."""
import pytest
import torch

import op_plugin
from op_plugin import _registry, _simulator
from op_plugin._ge.graph import op_types as ge_op_types
from op_plugin._ge.values import decode_attr
from op_plugin.testing import CountingNpugraph
from op_plugin._tools.user_tests.checks import compiled_vs_eager


def test_static_matches_eager_and_graph_has_the_mapping(case):
    op = case.op
    compiled = torch.compile(lambda *a, **k: op(*a, **k), backend="npugraph", fullgraph=True)
    with _simulator.capture_graphs() as graphs:
        args, kwargs = compiled_vs_eager(case, compiled)
    (graph,) = graphs
    types = ge_op_types(graph)
    st = _registry.find(case.spec.qualname)
    if st.converter is not None:   # hand-written converter (converters/): its own GE ops, no custom type
        assert not any(t.startswith("Npu") for t in types), types
        return
    ge = case.spec.ge
    nodes = [n for n in graph.op if n.type == ge.type]
    assert len(nodes) == 1, types
    node = nodes[0]
    bound = op_plugin._registry.binding.bind(case.spec, args, kwargs)[2]
    for attr in ge.attrs:
        expected = attr.value(bound)
        actual = decode_attr(node.attr[attr.ge_name])
        if isinstance(expected, float):
            assert actual == pytest.approx(expected, rel=1e-6)   # GE stores float32
        else:
            assert actual == (list(expected) if isinstance(expected, tuple) else expected)
    input_names = [d.name for d in node.input_desc]
    for ge_input in ge.inputs:
        value = bound[ge_input.arg]
        if ge_input.kind == "dynamic":
            assert sum(n.startswith(ge_input.ge_name) for n in input_names) == len(value)
        elif value is not None:
            assert ge_input.ge_name in input_names
    assert [d.name for d in node.output_desc][: len(ge.outputs)] == list(ge.outputs)


def test_dynamic_three_sizes_one_compile(case):
    op = case.op
    backend = CountingNpugraph()
    compiled = torch.compile(lambda *a, **k: op(*a, **k), backend=backend, dynamic=True, fullgraph=True)
    for dims in case.variants(3):
        compiled_vs_eager(case, compiled, dims)
    assert backend.compiles == 1

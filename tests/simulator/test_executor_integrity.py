"""The executor never hands out memory it keeps, and checks every intermediate shape against the FX
graph TorchAir lowered: right shapes pass (static and dynamic, real models), a wrong one is caught."""
import sys
from pathlib import Path

import pytest
import torch

import op_plugin
from op_plugin import _registry
from op_plugin._registry.load import unload
from op_plugin._simulator import GeExecutionError, execute_graph
from op_plugin._simulator.interpreter.executor import plan as plan_module

F32, I64 = torch.float32, torch.int64
ROOT = Path(__file__).resolve().parents[2]


# ---- outputs own their memory ------------------------------------------------------------------

def test_a_constant_output_is_a_fresh_tensor_every_call():
    class M(torch.nn.Module):
        def forward(self, x):
            return x + 1, torch.tensor([1.0, 2.0, 3.0])

    compiled = torch.compile(M(), backend="npugraph")
    first = compiled(torch.zeros(2))
    first[1].add_(100)
    torch.testing.assert_close(compiled(torch.zeros(2))[1], torch.tensor([1.0, 2.0, 3.0]))


@pytest.mark.parametrize("path", ["const", "identity_chain", "reshape_view", "twice"])
def test_no_output_shares_storage_with_a_const_or_another_output(graph_builder, path):
    g = graph_builder()
    x = g.data("x", F32, [2])
    c = g.const("c", torch.tensor([[1.0, 2.0], [3.0, 4.0]]))
    if path == "identity_chain":
        (c,) = g.node("id1", "Identity", [c], [(F32, [2, 2])])
        (c,) = g.node("id2", "Identity", [c], [(F32, [2, 2])])
    elif path == "reshape_view":
        shape = g.const("shape", torch.tensor([4], dtype=I64))
        (c,) = g.node("flat", "Reshape", [c, shape], [(F32, [4])])
    shape_out = [4] if path == "reshape_view" else [2, 2]
    outputs = [c, c] if path == "twice" else [c, x]
    descs = [(F32, shape_out), (F32, shape_out)] if path == "twice" else [(F32, shape_out), (F32, [2])]
    plan = plan_module.compile_graph(g.output(outputs, descs))
    inp = torch.zeros(2)
    got = plan.run([inp])
    kept = {step.const.untyped_storage().data_ptr() for step in plan.steps if step.const is not None}
    storages = [t.untyped_storage().data_ptr() for t in got]
    assert len(set(storages)) == len(storages)
    assert not set(storages) & (kept | {inp.untyped_storage().data_ptr()})
    got[0].mul_(0)
    assert plan.run([inp])[0].flatten().tolist() == [1.0, 2.0, 3.0, 4.0]


# ---- intermediate shapes against the FX graph -------------------------------------------------

@pytest.fixture
def counted_fx_checks(monkeypatch):
    calls = []
    original = plan_module.check_fx_shape

    def counting(tensor, expected, fx, where):
        calls.append((fx.fx_name, expected, tuple(tensor.shape)))
        return original(tensor, expected, fx, where)

    monkeypatch.setattr(plan_module, "check_fx_shape", counting)
    return calls


def _example(name):
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    return __import__(f"examples.{name}", fromlist=["build"])


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
@pytest.mark.parametrize("name", ["llama_block", "bert_layer"])
def test_real_models_check_intermediate_shapes_without_false_alarms(name, dynamic, counted_fx_checks):
    example = _example(name)
    model, _ = example.build()
    compiled = torch.compile(model, backend="npugraph", fullgraph=True, dynamic=dynamic)
    sizes = [(2, 5), (3, 7)] if dynamic else [(2, 5)]
    for batch, seq in sizes:
        inputs = example.example_inputs(model, batch=batch, seq=seq)
        with torch.no_grad():   # the cache inputs are updated in place: each side gets its own copy
            expected = model(*[t.clone() for t in inputs])
            torch.testing.assert_close(compiled(*[t.clone() for t in inputs]), expected, atol=1e-4, rtol=1e-4)
    assert len(counted_fx_checks) > 10
    if dynamic:  # sizes were resolved from the inputs, not left as wildcards
        assert any(None not in expected and batch in expected for _, expected, _ in counted_fx_checks)


@pytest.fixture
def column_sum_op(tmp_path):
    """npu_user_colsum(x) -> x.sum(1, keepdim=True), [N, 1]; its converter is given by each test."""
    path = tmp_path / "colsum.yaml"
    path.write_text("ops:\n  - func: npu_user_colsum(Tensor x) -> Tensor\n"
                    "    outputs: [{size: '[x.shape[0], 1]', dtype: x}]\n    ge: {type: NpuUserColsum}\n")
    op_plugin.reference("npu_user_colsum")(lambda x: x.sum(1, keepdim=True))
    op_plugin.load_yaml(path)
    yield
    unload("npu_user_colsum")
    for piece in ("reference", "converter"):
        _registry.detach("npu_user_colsum", piece)


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
def test_a_user_converter_with_a_wrong_intermediate_shape_is_caught(column_sum_op, dynamic):
    @op_plugin.converter("npu_user_colsum")
    def wrong_axis(x, meta_outputs=None):
        from torchair._ge_concrete_graph import ge_apis as ge
        return ge.ReduceSumD(x, axes=[0], keep_dims=True)   # [1, N]: broadcasting would hide it

    torch._dynamo.reset()
    f = torch.compile(lambda x: x + torch.ops.npu.npu_user_colsum(x), backend="npugraph",
                      fullgraph=True, dynamic=dynamic)
    with pytest.raises(Exception, match=r"node 'ReduceSumD' \(ReduceSumD\) output 0: shape mismatch with the FX "
                                        r"graph, FX node 'npu_user_colsum.*' has shape \[4, 1\].*produced \[1, 4\]"):
        f(torch.randn(4, 4))


def test_the_right_converter_passes_the_same_check(column_sum_op, counted_fx_checks):
    @op_plugin.converter("npu_user_colsum")
    def right_axis(x, meta_outputs=None):
        from torchair._ge_concrete_graph import ge_apis as ge
        return ge.ReduceSumD(x, axes=[1], keep_dims=True)

    torch._dynamo.reset()
    f = torch.compile(lambda x: x + torch.ops.npu.npu_user_colsum(x), backend="npugraph", fullgraph=True)
    x = torch.randn(4, 4)
    torch.testing.assert_close(f(x), x + x.sum(1, keepdim=True))
    assert any(name.startswith("npu_user_colsum") and expected == (4, 1) for name, expected, _ in counted_fx_checks)


def test_a_wrong_rank_is_caught_even_where_sizes_are_unknown(graph_builder):
    import sympy

    from op_plugin._simulator.hosting.fx_meta import FxMetaRecord

    u0 = sympy.Symbol("u0", integer=True)   # an unbacked size: no input binds it
    g = graph_builder()
    x = g.data("x", F32, [-1])
    (y,) = g.node("relu", "Relu", [x], [(F32, None)])
    graph = g.output([y], [(F32, None)])
    relu = next(op for op in graph.op if op.name == "relu")
    relu.output_desc[0].attr["_fx_tensor_name"].s = b"relu-aten.relu.default.OUTPUT.0"
    record = FxMetaRecord(outputs={"relu-aten.relu.default.OUTPUT.0": (u0, 1)}, placeholders={})
    with pytest.raises(GeExecutionError, match=r"FX node 'relu-aten.relu.default.OUTPUT.0' has shape \['\?', 1\]"):
        plan_module.compile_graph(graph, fx_meta=record).run([torch.randn(3)])
    record.outputs["relu-aten.relu.default.OUTPUT.0"] = (u0,)
    assert plan_module.compile_graph(graph, fx_meta=record).run([torch.randn(3)])[0].shape == (3,)


def test_graphs_without_a_record_run_unchecked_by_fx(graph_builder):
    g = graph_builder()
    x = g.data("x", F32, [3])
    (y,) = g.node("relu", "Relu", [x], [(F32, None)])
    (got,) = execute_graph(g.output([y], [(F32, [3])]), [torch.tensor([-1.0, 0.0, 2.0])])
    assert got.tolist() == [0.0, 0.0, 2.0]


def test_an_observer_sees_every_kernel_node_in_order(graph_builder):
    from op_plugin._simulator.interpreter.executor import observing

    g = graph_builder()
    x = g.data("x", F32, [3])
    (y,) = g.node("neg", "Neg", [x], [(F32, [3])])
    (z,) = g.node("relu", "Relu", [y], [(F32, [3])])
    plan = plan_module.compile_graph(g.output([z], [(F32, [3])]))
    seen = []
    with observing(lambda p, op, outputs: seen.append((op.name, [t.clone() for t in outputs]))):
        plan.run([torch.tensor([1.0, -2.0, 3.0])])
    plan.run([torch.zeros(3)])   # outside the block: not observed
    assert [name for name, _ in seen] == ["neg", "relu"]
    assert seen[1][1][0].tolist() == [0.0, 2.0, 0.0]


def test_a_symint_fed_as_a_one_element_array_to_a_scalar_data_node_is_that_scalar(graph_builder):
    # TorchAir's generated input code feeds SymInt inputs as numpy.array([v]).
    g = graph_builder()
    n = g.data("n", I64, [])
    two = g.const("two", torch.tensor(2, dtype=I64))
    (y,) = g.node("mul", "Mul", [n, two], [(I64, [])])
    graph = g.output([y], [(I64, [])])
    (got,) = execute_graph(graph, [torch.tensor([5])])
    assert got.shape == () and got.item() == 10
    with pytest.raises(GeExecutionError, match="shape mismatch"):
        execute_graph(graph, [torch.tensor([5, 6])])

"""Fast calls (interpreter/fast_calls): on a verified signature the program calls the aten op a kernel
would call, found and checked bit for bit against the kernel on the signature's first call. A wrong
fast call is caught naming its node, a value is baked in only from an input the signature fixes, and
no output shares memory with an input however it was produced."""
import collections

import pytest
import torch

from op_plugin._simulator.interpreter import fast_calls
from op_plugin._simulator.interpreter.executor import plan as plan_module
from op_plugin._simulator.interpreter.kernels import builtin_kernels

F32, I64 = torch.float32, torch.int64


def _verified(plan):
    """A hand-built plan verified per signature, as a lowered one (with its FX record) is."""
    plan.fx = plan_module.FxShapes.__new__(plan_module.FxShapes)
    plan.fx.bindings, plan.fx._cache = [], {}
    plan._verified = None if plan._check_every_call() else collections.OrderedDict()
    assert plan._verified is not None
    return plan


def _scaled_flat(graph_builder, shape_from=None):
    """y = reshape(x * x2, shape): shape a Const [6], or computed by the graph from `shape_from`."""
    g = graph_builder()
    x = g.data("x", F32, [2, 3])
    x2 = g.data("x2", F32, [2, 3])
    (y,) = g.node("mul", "Mul", [x, x2], [(F32, [2, 3])])
    if shape_from is None:
        shape = g.const("shape", torch.tensor([6], dtype=I64))
        out = [6]
    else:
        floats = g.data("s", F32, [2])
        (shape,) = g.node("to_int", "Cast", [floats], [(I64, [2])], dst_type=9)  # DT_INT64
        out = [-1, -1]
    (r,) = g.node("flat", "Reshape", [y, shape], [(F32, out)])
    return g.output([r], [(F32, out)])


def test_verified_calls_run_the_fast_calls_and_match_an_oracle(graph_builder):
    plan = _verified(plan_module.compile_graph(_scaled_flat(graph_builder)))
    for seed in range(3):
        x, x2 = torch.randn(2, 3, generator=torch.Generator().manual_seed(seed)), torch.full((2, 3), 2.0)
        (y,) = plan.run([x, x2])
        expected = [x[i // 3, i % 3].item() * 2.0 for i in range(6)]  # index by index (doubling is exact)
        assert y.tolist() == pytest.approx(expected, rel=0, abs=0)
    assert plan._program.fast_nodes == 2  # Mul and Reshape (its shape a Const)
    assert "k0(v" in plan._program.source and "a0_" not in plan._program.source  # no attrs passed per call


def test_a_wrong_fast_call_is_caught_on_the_first_call_naming_the_node(graph_builder, monkeypatch):
    mul = builtin_kernels()["Mul"]
    monkeypatch.setitem(fast_calls._SPECIALISERS, mul, (lambda x1, x2: lambda a, b: a * b + 1, ()))
    plan = _verified(plan_module.compile_graph(_scaled_flat(graph_builder)))
    with pytest.raises(plan_module.GeExecutionError, match=r"node 'mul' \(Mul\) output 0: the simulator's fast "
                                                           r"call differs from the kernel \(values differ\)"):
        plan.run([torch.ones(2, 3), torch.ones(2, 3)])


def test_a_fast_call_returning_other_strides_is_caught(graph_builder, monkeypatch):
    mul = builtin_kernels()["Mul"]
    monkeypatch.setitem(fast_calls._SPECIALISERS, mul, (lambda x1, x2: lambda a, b: (a * b).t().contiguous().t(), ()))
    plan = _verified(plan_module.compile_graph(_scaled_flat(graph_builder)))
    with pytest.raises(plan_module.GeExecutionError, match=r"node 'mul' \(Mul\) output 0: .*\(strides"):
        plan.run([torch.ones(2, 3), torch.ones(2, 3)])


def test_fast_calls_can_be_switched_off(graph_builder, monkeypatch):
    monkeypatch.setenv("OP_PLUGIN_NO_FAST_CALLS", "1")
    plan = _verified(plan_module.compile_graph(_scaled_flat(graph_builder)))
    for _ in range(2):
        (y,) = plan.run([torch.ones(2, 3), torch.full((2, 3), 2.0)])
    assert plan._program.fast_nodes == 0 and torch.equal(y, torch.full((6,), 2.0))


def test_a_value_that_changes_within_a_signature_is_never_baked_in(graph_builder):
    """Reshape's shape computed per call from float data (not folded): one signature, two shapes."""
    plan = _verified(plan_module.compile_graph(_scaled_flat(graph_builder, shape_from="data")))
    x, ones = torch.arange(6.0).reshape(2, 3), torch.ones(2, 3)
    for rows, cols in ((2, 3), (3, 2), (6, 1), (1, 6)):
        (y,) = plan.run([x, ones, torch.tensor([float(rows), float(cols)])])
        assert y.shape == (rows, cols)
        assert [[y[r, c].item() for c in range(cols)] for r in range(rows)] == \
            [[float(r * cols + c) for c in range(cols)] for r in range(rows)]
    assert len(plan._verified) == 1 and plan._program.fast_nodes == 2  # Mul and Cast
    assert "axis=a2_axis" in plan._program.source  # Reshape runs its kernel, shape read per call


@pytest.mark.parametrize("op_type", ["Identity", "Reshape"])
def test_no_output_shares_memory_with_an_input_on_verified_calls(graph_builder, op_type):
    g = graph_builder()
    x = g.data("x", F32, [2, 3])
    inputs = [x] if op_type == "Identity" else [x, g.const("shape", torch.tensor([3, 2], dtype=I64))]
    shape = [2, 3] if op_type == "Identity" else [3, 2]
    (y,) = g.node("alias", op_type, inputs, [(F32, shape)])
    (z,) = g.node("z", "Relu", [x], [(F32, [2, 3])])
    plan = _verified(plan_module.compile_graph(g.output([y, z, y], [(F32, shape), (F32, [2, 3]), (F32, shape)])))
    for _ in range(3):
        x_value = torch.randn(2, 3)
        outputs = plan.run([x_value])
        storages = [t.untyped_storage().data_ptr() for t in outputs]
        assert x_value.untyped_storage().data_ptr() not in storages
        assert len(set(storages)) == 3
        assert torch.equal(outputs[0].reshape(2, 3), x_value) and torch.equal(outputs[2], outputs[0])


def test_gather_fast_call_keeps_the_kernels_refusal_and_negative_indices(graph_builder):
    g = graph_builder()
    x = g.data("x", F32, [5, 3])
    indices = g.data("indices", I64, [2, 2])
    (y,) = g.node("gather", "GatherV2", [x, indices, g.const("axis", torch.tensor([0], dtype=I64))],
                  [(F32, [2, 2, 3])], negative_index_support=True)
    plan = _verified(plan_module.compile_graph(g.output([y], [(F32, [2, 2, 3])])))
    table = torch.arange(15.0).reshape(5, 3)
    for rows in ([[0, 4], [1, 2]], [[3, 3], [0, 1]], [[-1, 0], [-5, 2]]):  # the last only on verified calls
        (got,) = plan.run([table, torch.tensor(rows)])
        assert got.tolist() == [[[float((r % 5) * 3 + c) for c in range(3)] for r in pair] for pair in rows]
    assert plan._program.fast_nodes == 1
    with pytest.raises(plan_module.GeExecutionError, match=r"GatherV2 \(node 'gather'\): index out of range"):
        plan.run([table, torch.tensor([[0, 5], [1, 2]])])


def test_index_and_slice_fast_calls_match_an_oracle_and_keep_the_refusal(graph_builder):
    g = graph_builder()
    x = g.data("x", F32, [4, 3])
    rows = g.data("rows", I64, [3])
    (picked,) = g.node("pick", "IndexByTensor", [x, rows], [(F32, [3, 3])], indices_mask=[1])
    g.graph.op[-1].input_desc[1].name = "indices0"  # the dynamic input's member, as TorchAir names it
    bounds = [g.const(name, torch.tensor([value], dtype=I64)) for name, value in
              (("begin", 1), ("end", 3), ("axes", 1), ("strides", 1))]
    (sliced,) = g.node("cut", "StridedSliceV2", [x, *bounds], [(F32, [4, 2])])
    plan = _verified(plan_module.compile_graph(g.output([picked, sliced], [(F32, [3, 3]), (F32, [4, 2])])))
    table = torch.arange(12.0).reshape(4, 3)
    for chosen in ([0, 1, 2], [3, 3, 0], [-1, 0, -4]):
        got, cut = plan.run([table, torch.tensor(chosen)])
        assert got.tolist() == [[float((r % 4) * 3 + c) for c in range(3)] for r in chosen]
        assert cut.tolist() == [[float(r * 3 + c) for c in (1, 2)] for r in range(4)]
    assert plan._program.fast_nodes == 2
    with pytest.raises(plan_module.GeExecutionError, match=r"IndexByTensor \(node 'pick'\): indices for dim 0 hold"):
        plan.run([table, torch.tensor([0, 4, 1])])


@pytest.mark.parametrize("name", ["bert_layer", "small_cnn"])
def test_the_examples_run_fast_calls_and_give_the_kernels_results(name, monkeypatch, recorded_plans):
    """Nearly every node of a transformer layer or a CNN has a fast call (a kernel change that makes its
    specialiser decline shows here), and the results equal those of the kernels, bit for bit."""
    import sys
    from pathlib import Path

    root = str(Path(__file__).resolve().parents[2])
    if root not in sys.path:
        sys.path.insert(0, root)
    example = __import__(f"examples.{name}", fromlist=["build"])
    model, _ = example.build()
    inputs = example.example_inputs(batch=2) if name == "small_cnn" else example.example_inputs(model, batch=2, seq=5)
    plans = recorded_plans
    results = {}
    for fast in (True, False):
        monkeypatch.setenv("OP_PLUGIN_NO_FAST_CALLS", "0" if fast else "1")
        torch._dynamo.reset()
        compiled = torch.compile(model, backend="npugraph", fullgraph=True)
        with torch.no_grad():
            results[fast] = [compiled(*[t.clone() for t in inputs]) for _ in range(3)]
        if fast:
            unfolded = sum(len(plan._unfolded_steps) for plan in plans)
            with_fast = sum(plan._program.fast_nodes for plan in plans)
            assert unfolded and with_fast >= 0.8 * unfolded, (with_fast, unfolded)
    for a, b in zip(results[True], results[False], strict=True):
        for x, y in zip(*(r if isinstance(r, tuple) else (r,) for r in (a, b)), strict=True):
            assert torch.equal(x, y)


def test_a_user_kernel_aliasing_an_input_through_its_own_storage_gets_a_fresh_output(graph_builder):
    """torch.from_numpy(x.numpy()) shares x's memory under a storage of its own, which a storage use
    count cannot see: a user's kernel's outputs are compared with every input's storage."""
    from op_plugin._simulator.interpreter.registry import register_ge_kernel

    handle = register_ge_kernel("TestNumpyAlias", lambda x: torch.from_numpy(x.numpy()))
    try:
        g = graph_builder()
        x = g.data("x", F32, [2, 3])
        (y,) = g.node("alias", "TestNumpyAlias", [x], [(F32, [2, 3])])
        plan = _verified(plan_module.compile_graph(g.output([y], [(F32, [2, 3])])))
        for _ in range(3):
            x_value = torch.randn(2, 3)
            (out,) = plan.run([x_value])
            assert out.data_ptr() != x_value.data_ptr() and torch.equal(out, x_value)
    finally:
        handle.destroy()

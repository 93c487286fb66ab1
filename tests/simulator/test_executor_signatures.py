"""Checks once per input signature, and nodes folded per signature: the fast path returns exactly
what the fully checked path returns, a wrong node is still caught on the first call of every new
signature, and graphs whose shapes may depend on data are checked on every call."""
import sys
from pathlib import Path

import pytest
import torch

from op_plugin._simulator.interpreter.executor import plan as plan_module
from op_plugin._simulator.interpreter.registry import register_ge_kernel

F32, I64 = torch.float32, torch.int64
ROOT = Path(__file__).resolve().parents[2]


def _example(name):
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    return __import__(f"examples.{name}", fromlist=["build"])


def _calls(example, model, sizes):
    out = []
    for batch, seq in sizes:
        kwargs = {"batch": batch} if example.__name__.endswith("small_cnn") else {"batch": batch, "seq": seq}
        inputs = example.example_inputs(**kwargs) if example.__name__.endswith("small_cnn") else \
            example.example_inputs(model, **kwargs)
        out.append(inputs)
    return out


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
@pytest.mark.parametrize("name", ["llama_block", "bert_layer", "small_cnn"])
def test_the_fast_path_is_bit_identical_to_checking_every_call(name, dynamic, monkeypatch, recorded_plans):
    """One compile, its plans run twice over the same calls: checking every node on every call, then
    per signature (the generated program on repeated signatures). Sharing the compiled graphs halves
    the test's compile time and compares the two paths on the very same GE graphs."""
    example = _example(name)
    model, _ = example.build()
    sizes = [(2, 5), (3, 7), (2, 5), (3, 7), (2, 5)] if dynamic else [(2, 5)] * 4
    calls = _calls(example, model, sizes)
    monkeypatch.delenv("OP_PLUGIN_CHECK_EVERY_CALL", raising=False)
    plans = recorded_plans
    torch._dynamo.reset()
    compiled = torch.compile(model, backend="npugraph", fullgraph=True, dynamic=dynamic)
    results, programs = {}, []
    for mode in ("every_call", "per_signature"):
        outputs = []
        with torch.no_grad():
            for inputs in calls:
                for plan in plans:  # a plan made by this call's compile starts in the mode of the pass
                    if mode == "every_call":
                        plan._verified = None
                    elif plan._verified is None and not plan._check_every_call():
                        plan._verified = __import__("collections").OrderedDict()
                outputs.append(compiled(*[t.clone() for t in inputs]))
        results[mode] = outputs
        programs = [plan._program for plan in plans]
    assert plans and any(program is not None for program in programs)  # the fast path ran
    for every, fast in zip(results["every_call"], results["per_signature"], strict=True):
        for a, b in zip(*(r if isinstance(r, tuple) else (r,) for r in (every, fast)), strict=True):
            assert torch.equal(a, b)


def _shape_graph(graph_builder):
    """y = x * 2 reshaped by a shape computed from x's own shape (Shape -> Pack: folded nodes)."""
    g = graph_builder()
    x = g.data("x", F32, [-1, 3])
    (shape,) = g.node("shape", "Shape", [x], [(torch.int32, [2])], dtype=3)
    two = g.const("two", torch.tensor([2.0]))
    (y,) = g.node("mul", "Mul", [x, two], [(F32, [-1, 3])])
    (y,) = g.node("reshape", "Reshape", [y, shape], [(F32, [-1, 3])])
    return g.output([y, shape], [(F32, [-1, 3]), (torch.int32, [2])])


def _with_fx(plan):
    """Give a hand-built plan what lowering gives a real one: an FX record, so checks may be skipped."""
    plan.fx = plan_module.FxShapes.__new__(plan_module.FxShapes)
    plan.fx.bindings, plan.fx._cache = [], {}
    plan._verified = None if plan._check_every_call() else __import__("collections").OrderedDict()
    return plan


def test_a_wrong_kernel_is_caught_on_the_first_call_of_each_new_signature(graph_builder):
    plan = _with_fx(plan_module.compile_graph(_shape_graph(graph_builder)))
    assert plan._verified is not None and any(step.folded for step in plan.steps)
    calls = []

    def wrong_for_4_rows(x1, x2):
        calls.append(x1.shape[0])
        out = x1 * x2
        return out[:, :2] if x1.shape[0] == 4 else out

    handle = register_ge_kernel("Mul", wrong_for_4_rows, replace=True)
    try:
        plan = _with_fx(plan_module.compile_graph(_shape_graph(graph_builder)))
        for _ in range(3):
            torch.testing.assert_close(plan.run([torch.ones(2, 3)])[0], torch.full((2, 3), 2.0))
        with pytest.raises(plan_module.GeExecutionError, match=r"node 'mul' \(Mul\) output 0: shape mismatch"):
            plan.run([torch.ones(4, 3)])
    finally:
        handle.destroy()
    assert calls == [2, 2, 2, 4]  # the fast path still runs the kernel every call


def test_folded_values_are_computed_once_per_signature_and_never_handed_out(graph_builder):
    plan = _with_fx(plan_module.compile_graph(_shape_graph(graph_builder)))
    shape_step = next(step for step in plan.steps if step.op.type == "Shape")
    assert shape_step.folded
    first = plan.run([torch.ones(2, 3)])
    first[1].mul_(0)  # the caller owns its outputs: the cached shape must not change
    for rows in (2, 5, 2):
        y, shape = plan.run([torch.ones(rows, 3)])
        assert shape.tolist() == [rows, 3] and y.shape == (rows, 3)
    assert len(plan._verified) == 2


def test_a_graph_with_no_kernel_step_runs_its_repeated_signatures(graph_builder):
    """Outputs that are inputs and constants (a backward graph whose gradients are all folded): the
    straight-line program of a repeated signature has no step to run (it once failed to compile)."""
    g = graph_builder()
    x = g.data("x", F32, [-1, 3])
    zero = g.const("zero", torch.zeros(3))
    plan = _with_fx(plan_module.compile_graph(g.output([x, zero], [(F32, [-1, 3]), (F32, [3])])))
    for rows in (2, 2, 2):
        y, z = plan.run([torch.ones(rows, 3)])
        assert torch.equal(y, torch.ones(rows, 3)) and torch.equal(z, torch.zeros(3))
    assert plan._program is not None  # the fast path ran


def test_graphs_without_an_fx_record_or_with_data_dependent_ops_check_every_call(graph_builder):
    plan = plan_module.compile_graph(_shape_graph(graph_builder))
    assert plan._verified is None  # hand-built: nothing says the shapes follow from the signature
    plan = plan_module.GraphPlan.__new__(plan_module.GraphPlan)  # a NonZero anywhere: shapes follow the data
    plan.steps = [type("S", (), {"op": type("O", (), {"type": "NonZero"})()})()]
    plan.fx = object()
    assert plan._check_every_call()


def test_reshape_returns_a_view_only_where_no_node_writes_into_an_input(graph_builder):
    def add_one_in_place(x):  # a ref op: writes into its input, as GE's in-place ops do
        x.add_(1)
        return x

    handle = register_ge_kernel("TestRefAddOne", add_one_in_place)
    try:
        for with_ref_op in (False, True):
            g = graph_builder()
            x = g.data("x", F32, [2, 3])
            shape = g.const("shape", torch.tensor([6], dtype=I64))
            (r,) = g.node("flat", "Reshape", [x, shape], [(F32, [6])])
            outputs, descs = [r], [(F32, [6])]
            if with_ref_op:
                (w,) = g.node("bump", "TestRefAddOne", [x], [(F32, [2, 3])])
                g.graph.op[-1].output_desc[0].name = "x0"  # the output is the input it writes: a ref op
                outputs, descs = [r, w], [(F32, [6]), (F32, [2, 3])]
            plan = plan_module.compile_graph(g.output(outputs, descs))
            assert plan._views_allowed is (not with_ref_op)
            x_value = torch.zeros(2, 3)
            got = plan.run([x_value])
            assert got[0].tolist() == [0.0] * 6  # the reshape saw x before the ref op wrote into it
    finally:
        handle.destroy()

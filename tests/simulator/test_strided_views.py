"""Transposes left as strided views (executor/strided.py): only where every reader is a built-in kernel that
declares the input `strided_inputs`; the results are the bits of eager's dense computation; a user's kernel,
a GEMM and a graph output still get dense tensors."""

import pytest
import torch

from op_plugin._simulator.interpreter.executor import plan as plan_module
from op_plugin._testing_harness import program_plan
from op_plugin._simulator.interpreter.executor import strided
from op_plugin._simulator.interpreter.registry import KernelEntry, register_ge_kernel

F32, I64 = torch.float32, torch.int64


def _transpose(g, name, x, perm, shape):
    (y,) = g.node(name, "Transpose", [x, g.const(f"{name}_perm", torch.tensor(perm, dtype=I64))], [(F32, shape)])
    return y


def _chain_graph(graph_builder):
    """t1 = x.permute(0, 2, 1, 3), read by a second Transpose and a Reshape only; both are graph outputs."""
    g = graph_builder()
    x = g.data("x", F32, [2, 3, 4, 5])
    t1 = _transpose(g, "t1", x, [0, 2, 1, 3], [2, 4, 3, 5])
    t2 = _transpose(g, "t2", t1, [0, 1, 3, 2], [2, 4, 5, 3])
    (r,) = g.node("r", "Reshape", [t1, g.const("shape", torch.tensor([2, 4, 15], dtype=I64))], [(F32, [2, 4, 15])])
    return g.output([t2, r], [(F32, [2, 4, 5, 3]), (F32, [2, 4, 15])])


def test_a_transpose_only_layout_kernels_read_is_a_view_and_the_outputs_are_eager_bits(graph_builder):
    plan = program_plan(_chain_graph(graph_builder))
    assert plan.strided_views == ("t1",)  # t2 and r are graph outputs: dense
    for _ in range(3):  # the checked first call, then the generated program
        x = torch.randn(2, 3, 4, 5)
        t2, r = plan.run([x])
        eager = x.permute(0, 2, 1, 3).contiguous()
        assert t2.is_contiguous() and r.is_contiguous()
        assert torch.equal(t2, eager.permute(0, 1, 3, 2).contiguous()) and torch.equal(r, eager.reshape(2, 4, 15))
        assert t2.untyped_storage().data_ptr() != x.untyped_storage().data_ptr()


def test_a_transpose_a_user_kernel_reads_stays_dense(graph_builder):
    seen = []

    def probe(x):
        seen.append(x.is_contiguous())
        return x * 2

    g = graph_builder()
    x = g.data("x", F32, [2, 3, 4])
    t1 = _transpose(g, "t1", x, [2, 0, 1], [4, 2, 3])
    t2 = _transpose(g, "t2", t1, [1, 2, 0], [2, 3, 4])  # a reader that would take a view
    (p,) = g.node("probe", "StridedProbeForTest", [t1], [(F32, [4, 2, 3])])
    graph = g.output([t2, p], [(F32, [2, 3, 4]), (F32, [4, 2, 3])])
    handle = register_ge_kernel("StridedProbeForTest", probe)
    try:
        plan = program_plan(graph)
        assert plan.strided_views == ()
        for _ in range(3):
            value = torch.randn(2, 3, 4)
            t2, p = plan.run([value])
            assert torch.equal(p, value.permute(2, 0, 1).contiguous() * 2) and torch.equal(t2, value)
    finally:
        handle.destroy()
    assert seen == [True, True, True]


def test_a_transpose_that_is_a_graph_output_is_dense(graph_builder):
    g = graph_builder()
    x = g.data("x", F32, [3, 5])
    t1 = _transpose(g, "t1", x, [1, 0], [5, 3])
    t2 = _transpose(g, "t2", t1, [1, 0], [3, 5])
    plan = program_plan(g.output([t1, t2], [(F32, [5, 3]), (F32, [3, 5])]))
    assert plan.strided_views == ()
    for _ in range(2):
        value = torch.randn(3, 5)
        t1, t2 = plan.run([value])
        assert t1.is_contiguous() and torch.equal(t1, value.t().contiguous()) and torch.equal(t2, value)


def test_a_transpose_a_matmul_reads_stays_a_copy(graph_builder):
    """MKL sums a transposed operand in another order for some shapes (docs/performance-notes.md): a GEMM
    is not declared, so the weight is copied and the product is the one on the dense copy."""
    g = graph_builder()
    x = g.data("x", F32, [5, 3])
    w = g.data("w", F32, [7, 3])
    wt = _transpose(g, "wt", w, [1, 0], [3, 7])
    (mm,) = g.node("mm", "MatMulV2", [x, wt, "", ""], [(F32, [5, 7])], transpose_x1=False, transpose_x2=False)
    plan = program_plan(g.output([mm], [(F32, [5, 7])]))
    assert plan.strided_views == ()
    for _ in range(2):
        a, b = torch.randn(5, 3), torch.randn(7, 3)
        assert torch.equal(plan.run([a, b])[0], torch.matmul(a, b.t().contiguous()))


def test_no_views_where_a_node_writes_into_an_input(graph_builder):
    """A ref op writing a graph input could change what a view of it reads later: no views at all."""
    g = graph_builder()
    x = g.data("x", F32, [2, 3])
    t1 = _transpose(g, "t1", x, [1, 0], [3, 2])
    t2 = _transpose(g, "t2", t1, [1, 0], [2, 3])
    (written,) = g.node("assign", "Assign", [x, t2], [(F32, [2, 3])])
    graph = g.output([written], [(F32, [2, 3])])
    assign = next(op for op in graph.op if op.name == "assign")
    assign.input_desc[0].name, assign.input_desc[1].name, assign.output_desc[0].name = "ref", "value", "ref"
    plan = program_plan(graph)
    assert not plan._views_allowed and plan.strided_views == ()


def test_a_built_in_kernel_breaking_its_declaration_is_named(graph_builder, monkeypatch):
    """A kernel declaring strided_inputs must return dense outputs for a strided input: checked on a
    signature's first call, naming the node."""
    def strides_kept(x):
        return torch.abs(x)  # an elementwise result keeps x's strides

    declared = KernelEntry("Abs", strides_kept, builtin=True, strided_inputs=("x",))
    lookup = plan_module.lookup_kernel
    monkeypatch.setattr(plan_module, "lookup_kernel", lambda op_type: declared if op_type == "Abs" else lookup(op_type))
    g = graph_builder()
    x = g.data("x", F32, [3, 5])
    t1 = _transpose(g, "t1", x, [1, 0], [5, 3])
    (y,) = g.node("abs", "Abs", [t1], [(F32, [5, 3])])
    plan = program_plan(g.output([y], [(F32, [5, 3])]))
    assert plan.strided_views == ("t1",)
    with pytest.raises(plan_module.GeExecutionError, match=r"node 'abs' \(Abs\) output 0: .*declares strided_inputs"):
        plan.run([torch.randn(3, 5)])


def test_declared_inputs_map_to_the_node_inputs_by_prototype_name(graph_builder):
    g = graph_builder()
    x = g.data("x", F32, [3, 5])
    t1 = _transpose(g, "t1", x, [1, 0], [5, 3])
    plan = program_plan(g.output([t1], [(F32, [5, 3])]))
    step = next(step for step in plan.steps if step.op.name == "t1")
    assert step.strided_args == frozenset({0})  # x, not perm
    assert strided.choose_views([step], views_allowed=False) == []


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
def test_a_compiled_bert_layer_gives_the_bits_of_the_denseprogram_plan(dynamic, monkeypatch, recorded_plans):
    """The BERT-layer example (its key transposed twice: a view) compiled with every Transpose copying, as
    before, and then with the views: the same bytes, call by call."""
    import sys
    from pathlib import Path

    root = str(Path(__file__).resolve().parents[2])
    if root not in sys.path:
        sys.path.insert(0, root)
    example = __import__("examples.bert_layer", fromlist=["build"])
    model, _ = example.build()
    calls = [example.example_inputs(model, batch=2, seq=seq) for seq in ((5, 7, 5) if dynamic else (5, 5, 5))]
    choose_views = strided.choose_views
    results = {}
    for mode in ("dense", "views"):
        monkeypatch.setattr(strided, "choose_views", (lambda steps, allowed: []) if mode == "dense" else choose_views)
        recorded_plans.clear()
        torch._dynamo.reset()
        compiled = torch.compile(model, backend="npugraph", fullgraph=True, dynamic=dynamic)
        with torch.no_grad():
            results[mode] = [compiled(*[t.clone() for t in inputs]) for inputs in calls]
        assert any(plan.strided_views for plan in recorded_plans) == (mode == "views")
    for with_views, dense in zip(results["views"], results["dense"], strict=True):
        for a, b in zip(*(r if isinstance(r, tuple) else (r,) for r in (with_views, dense)), strict=True):
            assert a.is_contiguous() and torch.equal(a, b)


def test_every_strided_view_form_takes_its_kernel_s_inputs_and_attrs():
    from op_plugin._simulator.interpreter.binding import kernel_signature
    from op_plugin._simulator.interpreter.kernels import builtin_entries  # importing it registers every kernel

    with_views = {op_type: entry for op_type, entry in builtin_entries().items() if entry.strided_view is not None}
    assert {"Transpose", "TransposeD"} <= set(with_views)
    for entry in with_views.values():
        assert kernel_signature(entry.strided_view) == kernel_signature(entry.fn)
        assert set(entry.strided_inputs) <= set(kernel_signature(entry.fn).inputs)


def test_an_observer_sees_a_viewed_transpose_dense(graph_builder):
    """Per-node tools (data dump, compare) see every node's output as GE would hand it: dense."""
    plan = program_plan(_chain_graph(graph_builder))
    seen = {}
    with plan_module.observing(lambda plan, op, outputs: seen.update({op.name: outputs[0]})):
        x = torch.randn(2, 3, 4, 5)
        plan.run([x])
    assert seen["t1"].is_contiguous() and torch.equal(seen["t1"], x.permute(0, 2, 1, 3).contiguous())

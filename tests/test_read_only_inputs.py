"""Read-only inputs stay read-only: a reference kernel that writes an input its schema declares read-only
(`w.add_(1)` on `Tensor w`) made compiled results drift call after call (eager [2,2,2], compiled [2,3,4]):
the plan's in-graph constant was written. Now graph mode refuses the write, naming the op, the node and the
argument, and the plan's constants are never left written; eagerly, `op-plugin test` (torch's opcheck,
test_schema) reports it."""
from __future__ import annotations

import collections
import re
import textwrap

import pytest
import torch

import op_plugin
from op_plugin import _registry
from op_plugin._registry.load import parse_yaml, unload
from op_plugin._simulator import GeExecutionError
from op_plugin._simulator.interpreter.executor import plan as plan_module
from op_plugin._simulator.interpreter.registry import register_ge_kernel
from op_plugin._testing_harness import GraphBuilder

F32 = torch.float32

BUMP_YAML = """
    ops:
      - func: npu_user_bump(Tensor x, Tensor w) -> Tensor
        outputs: [{size: x.shape, dtype: x}]
        dtypes: [float32]
        ge: {type: NpuUserBump}
        samples: [{x: [float32, [3]], w: [float32, [3]]}]
"""

BUMP_KERNELS = """
    import op_plugin

    @op_plugin.reference("npu_user_bump")
    def bump(x, w):
        w.add_(1)  # a write into an input the schema declares read-only
        return x * w
"""


@pytest.fixture
def bump_op(tmp_path):
    path = tmp_path / "bump_ops.yaml"
    path.write_text(textwrap.dedent(BUMP_YAML))
    kernels = tmp_path / "bump_kernels.py"
    kernels.write_text(textwrap.dedent(BUMP_KERNELS))
    yield path, kernels
    for spec in parse_yaml(path):
        if _registry.find(spec.qualname) and _registry.find(spec.qualname).spec:
            unload(spec.qualname)
        for piece in _registry.Piece:
            _registry.detach(spec.qualname, piece)


def test_a_reference_kernel_writing_a_read_only_argument_is_refused_in_graph_mode(bump_op):
    path, kernels = bump_op
    op_plugin.load_yaml(path)
    from op_plugin._tools.user_tests.runner import import_user_module

    import_user_module(str(kernels))

    def fn(x):
        w = torch.ones(3)  # an in-graph constant: GE keeps it between calls
        return torch.ops.npu.npu_user_bump(x, w)

    compiled = torch.compile(fn, backend="npugraph", fullgraph=True)
    assert fn(torch.ones(3)).tolist() == [2.0, 2.0, 2.0]  # eager: a new w on every call
    for _ in range(3):  # was [2, 2, 2], [3, 3, 3], [4, 4, 4]
        with pytest.raises(GeExecutionError) as raised:
            compiled(torch.ones(3))
        message = str(raised.value)
        assert ("node 'NpuUserBump' (NpuUserBump): the reference kernel of npu::npu_user_bump wrote into argument "
                "'w', which the schema declares read-only") in message, message


def test_op_plugin_test_reports_the_write_eagerly_and_in_graph_mode(bump_op):
    """torch's opcheck (test_schema) names the argument eagerly; the npugraph check names op and argument."""
    path, kernels = bump_op
    from op_plugin._tools.user_tests.runner import run_yaml_checks

    outcomes = {o.check: o for o in run_yaml_checks(path, [str(kernels)], ["opcheck", "npugraph"])}
    assert outcomes["opcheck"].failed
    assert "test_schema failed: RuntimeError: Argument w is not defined as mutable but was mutated" in \
        outcomes["opcheck"].detail
    assert outcomes["npugraph"].failed
    assert "reference kernel of npu::npu_user_bump wrote into argument 'w'" in outcomes["npugraph"].detail


# ---- the executor: a kernel writing a value the plan keeps ----------------------------------------------------

def _with_program(plan):
    plan.fx = plan_module.FxShapes.__new__(plan_module.FxShapes)
    plan.fx.bindings, plan.fx._cache = [], {}
    plan._verified = collections.OrderedDict()
    return plan


def _graph(graph_builder, folded: bool):
    """y = TestWrites(x, w): w a Const, or (folded) Const + Const, a value the plan computes once per signature."""
    g = graph_builder()
    x = g.data("x", F32, [3])
    w = g.const("w", torch.full((3,), 2.0))
    if folded:
        (w,) = g.node("w_plus", "Add", [w, g.const("one", torch.ones(3))], [(F32, [3])])
    (y,) = g.node("writer", "TestWrites", [x, w], [(F32, [3])])
    return g.output([y], [(F32, [3])])


@pytest.fixture
def graph_builder(torchair):
    from torchair._ge_concrete_graph import ge_ir_pb2

    return lambda name="hand_built": GraphBuilder(ge_ir_pb2, name)


@pytest.fixture
def torchair():
    return op_plugin.load_torchair()


def _writing_kernel(writes: list):
    """x * w, writing into w while `writes` is not empty."""
    def kernel(x, w):
        if writes:
            w.mul_(100)
        return x * w

    return kernel


@pytest.mark.parametrize("folded", [False, True], ids=["const", "folded"])
@pytest.mark.parametrize("calls_before", [0, 2], ids=["first-call", "program"])
def test_a_kernel_writing_a_kept_value_is_refused_and_the_value_restored(graph_builder, folded, calls_before):
    """A user's GE kernel that writes its Const (or folded) input on some call: that call fails naming the node,
    the input and where the value comes from, whether it is the signature's first, checked call or a later one
    (the generated program); later calls see the constant's own value again."""
    writes = []
    handle = register_ge_kernel("TestWrites", _writing_kernel(writes))
    try:
        plan = _with_program(plan_module.compile_graph(_graph(graph_builder, folded)))
        want = [2.0, 4.0, 6.0] if not folded else [3.0, 6.0, 9.0]
        x = torch.tensor([1.0, 2.0, 3.0])
        for _ in range(calls_before):
            assert plan.run([x])[0].tolist() == want
        writes.append(True)
        source = "the value of Const node 'w'" if not folded else "the output of node 'w_plus' (Add)"
        with pytest.raises(GeExecutionError, match=rf"node 'writer' \(TestWrites\) wrote into its input 1 \('x1'\), "
                                                   rf"{re.escape(source)}.*constants are restored"):
            plan.run([x])
        writes.clear()
        for _ in range(3):
            assert plan.run([x])[0].tolist() == want
    finally:
        handle.destroy()


def test_a_kernel_raising_after_writing_a_kept_value_keeps_its_error(graph_builder):
    def kernel(x, w):
        w.zero_()
        raise ValueError("the kernel's own error")

    handle = register_ge_kernel("TestWrites", kernel)
    try:
        plan = _with_program(plan_module.compile_graph(_graph(graph_builder, False)))
        with pytest.raises(GeExecutionError, match="the kernel's own error"):
            plan.run([torch.ones(3)])
        assert plan._template[next(slot for step in plan.steps if step.op.name == "w"
                                   for _, slot in step.out_slots)].tolist() == [2.0, 2.0, 2.0]
    finally:
        handle.destroy()


@pytest.mark.parametrize("folded", [False, True], ids=["const", "folded"])
def test_under_inference_mode_too(graph_builder, folded):
    """Plans built and run under torch.inference_mode keep their constants with version counters (an inference
    tensor has none), so the check works, and a graph whose kernels write nothing runs as before."""
    writes = []
    handle = register_ge_kernel("TestWrites", _writing_kernel(writes))
    try:
        with torch.inference_mode():
            plan = _with_program(plan_module.compile_graph(_graph(graph_builder, folded)))
            x = torch.tensor([1.0, 2.0, 3.0])
            want = plan.run([x])[0].tolist()
            assert plan.run([x])[0].tolist() == want
            writes.append(True)
            with pytest.raises(GeExecutionError, match="wrote into its input 1"):
                plan.run([x])
            writes.clear()
            assert plan.run([x])[0].tolist() == want
    finally:
        handle.destroy()
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.LayerNorm(4))
    compiled = torch.compile(lambda x: model(x) + torch.ones(4) * 2, backend="npugraph")
    with torch.inference_mode():
        x = torch.randn(2, 4)
        for _ in range(2):
            torch.testing.assert_close(compiled(x), model(x) + 2, atol=1e-5, rtol=1e-5)

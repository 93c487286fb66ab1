"""Prepared kernels (interpreter/prepared.py) and direct calls (interpreter/calls.py).

A kernel's prepare phase runs once per input signature; what it returns runs on every call, so a check
that depends on values must be in that call. The oracle here is eager PyTorch and the kernels' own
refusals on a first call, against later calls of the same signature.
"""
from __future__ import annotations

import re

import pytest
import torch

from op_plugin._simulator.interpreter.calls import ge_op
from op_plugin._simulator.interpreter.errors import GeExecutionError, KernelError
from op_plugin._simulator.interpreter.prepared import InputSpec, prepared_kernel, spec_of
from op_plugin._simulator.interpreter.registry import register_ge_kernel

FP8 = torch.float8_e4m3fn


@pytest.fixture
def per_signature(monkeypatch):
    """Plans run their generated program from a signature's second call on (the default)."""
    monkeypatch.delenv("OP_PLUGIN_CHECK_EVERY_CALL", raising=False)
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def test_a_value_check_runs_on_every_call_of_a_signature(per_signature, recorded_plans):
    """The removed fast calls let an out-of-range fp8 cast through on a signature's later calls
    (saturated silently); the Cast kernel's range check is in its call, which every call runs."""
    compiled = torch.compile(lambda x: (x * 2).to(FP8), backend="npugraph", fullgraph=True)
    assert torch.equal(compiled(torch.ones(4)).float(), torch.full((4,), 2.0))
    assert torch.equal(compiled(torch.ones(4)).float(), torch.full((4,), 2.0))  # the program's path
    assert any(plan._program is not None for plan in recorded_plans)
    with pytest.raises(GeExecutionError, match=r"Cast \(node .*beyond 448"):
        compiled(torch.full((4,), 1000.0))


def test_an_index_range_check_runs_on_every_call_of_a_signature(per_signature):
    compiled = torch.compile(lambda x, i: torch.index_select(x, 0, i) + 1, backend="npugraph", fullgraph=True)
    x = torch.randn(5, 3)
    for index in ([0, 4, 2], [1, 1, 3]):  # the first checks every node, the second runs the program
        i = torch.tensor(index)
        assert torch.equal(compiled(x, i), torch.index_select(x, 0, i) + 1)
    with pytest.raises(GeExecutionError, match="index out of range"):
        compiled(x, torch.tensor([0, 9, 1]))


def test_the_program_holds_only_generated_names(per_signature, recorded_plans):
    """No text of the graph (node names, attr names, a user's YAML) is written into generated source."""
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.LayerNorm(8), torch.nn.GELU())
    compiled = torch.compile(model, backend="npugraph", fullgraph=True)
    x = torch.randn(2, 8)
    with torch.no_grad():
        compiled(x)
        got = compiled(x)
        want = model(x)
    torch.testing.assert_close(got, want)
    sources = [plan._program.source for plan in recorded_plans if plan._program is not None]
    assert sources
    for source in sources:
        body = source.split("\n", 1)[1]
        assert re.fullmatch(r"[\s\w=\[\](),:.\-]*", body), body
        words = set(re.findall(r"[A-Za-z_]\w*", body))
        generated = {w for w in words if re.fullmatch(r"[vckws]\d+|n|r|inputs|None|try|except|raise|from|as|error"
                                                     r"|return|pass|if|else|is|not|_\w+|Exception", w)}
        assert words == generated, words - generated


def _counting_kernel(calls: list):
    def prepare(x, axes, *, keep_dims):
        calls.append((x, axes))
        dims = [int(v) for v in axes.value.tolist()] if axes.value is not None else None
        return lambda x, axes: x.sum(dims if dims is not None else axes.tolist(), keepdim=keep_dims)

    return prepared_kernel(prepare)


def test_prepare_runs_once_per_signature_and_sees_only_fixed_values(per_signature, recorded_plans):
    from op_plugin._simulator.interpreter.kernels.reduce import reduction

    calls = []
    handle = register_ge_kernel("ReduceSum", _counting_kernel(calls), replace=True)
    try:
        compiled = torch.compile(lambda x: x.sum(1) * 3, backend="npugraph", fullgraph=True)
        for _ in range(3):
            assert torch.equal(compiled(torch.ones(2, 5)), torch.full((2,), 15.0))
        compiled(torch.ones(3, 5))  # a new signature: prepared again
    finally:
        handle.destroy()
    assert reduction is not None
    assert len(calls) == 2
    x_spec, axes_spec = calls[0]
    assert isinstance(x_spec, InputSpec) and x_spec.value is None and list(x_spec.shape) == [2, 5]
    assert axes_spec.value is not None and axes_spec.value.tolist() == [1]  # TorchAir's Const axes


def test_spec_of_gives_values_only_when_fixed():
    x = torch.arange(3)
    assert spec_of(x, False).value is None and spec_of(x, True).value is x
    assert [s.value for s in spec_of([x, x], True)] == [x, x]
    assert spec_of(None, True) is None and spec_of(2.5, False) == 2.5
    assert repr(spec_of(torch.zeros(2, 3, dtype=torch.float16), False)) == "InputSpec(float16, [2, 3])"


def test_ge_op_runs_a_kernel_as_a_node_does():
    from op_plugin._testing_harness import run_node

    x = torch.randn(4, 6, dtype=torch.float16)
    gamma = torch.randn(6, dtype=torch.float16)
    direct = ge_op("RmsNorm")(x, gamma)  # epsilon from CANN's prototype; 16-bit computed in float32
    node = run_node("RmsNorm", [x, gamma])
    assert all(torch.equal(a, b) for a, b in zip(direct, node, strict=True))
    assert torch.equal(ge_op("Cast")(x, dst_type=0), x.float())  # DT_FLOAT


def test_ge_op_refuses_what_a_node_refuses():
    with pytest.raises(KernelError, match="one dtype"):
        ge_op("Add")(torch.ones(2), torch.ones(2, dtype=torch.float64))
    with pytest.raises(KernelError, match="beyond 448"):
        ge_op("Cast")(torch.tensor([1e4]), dst_type=36)  # DT_FLOAT8_E4M3FN
    with pytest.raises(TypeError, match="no attr 'epsilom'"):
        ge_op("RmsNorm")(torch.ones(2, 2), torch.ones(2), epsilom=1e-6)
    with pytest.raises(GeExecutionError, match="NoSuchOp"):
        ge_op("NoSuchOp")

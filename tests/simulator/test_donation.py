"""Element-wise results written into a dead operand's buffer (executor/donation.py), and a product with a fixed
one passed on as its operand (kernels/math/arithmetic.py): the same bits as allocating every output, never a
write into a value anything else still reads (a graph input, a Const, a view's base, a graph output)."""

import pytest
import torch

from op_plugin._simulator.interpreter.executor import donation
from op_plugin._testing_harness import program_plan
from op_plugin._simulator.interpreter.kernels.math.arithmetic import _prepare_mul
from op_plugin._simulator.interpreter.prepared import InputSpec

F32, I64 = torch.float32, torch.int64


def _donated(plan) -> list:
    """The node names whose program call writes into an operand, for the latest verified signature."""
    verified = next(reversed(plan._verified.values()))
    calls = verified.program.__globals__
    return [step.op.name for position, step in enumerate(plan.unfolded_steps)
            if hasattr(calls.get(f"k{position}"), "donates")]


def _matmul(g, name, x, w, shape):
    (y,) = g.node(name, "MatMulV2", [x, w], [(F32, shape)], transpose_x1=False, transpose_x2=False, offset_x=0)
    return y


def _binary(g, name, op_type, x1, x2, shape):
    (y,) = g.node(name, op_type, [x1, x2], [(F32, shape)])
    return y


def _linear_graph(graph_builder):
    """TorchAir's float32 addmm: MatMulV2, Mul by alpha (a Const one), Add of the bias; then a residual Add."""
    g = graph_builder()
    x, w, b = g.data("x", F32, [4, 8]), g.data("w", F32, [8, 8]), g.data("b", F32, [8])
    mm = _matmul(g, "mm", x, w, [4, 8])
    scaled = _binary(g, "alpha", "Mul", mm, g.const("one", torch.tensor(1.0)), [4, 8])
    biased = _binary(g, "bias", "Add", scaled, b, [4, 8])
    out = _binary(g, "residual", "Add", biased, x, [4, 8])
    return g.output([out], [(F32, [4, 8])])


def _eager_linear(x, w, b):
    return ((x @ w) * 1.0 + b) + x


def test_a_linear_writes_into_its_product_and_gives_eager_bits(graph_builder):
    plan = program_plan(_linear_graph(graph_builder))
    for _ in range(3):  # the checked first call, then the generated program
        x, w, b = torch.randn(4, 8), torch.randn(8, 8), torch.randn(8)
        kept = [t.clone() for t in (x, w, b)]
        (out,) = plan.run([x, w, b])
        assert torch.equal(out, _eager_linear(*kept))
        assert all(torch.equal(t, k) for t, k in zip((x, w, b), kept, strict=True))  # no graph input written
        assert out.untyped_storage().data_ptr() not in {t.untyped_storage().data_ptr() for t in (x, w, b)}
    assert _donated(plan) == ["bias", "residual"]


def test_operands_autograd_records_are_not_written_into(graph_builder):
    """With grad mode on and an input that requires grad, the calls allocate (an out= call cannot be recorded) and
    the results carry autograd's history as before; under no_grad a parameter-like input does not stop donation."""
    plan = program_plan(_linear_graph(graph_builder))
    for _ in range(3):
        x, w, b = torch.randn(4, 8, requires_grad=True), torch.randn(8, 8), torch.randn(8, requires_grad=True)
        (out,) = plan.run([x, w, b])
        assert out.requires_grad and torch.equal(out.detach(), _eager_linear(x.detach(), w, b.detach()))
        out.sum().backward()
        assert torch.equal(b.grad, torch.full((8,), 4.0))
    with torch.no_grad():
        (out,) = plan.run([x, w, b])
    assert torch.equal(out, _eager_linear(x.detach(), w, b.detach()))
    assert _donated(plan) == ["bias", "residual"]


def test_without_donation_the_program_allocates_and_gives_the_same_bits(graph_builder, monkeypatch):
    inputs = [torch.randn(4, 8), torch.randn(8, 8), torch.randn(8)]
    donating = program_plan(_linear_graph(graph_builder))
    results = [donating.run(inputs)[0] for _ in range(3)]
    monkeypatch.setattr(donation, "choose", lambda *args: {})
    allocating = program_plan(_linear_graph(graph_builder))
    for result in results:
        assert torch.equal(result, allocating.run(inputs)[0])
    assert _donated(allocating) == []


def test_a_product_another_kernel_may_view_is_never_written(graph_builder):
    """mm is read by a Reshape (a view of it under views) that is a graph output, and by an Add: the Add
    allocates, and the view keeps mm's values."""
    g = graph_builder()
    x, w = g.data("x", F32, [4, 8]), g.data("w", F32, [8, 8])
    mm = _matmul(g, "mm", x, w, [4, 8])
    (flat,) = g.node("flat", "Reshape", [mm, g.const("shape", torch.tensor([32], dtype=I64))], [(F32, [32])])
    plus = _binary(g, "plus", "Add", mm, g.const("two", torch.tensor(2.0)), [4, 8])
    plan = program_plan(g.output([flat, plus], [(F32, [32]), (F32, [4, 8])]))
    for _ in range(3):
        x, w = torch.randn(4, 8), torch.randn(8, 8)
        flat, plus = plan.run([x, w])
        assert torch.equal(flat, (x @ w).reshape(32)) and torch.equal(plus, x @ w + 2.0)
    assert _donated(plan) == []


def test_graph_inputs_consts_and_graph_outputs_are_never_written(graph_builder):
    """Add(x, c) reads a graph input and a Const; Add(mm, 1) reads a product the graph also returns."""
    g = graph_builder()
    x, w = g.data("x", F32, [4, 8]), g.data("w", F32, [8, 8])
    c = g.const("c", torch.full((4, 8), 3.0))
    shifted = _binary(g, "shifted", "Add", x, c, [4, 8])
    mm = _matmul(g, "mm", shifted, w, [4, 8])
    plus = _binary(g, "plus", "Add", mm, g.const("one", torch.tensor(1.0)), [4, 8])
    plan = program_plan(g.output([mm, plus], [(F32, [4, 8]), (F32, [4, 8])]))
    for _ in range(3):
        x, w = torch.randn(4, 8), torch.randn(8, 8)
        kept = x.clone()
        mm, plus = plan.run([x, w])
        assert torch.equal(x, kept)
        assert torch.equal(mm, (kept + 3.0) @ w) and torch.equal(plus, mm + 1.0)
    assert _donated(plan) == []
    (const,) = [step.const for step in plan.steps if step.op.name == "c"]
    assert torch.equal(const, torch.full((4, 8), 3.0))


def test_an_operand_read_again_later_is_not_written(graph_builder):
    g = graph_builder()
    x, w = g.data("x", F32, [4, 8]), g.data("w", F32, [8, 8])
    mm = _matmul(g, "mm", x, w, [4, 8])
    first = _binary(g, "first", "Mul", mm, g.const("three", torch.tensor(3.0)), [4, 8])
    second = _binary(g, "second", "Sub", first, mm, [4, 8])  # mm's last reader: writes into mm, not first
    plan = program_plan(g.output([second, first], [(F32, [4, 8]), (F32, [4, 8])]))
    for _ in range(3):
        x, w = torch.randn(4, 8), torch.randn(8, 8)
        second, first = plan.run([x, w])
        product = x @ w
        assert torch.equal(first, product * 3.0) and torch.equal(second, product * 3.0 - product)
    assert _donated(plan) == ["second"]


def test_a_broadcast_operand_is_not_written_and_a_strided_one_allocates():
    assert donation.candidates(torch.add, [torch.ones(8), torch.ones(4, 8)], [torch.ones(4, 8)]) == (1,)
    assert donation.candidates(torch.add, [torch.ones(4, 8), torch.ones(4, 8, dtype=torch.float64)],
                               [torch.ones(4, 8, dtype=torch.float64)]) == (1,)
    assert donation.candidates(lambda a, b: a + b, [torch.ones(2), torch.ones(2)], [torch.ones(2)]) == ()
    into_x1, into_x2 = donation.donating_call(torch.add, 0), donation.donating_call(torch.sub, 1)
    dense, strided = torch.randn(4, 8), torch.randn(8, 4).t()
    before = strided.clone()
    result = into_x1(strided, dense)
    assert torch.equal(strided, before) and torch.equal(result, before + dense)
    expected = dense + before
    result = into_x1(dense, before.contiguous())
    assert result.data_ptr() == dense.data_ptr() and torch.equal(result, expected)
    other = torch.randn(4, 8)
    expected = other - dense
    result = into_x2(other, dense)
    assert result.data_ptr() == dense.data_ptr() and torch.equal(result, expected)


_BITS = {torch.float32: torch.int32, torch.float16: torch.int16, torch.bfloat16: torch.int16,
         torch.float64: torch.int64, torch.int32: torch.int32}


def _mul_call(x, other):
    return _prepare_mul(x, other)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int32])
def test_a_product_with_a_fixed_one_is_its_operand_bit_for_bit(dtype):
    if dtype.is_floating_point:
        x = torch.tensor([1.5, -0.0, 0.0, float("inf"), -float("inf"), float("nan"), 3e-8, -7.25, 1e-40, -1e-310],
                         dtype=dtype)  # and denormals (float32's, float64's)
    else:
        x = torch.tensor([0, -1, 2**31 - 1, -2**31, 7], dtype=dtype)
    one = torch.tensor(1, dtype=dtype)
    for position, specs in enumerate(((InputSpec(dtype, x.shape), InputSpec(dtype, one.shape, one)),
                                      (InputSpec(dtype, one.shape, one), InputSpec(dtype, x.shape)))):
        call = _mul_call(*specs)
        assert call.identity_of == position
        args = (x, one) if position == 0 else (one, x)
        expected = torch.mul(*args)
        assert torch.equal(call(*args).view(_BITS[dtype]), expected.view(_BITS[dtype]))


def test_a_float_product_with_one_multiplies_while_denormals_are_flushed():
    one = torch.tensor(1.0)
    specs = (InputSpec(F32, torch.Size([3])), InputSpec(F32, one.shape, one))
    torch.set_flush_denormal(True)
    try:
        call = _mul_call(*specs)
        x = torch.tensor([1e-40, 1.0, -2.0])
        assert call is torch.mul and torch.equal(call(x, one), torch.tensor([0.0, 1.0, -2.0]))
    finally:
        torch.set_flush_denormal(False)
    assert _mul_call(*specs).identity_of == 0
    int_one = torch.tensor(1)
    torch.set_flush_denormal(True)
    try:  # integers have no denormals
        assert _mul_call(InputSpec(I64, torch.Size([3])), InputSpec(I64, int_one.shape, int_one)).identity_of == 0
    finally:
        torch.set_flush_denormal(False)


def test_a_product_with_one_that_broadcasts_or_is_complex_or_not_fixed_multiplies():
    one = torch.tensor([1.0])
    assert _mul_call(InputSpec(F32, torch.Size([])), InputSpec(F32, one.shape, one)) is torch.mul  # [] * [1] is [1]
    assert _mul_call(InputSpec(F32, torch.Size([3])), InputSpec(F32, one.shape)) is torch.mul  # not fixed
    two = torch.tensor(2.0)
    assert _mul_call(InputSpec(F32, torch.Size([3])), InputSpec(F32, two.shape, two)) is torch.mul
    c_one = torch.tensor(1 + 0j, dtype=torch.complex64)
    assert _mul_call(InputSpec(torch.complex64, torch.Size([3])),
                     InputSpec(torch.complex64, c_one.shape, c_one)) is torch.mul


def test_a_graph_input_passed_on_by_a_product_with_one_is_never_written(graph_builder):
    g = graph_builder()
    x, b = g.data("x", F32, [4, 8]), g.data("b", F32, [8])
    same = _binary(g, "same", "Mul", x, g.const("one", torch.tensor(1.0)), [4, 8])
    plus = _binary(g, "plus", "Add", same, b, [4, 8])
    plan = program_plan(g.output([plus], [(F32, [4, 8])]))
    for _ in range(3):
        x, b = torch.randn(4, 8), torch.randn(8)
        kept = x.clone()
        (plus,) = plan.run([x, b])
        assert torch.equal(x, kept) and torch.equal(plus, kept + b)
    assert _donated(plan) == []

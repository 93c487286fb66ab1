"""Tests of kernels/math/unary.py: the unary math ops, Erfinv, Log, Exp, NanToNum, Cast.
"""

import math
import pytest
import torch

from op_plugin._testing_harness import check_compiled, run_node

from tests.simulator.kernels.helpers import F32, I32


def test_compiled_log10_is_not_ln():
    """The silent bug this family once had: Log's base attr ignored, log10 computed as ln."""
    x = torch.tensor([10.0, 100.0, 1000.0])
    got = check_compiled(torch.log10, (x,), kind="torchair").got
    torch.testing.assert_close(got, torch.tensor([1.0, 2.0, 3.0]))


# ---- hand-built graphs: attribute values TorchAir never sets ------------------------------------

def test_log_scale_shift_and_base():
    x = torch.tensor([0.5, 1.0, 4.0])
    (got,) = run_node("Log", [x], [(F32, [3])], base=3.0, scale=2.0, shift=1.0)
    torch.testing.assert_close(got, torch.log(1.0 + 2.0 * x) / math.log(3.0))


def test_exp_scale_shift_and_base():
    x = torch.tensor([-1.0, 0.0, 2.0])
    (got,) = run_node("Exp", [x], [(F32, [3])], base=2.0, scale=0.5, shift=1.0)
    torch.testing.assert_close(got, torch.pow(2.0, 1.0 + 0.5 * x))


@pytest.mark.parametrize("op_type", ["Log", "Exp"])
@pytest.mark.parametrize("base", [0.0, -2.0])
def test_log_exp_refuse_a_base_that_is_neither_natural_nor_positive(op_type, base):
    with pytest.raises(Exception, match=rf"{op_type} \(node 'op'\): base must be"):
        run_node(op_type, [torch.rand(3)], [(F32, [3])], base=base)


def test_exp_int_input_gives_float32():
    (got,) = run_node("Exp", [torch.tensor([0, 1, 2], dtype=I32)], [(F32, [3])])
    torch.testing.assert_close(got, torch.exp(torch.tensor([0.0, 1.0, 2.0])))


def test_nan_to_num_requires_its_attrs():
    """nan, posinf and neginf are REQUIRED_ATTRs in CANN's prototype: the node is refused when it is bound."""
    with pytest.raises(Exception,
                       match=r"node 'op' \(NanToNum\) has no attr 'posinf', which CANN's prototype requires"):
        run_node("NanToNum", [torch.rand(3)], [(F32, [3])], nan=0.0)


# ---- Trunc (issue 34: aten.trunc) ----------------------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_trunc_rounds_toward_zero(dtype):
    x = torch.tensor([-2.5, -0.5, -0.0, 0.5, 1.99, 7.0, float("inf"), float("nan")]).to(dtype)
    (got,) = run_node("Trunc", {"input_x": x}, [(dtype, [8])])
    want = torch.tensor([-2.0, -0.0, -0.0, 0.0, 1.0, 7.0, float("inf"), float("nan")]).to(dtype)
    torch.testing.assert_close(got, want, equal_nan=True)
    assert torch.signbit(got[1]) and not torch.signbit(got[3])


def test_trunc_of_integers_is_the_value_and_int64_is_refused():
    x = torch.tensor([-3, 0, 5], dtype=I32)
    (got,) = run_node("Trunc", {"input_x": x}, [(I32, [3])])
    assert torch.equal(got, x)
    with pytest.raises(Exception, match="int64"):
        run_node("Trunc", {"input_x": x.long()}, [(torch.int64, [3])])

"""The Foreach* GE kernels (interpreter/kernels/foreach.py): every TorchAir `_foreach_*` converter's declared
cases compiled vs eager, compiled cases with mixed dtypes and 0-d / empty tensors, and hand-built
graphs for what TorchAir never emits (round modes, scalar-list weights, norms, layout errors), their
inputs named as TorchAir's builders name them."""
import math

import pytest
import torch

from op_plugin._testing_harness import check_compiled, run_node, torchair_declared_cases

F32, F16, BF16, I32 = torch.float32, torch.float16, torch.bfloat16, torch.int32

DECLARED = [
    "aten._foreach_abs.default", "aten._foreach_atan.default", "aten._foreach_cos.default",
    "aten._foreach_cosh.default", "aten._foreach_sin.default", "aten._foreach_sinh.default",
    "aten._foreach_tan.default", "aten._foreach_tanh.default", "aten._foreach_erf.default",
    "aten._foreach_erfc.default", "aten._foreach_exp.default", "aten._foreach_expm1.default",
    "aten._foreach_log1p.default", "aten._foreach_log2.default", "aten._foreach_sigmoid.default",
    "aten._foreach_add.Scalar", "aten._foreach_add.ScalarList",
    "aten._foreach_sub.Scalar", "aten._foreach_sub.ScalarList",
    "aten._foreach_mul.Scalar", "aten._foreach_mul.ScalarList", "aten._foreach_mul.List",
    "aten._foreach_div.Scalar", "aten._foreach_div.ScalarList", "aten._foreach_div.List",
    "aten._foreach_maximum.Scalar", "aten._foreach_maximum.ScalarList", "aten._foreach_maximum.List",
    "aten._foreach_minimum.Scalar", "aten._foreach_minimum.ScalarList", "aten._foreach_minimum.List",
    "aten._foreach_pow.Scalar", "aten._foreach_pow.ScalarList", "aten._foreach_pow.List",
    "aten._foreach_pow.ScalarAndTensor",
    "aten._foreach_addcdiv.Scalar", "aten._foreach_addcdiv.ScalarList",
    "aten._foreach_addcmul.Scalar", "aten._foreach_addcmul.ScalarList",
    "aten._foreach_lerp.Scalar", "aten._foreach_lerp.List", "aten._foreach_norm.Scalar",
    "aten._foreach_ceil.default", "aten._foreach_floor.default", "aten._foreach_frac.default",
    "aten._foreach_round.default", "aten._foreach_trunc.default",
]


@pytest.mark.parametrize("target_name", DECLARED)
def test_torchair_declared_cases_match_eager(torchair, target_name):
    for target, args, kwargs in torchair_declared_cases(target_name):
        try:
            target(*args, **kwargs)
        except (RuntimeError, NotImplementedError):
            continue  # eager itself has no CPU kernel for this case (frac of int32)
        check_compiled(lambda *a, _op=target, **k: _op(*a, **k), args, kwargs=kwargs, kind="torchair")


def _mixed():
    return [torch.randn(2, 3), torch.randn(4).half(), torch.randn(()).bfloat16()]


# Converters TorchAir declares no case for (acos, asin, log, log10, add/sub.List),
# mixed dtypes, 0-d and empty tensors. TorchAir has no converter for _foreach_sqrt/neg/reciprocal;
# addcdiv/addcmul.Tensor do not trace (torch's fake mode refuses the scalars tensor): see the
# hand-built ForeachAddcdivList/ForeachAddcmulList tests.
COMPILED = {
    "acos_asin": (lambda a: torch._foreach_acos(a) + torch._foreach_asin(a),
                  lambda: [[torch.rand(3) - 0.5, torch.rand(2, 2).half()]]),
    "log_log10": (lambda a: torch._foreach_log(a) + torch._foreach_log10(a),
                  lambda: [[torch.rand(3) + 0.1, torch.rand(()) + 1]]),
    "sub_list_alpha": (lambda a, b: torch._foreach_sub(a, b, alpha=0.5), lambda: [_mixed(), _mixed()]),
    "exp_mixed_dtypes_0d": (torch._foreach_exp, lambda: [_mixed()]),
    "add_list_alpha": (lambda a, b: torch._foreach_add(a, b, alpha=-2.0), lambda: [_mixed(), _mixed()]),
    "mul_scalarlist": (lambda a: torch._foreach_mul(a, [2.0, -1.0, 0.5]),
                       lambda: [[torch.randn(2, 3), torch.randn(4), torch.randn(())]]),
    "div_scalar_int": (lambda a: torch._foreach_div(a, 3), lambda: [[torch.arange(6, dtype=I32)]]),
    "maximum_nan": (lambda a, b: torch._foreach_maximum(a, b),
                    lambda: [[torch.tensor([math.nan, 1.0])], [torch.tensor([0.0, math.nan])]]),
    # TorchAir cannot lower a float ord for a list mixing dtypes, nor has a _foreach_sqrt converter.
    "norm_ord1_inf": (lambda a: torch._foreach_norm(a, 1) + torch._foreach_norm(a, math.inf),
                      lambda: [[torch.randn(2, 3), torch.randn(4)]]),
    "exp_empty_tensor": (torch._foreach_exp, lambda: [[torch.rand(0, 3), torch.rand(2)]]),
    "pow_scalar_and_tensor": (lambda a: torch._foreach_pow(2.0, a), lambda: [_mixed()[:2]]),
}


@pytest.mark.parametrize("name", list(COMPILED))
def test_compiled_matches_eager(name):
    fn, make = COMPILED[name]
    torch.manual_seed(0)
    check_compiled(fn, make(), kind="torchair")


# ---- hand-built graphs ------------------------------------------------------------------------

_TIES = torch.tensor([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 1.25, -1.75])  # exact in float16 too
_ROUNDED = {
    1: torch.round(_TIES),                                   # half to even
    2: torch.floor(_TIES),
    3: torch.ceil(_TIES),
    4: torch.tensor([-3.0, -2.0, -1.0, 1.0, 2.0, 3.0, 1.0, -2.0]),  # half away from zero
    5: torch.trunc(_TIES),
    6: torch.tensor([-3.0, -1.0, -1.0, 1.0, 1.0, 3.0, 1.0, -2.0]),  # half to odd
    7: torch.frac(_TIES),
    0: _TIES,                                                # any other mode: no rounding
}


@pytest.mark.parametrize("mode", list(_ROUNDED))
@pytest.mark.parametrize("mode_dtype", [torch.int8, torch.int64])
def test_round_off_number_modes(mode, mode_dtype):
    x = [_TIES, _TIES.half()]
    got = run_node("ForeachRoundOffNumber", {"x": x, "roundMode": torch.tensor([mode], dtype=mode_dtype)},
                   [(F32, [8]), (F16, [8])])
    torch.testing.assert_close(got[0], _ROUNDED[mode])
    torch.testing.assert_close(got[1], _ROUNDED[mode].half())


@pytest.mark.parametrize("p", [0.0, 1.0, 2.0, 3.0, math.inf, -math.inf])
def test_norm_orders(p):
    x = [torch.tensor([3.0, -4.0, 0.0]), torch.tensor([[1.0, -2.0], [0.0, 0.5]]).half()]
    got = run_node("ForeachNorm", {"x1": x, "scalar": torch.tensor(p)}, [(F32, []), (F16, [])])
    for g, t in zip(got, x, strict=True):
        torch.testing.assert_close(g, torch.linalg.vector_norm(t.float(), ord=p).to(t.dtype))


def test_lerp_list_with_one_weight_per_tensor():
    x1, x2 = [torch.zeros(3), torch.ones(2)], [torch.ones(3) * 4, torch.ones(2) * 3]
    got = run_node("ForeachLerpList", {"x1": x1, "x2": x2, "weight": [torch.tensor([0.25, 0.5])]},
                   [(F32, [3]), (F32, [2])])
    torch.testing.assert_close(got, [torch.full((3,), 1.0), torch.full((2,), 2.0)])


@pytest.mark.parametrize("op_type,want", [("ForeachAddcdivList", [5.0, -2.0]), ("ForeachAddcmulList", [37.0, -11.0])])
def test_addc_list_takes_one_scalar_per_tensor(op_type, want):
    x, x1 = [torch.ones(2), torch.ones(3)], [torch.ones(2) * 6, torch.ones(3) * 6]
    x2 = [torch.ones(2) * 3, torch.ones(3) * 2]
    got = run_node(op_type, {"x1": x, "x2": x1, "x3": x2, "scalars": torch.tensor([2.0, -1.0])},
                   [(F32, [2]), (F32, [3])])
    torch.testing.assert_close(got, [torch.full((2,), want[0]), torch.full((3,), want[1])])


@pytest.mark.parametrize("op_type", ["ForeachAcos", "ForeachACos", "ForeachAtan", "ForeachATan", "ForeachAsin",
                                     "ForeachASin"])
def test_both_spellings_of_the_inverse_trig_types_run(op_type):
    x = torch.tensor([-0.5, 0.0, 0.5])
    fn = {"acos": torch.acos, "atan": torch.atan, "asin": torch.asin}[op_type[7:].lower()]
    (got,) = run_node(op_type, [[x]], [(F32, [3])])
    torch.testing.assert_close(got, fn(x))


def test_tensor_lists_of_different_lengths_are_refused():
    with pytest.raises(Exception, match=r"ForeachAddList \(node 'op'\): tensor lists of different lengths: "
                       r"x1 has 2, x2 has 1"):
        run_node("ForeachAddList",
                 {"x1": [torch.rand(2), torch.rand(2)], "x2": [torch.rand(2)], "alpha": torch.tensor(1.0)},
                 [(F32, [2]), (F32, [2])])


def test_a_scalar_list_of_the_wrong_length_is_refused():
    with pytest.raises(Exception, match=r"ForeachMulScalarList \(node 'op'\): scalars has 3 values for 2 tensors"):
        run_node("ForeachMulScalarList",
                 {"x": [torch.rand(2), torch.rand(2)], "scalars": torch.tensor([1.0, 2.0, 3.0])},
                 [(F32, [2]), (F32, [2])])


def test_undeclared_dtypes_are_refused():
    with pytest.raises(Exception, match=r"ForeachExp \(node 'op'\): x\[1\] has dtype int32"):
        run_node("ForeachExp", [[torch.rand(2), torch.ones(2, dtype=I32)]], [(F32, [2]), (F32, [2])])


@pytest.mark.parametrize("op_type,fn", [("ForeachSqrt", torch.sqrt), ("ForeachNeg", torch.neg),
                                        ("ForeachReciprocal", torch.reciprocal)])
def test_unary_types_torchair_has_no_converter_for(op_type, fn):
    """TorchAir lowers no _foreach_sqrt/neg/reciprocal: the GE types against the torch ops."""
    x = [torch.rand(2, 3) + 0.5, (torch.rand(4) + 0.5).half()]
    got = run_node(op_type, [x], [(F32, [2, 3]), (F16, [4])])
    torch.testing.assert_close(got, [fn(x[0]), fn(x[1].float()).half()])
    if op_type == "ForeachNeg":  # the one of the three whose prototype takes int32
        (ints,) = run_node(op_type, [[torch.arange(-2, 3, dtype=I32)]], [(I32, [5])])
        assert ints.dtype == I32 and ints.tolist() == [2, 1, 0, -1, -2]

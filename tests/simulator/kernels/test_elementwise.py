"""Element-wise math and activation kernels across classes (kernels/math/*.py, kernels/activation/*.py):
TorchAir's declared cases and torch.compile of its converters against eager, the undeclared-dtype refusals,
the table proving that every attribute changes the result, and the types no converter records a call of.
"""

import math
import pytest
import torch
import torch.nn.functional as F

from op_plugin._testing_harness import assert_close, check_compiled, run_node, torchair_declared_cases

from tests.simulator.kernels.helpers import _X, BF16, F16, F32, F64, I32, I64


# Converters (TorchAir's declared cases) whose GE types live in math*/conversion_elementwise/
# activation/activation_elementwise.
DECLARED = [
    "aten.acos.default", "aten.acosh.default", "aten.asin.default", "aten.asinh.default", "aten.atan.default",
    "aten.atanh.default", "aten.tan.default", "aten.cosh.default", "aten.sinh.default", "aten.tanh.default",
    "aten.bitwise_not.default", "aten.view_as_real.default", "aten.view_as_complex.default",
    "aten.addcdiv.default", "aten.addcmul.default", "aten.add.Tensor", "aten.addmm.default", "aten.rsub.Tensor",
    "aten.rsub.Scalar", "aten.clamp.default", "aten.clamp_min.default", "aten.hardtanh.default",
    "aten.lerp.Scalar", "aten.threshold.default", "aten.hardsigmoid.default", "aten.hardswish.default",
    "aten.glu.default", "aten.log.default", "aten.log2.default", "aten.log10.default", "aten.log1p.default",
    "aten.exp.default",
]


# A declared case with a tensor over this many elements is left to `make declared-cases` (CI runs it):
# addmm's float16 2048x4096 @ 4096x4096 takes minutes on a CPU, which has no fast float16 GEMM.
UNIT_TEST_ELEMENTS = 1 << 22


def _small(args, kwargs) -> bool:
    return all(t.numel() <= UNIT_TEST_ELEMENTS for t in [*args, *kwargs.values()] if isinstance(t, torch.Tensor))


@pytest.mark.parametrize("target_name", DECLARED)
def test_torchair_declared_cases_match_eager(torchair, target_name):
    cases = [case for case in torchair_declared_cases(target_name) if _small(*case[1:])]
    assert cases, f"every declared case of {target_name} is over the unit tests' size bound"
    for target, args, kwargs in cases:
        check_compiled(lambda *a, _op=target, **k: _op(*a, **k), args, kwargs=kwargs, kind="torchair")


# ---- compiled through TorchAir's converters: ops without declared cases, edge cases -----------

def _ints(*shape, dtype=I32):
    return torch.arange(1, 1 + math.prod(shape), dtype=dtype).reshape(shape) if shape else torch.tensor(7, dtype=dtype)


COMPILED = {
    # float16 addmm at a size a unit test affords (TorchAir's float16 cases are over the bound above)
    "addmm_float16": (torch.addmm, lambda: [torch.randn(24).half(), torch.randn(16, 40).half(),
                                            torch.randn(40, 24).half()]),
    "log2_float": (torch.log2, lambda: [torch.rand(3, 4) + 0.1]),
    "log10_float16": (torch.log10, lambda: [(torch.rand(3, 4) + 0.1).half()]),
    "log10_int64": (torch.log10, lambda: [_ints(2, 3, dtype=I64)]),
    "log2_int32": (torch.log2, lambda: [_ints(5)]),
    "log_int8": (torch.log, lambda: [_ints(4, dtype=torch.int8)]),
    "log2_zero_negative_inf_nan": (torch.log2, lambda: [torch.tensor([0.0, -1.0, math.inf, math.nan, 8.0])]),
    "log10_empty": (torch.log10, lambda: [torch.rand(0, 3)]),
    "log2_0d": (torch.log2, lambda: [torch.tensor(4.0)]),
    "acos_int": (torch.acos, lambda: [torch.tensor([0, 1, -1], dtype=I32)]),
    "tan_0d": (torch.tan, lambda: [torch.tensor(0.3)]),
    "atanh_edges": (torch.atanh, lambda: [torch.tensor([-1.0, 1.0, 0.5, 2.0])]),
    "erfinv": (torch.erfinv, lambda: [torch.rand(4, 5) * 1.8 - 0.9]),
    "erfinv_f16_edges": (torch.erfinv, lambda: [torch.tensor([-1.0, 1.0, 0.0, 0.5], dtype=F16)]),
    "bitwise_not_int64": (torch.bitwise_not, lambda: [torch.tensor([0, -1, 5, 2**40], dtype=I64)]),
    "nan_to_num": (lambda x: torch.nan_to_num(x, nan=1.5, posinf=100.0, neginf=-100.0),
                   lambda: [torch.tensor([math.nan, math.inf, -math.inf, 2.0])]),
    "nan_to_num_f16": (lambda x: torch.nan_to_num(x, nan=0.0, posinf=60000.0, neginf=-60000.0),
                       lambda: [torch.tensor([math.nan, math.inf, -math.inf, 2.0], dtype=F16)]),
    "logsigmoid": (F.logsigmoid, lambda: [torch.randn(3, 4) * 10]),
    "logsigmoid_f16": (F.logsigmoid, lambda: [torch.randn(8).half()]),
    "prelu_channels": (F.prelu, lambda: [torch.randn(2, 3, 4), torch.tensor([0.1, 0.2, 0.3])]),
    "prelu_one_slope": (F.prelu, lambda: [torch.randn(2, 3, 4, 5), torch.tensor([0.25])]),
    "glu_dim0": (lambda x: F.glu(x, dim=0), lambda: [torch.randn(4, 3)]),
    "glu_negative_dim": (lambda x: F.glu(x, dim=-2), lambda: [torch.randn(2, 6, 3)]),
    "hardswish_f16": (F.hardswish, lambda: [torch.linspace(-5, 5, 21).half()]),
    "hardsigmoid_edges": (F.hardsigmoid, lambda: [torch.tensor([-3.0, 3.0, 0.0, math.inf, -math.inf])]),
    "clamp_nan_and_crossed": (lambda x: torch.clamp(x, 2.0, 1.0), lambda: [torch.tensor([math.nan, 0.0, 5.0])]),
    "clamp_int": (lambda x: torch.clamp(x, -2, 3), lambda: [_ints(3, 3) - 5]),
    "clamp_tensor_bounds": (torch.clamp, lambda: [torch.randn(3, 4), torch.full((4,), -0.5), torch.full((3, 1), 0.5)]),
    "add_alpha_broadcast": (lambda a, b: torch.add(a, b, alpha=2.5), lambda: [torch.randn(2, 3), torch.randn(3)]),
    "add_alpha_int": (lambda a, b: torch.add(a, b, alpha=3), lambda: [_ints(2, 3), _ints(3)]),
    "addcmul_broadcast": (lambda a, b, c: torch.addcmul(a, b, c, value=-0.5),
                          lambda: [torch.randn(3, 1), torch.randn(1, 4), torch.randn(4)]),
    "addcdiv_bf16": (lambda a, b, c: torch.addcdiv(a, b, c, value=2.0),
                     lambda: [torch.randn(5).bfloat16(), torch.randn(5).bfloat16(), torch.rand(5).bfloat16() + 1]),
    "lerp_f16": (lambda a, b: torch.lerp(a, b, 0.3), lambda: [torch.randn(6).half(), torch.randn(6).half()]),
    "threshold_int": (lambda x: F.threshold(x, 3, -1), lambda: [_ints(2, 4)]),
    "threshold_empty": (lambda x: F.threshold(x, 0.5, 2.0), lambda: [torch.rand(0)]),
    "view_as_real_0d": (torch.view_as_real, lambda: [torch.tensor(1 + 2j, dtype=torch.complex64)]),
}


@pytest.mark.parametrize("name", list(COMPILED))
def test_compiled_matches_eager(name):
    fn, make = COMPILED[name]
    torch.manual_seed(0)
    check_compiled(fn, make(), kind="torchair")


@pytest.mark.parametrize("op_type,inputs", [
    ("Acos", [torch.tensor([1, 2], dtype=torch.int8)]),
    ("Erfinv", [torch.rand(2, dtype=F64)]),
    ("Invert", [torch.rand(2)]),
    ("LogSigmoid", [torch.rand(2, dtype=BF16)]),
    ("RightShift", [torch.tensor([1], dtype=I32), torch.tensor([1], dtype=I64)]),
])
def test_undeclared_dtypes_are_refused_naming_the_node(op_type, inputs):
    with pytest.raises(Exception, match=rf"{op_type} \(node 'op'\)"):
        run_node(op_type, inputs, [(inputs[0].dtype, list(inputs[0].shape))])
_NON_FINITE = torch.tensor([math.nan, math.inf, -math.inf])
_ATTR_CASES = [
    # (op_type, inputs, attrs at their defaults, the attr to change, another value)
    ("Log", [_X.abs() + 0.5], {}, "base", 10.0),
    ("Log", [_X.abs() + 0.5], {}, "scale", 2.0),
    ("Log", [_X.abs() + 0.5], {}, "shift", 1.0),
    ("Exp", [_X], {}, "base", 2.0),
    ("Exp", [_X], {}, "scale", 2.0),
    ("Exp", [_X], {}, "shift", 1.0),
    ("HardSigmoid", [_X], {}, "alpha", 0.5),
    ("HardSigmoid", [_X], {}, "beta", 0.25),
    ("GLU", [torch.randn(4, 4)], {"dim": -1}, "dim", 0),
    ("NanToNum", [_NON_FINITE], {"nan": 0.0, "posinf": 1.0, "neginf": -1.0}, "nan", 5.0),
    ("NanToNum", [_NON_FINITE], {"nan": 0.0, "posinf": 1.0, "neginf": -1.0}, "posinf", 5.0),
    ("NanToNum", [_NON_FINITE], {"nan": 0.0, "posinf": 1.0, "neginf": -1.0}, "neginf", 5.0),
    ("Swish", [_X], {}, "scale", 2.0),
    ("LeakyRelu", [_X], {}, "negative_slope", 0.1),
    ("Elu", [_X], {}, "alpha", 2.0),
    ("Elu", [_X], {}, "scale", 2.0),
    ("Elu", [_X], {}, "input_scale", 2.0),
    ("Muls", [_X], {"value": 1.0}, "value", 3.0),
    ("Adds", [_X], {"value": 1.0}, "value", 3.0),
    ("Axpy", [_X, _X], {"alpha": 1.0}, "alpha", 3.0),  # a REQUIRED_ATTR in CANN's prototype
]


@pytest.mark.parametrize("op_type,inputs,base,attr,value", _ATTR_CASES,
                         ids=[f"{c[0]}-{c[3]}" for c in _ATTR_CASES])
def test_each_attribute_changes_the_result(op_type, inputs, base, attr, value):
    def run(attrs):
        if op_type == "GLU":
            shape = [4, 2] if attrs.get("dim") == -1 else [2, 4]
        else:
            shape = list(inputs[0].shape)
        return run_node(op_type, inputs, [(F32, shape)], **attrs)[0]

    default, changed = run(base), run({**base, attr: value})
    assert default.shape != changed.shape or not torch.equal(default, changed), f"{op_type} ignores attr {attr}"


# ---- types no recorded call exercised: one node each, against the torch op ---------------------

_A = torch.tensor([[-2.5, -0.5, 0.0], [0.5, 1.5, 2.5]])
_B = torch.tensor([[1.5, -2.0, 0.5], [0.0, 3.0, -1.0]])
_IA = torch.tensor([-7, -3, 0, 5, 9, 12], dtype=I32)
_IB = torch.tensor([2, -2, 3, 3, -4, 5], dtype=I32)
_IAB = list(zip(_IA.tolist(), _IB.tolist(), strict=True))
_SPECIAL = torch.tensor([1.0, math.inf, -math.inf, math.nan, 0.0])
_H = torch.linspace(-3, 3, 7, dtype=F16)
_COND = torch.tensor([True, False])
_Z = torch.randn(3, 4, 8, dtype=torch.complex64, generator=torch.Generator().manual_seed(0))
_UNRECORDED = [
    # (op_type, inputs, the expected outputs)
    ("AddV2", [_A, _B], [_A + _B]),
    ("Atan2", [_A, _B], [torch.atan2(_A, _B)]),
    ("BitwiseAnd", [_IA, _IB], [_IA & _IB]),
    ("BitwiseOr", [_IA, _IB], [_IA | _IB]),
    ("BitwiseXor", [_IA, _IB], [_IA ^ _IB]),
    ("DivNoNan", [_A, _B], [torch.tensor([[-2.5 / 1.5, 0.25, 0.0], [0.0, 0.5, -2.5]])]),
    ("FloorMod", [_IA, _IB], [torch.tensor([a % b for a, b in _IAB], dtype=I32)]),
    ("Mod", [_IA, _IB], [torch.tensor([int(math.fmod(a, b)) for a, b in _IAB], dtype=I32)]),
    ("TruncateMod", [_IA, _IB], [torch.tensor([int(math.fmod(a, b)) for a, b in _IAB], dtype=I32)]),
    ("TruncateDiv", [_IA, _IB], [torch.tensor([int(a / b) for a, b in _IAB], dtype=I32)]),
    ("SquaredDifference", [_A, _B], [(_A - _B) ** 2]),
    ("Greater", [_A, _B], [_A > _B]),
    ("GreaterEqual", [_A, _A.flip(1)], [_A >= _A.flip(1)]),
    ("NotEqual", [_IA, _IB.abs()], [_IA != _IB.abs()]),
    ("LogicalAnd", [_A > 0, _B > 0], [(_A > 0) & (_B > 0)]),
    ("LogicalOr", [_A > 0, _B > 0], [(_A > 0) | (_B > 0)]),
    ("IsFinite", [_SPECIAL], [torch.isfinite(_SPECIAL)]),
    ("IsInf", [_SPECIAL], [torch.isinf(_SPECIAL)]),
    ("IsNan", [_SPECIAL], [torch.isnan(_SPECIAL)]),
    ("Ceil", [_A], [torch.ceil(_A)]),
    ("Floor", [_A], [torch.floor(_A)]),
    ("Round", [_A], [torch.tensor([[-2.0, -0.0, 0.0], [0.0, 2.0, 2.0]])]),  # half to even, as rint
    ("Sign", [_A], [torch.sign(_A)]),
    ("Square", [_IA], [_IA * _IA]),
    ("Sqrt", [_A.abs()], [torch.sqrt(_A.abs())]),
    ("Sin", [_H], [torch.sin(_H.float()).half()]),
    ("Cos", [_H], [torch.cos(_H.float()).half()]),
    ("Erf", [_H], [torch.erf(_H.float()).half()]),
    ("Expm1", [_H], [torch.expm1(_H.float()).half()]),
    ("OnesLike", [_IA], [torch.ones(6, dtype=I32)]),
    ("FastGelu", [_H], [(_H.float() * torch.sigmoid(1.702 * _H.float())).half()]),
    ("Softplus", [_A], [F.softplus(_A)]),
    ("Mish", [_H], [F.mish(_H.float()).half()]),
    ("Relu6", [_A * 4], [F.relu6(_A * 4)]),
    ("ClipByValue", [_A, torch.tensor(-1.0), torch.tensor([0.0, 1.0, 2.0])],
     [torch.clamp(_A, torch.tensor(-1.0), torch.tensor([0.0, 1.0, 2.0]))]),
    ("Select", [_COND, _A, _B], [torch.stack([_A[0], _B[1]])]),  # a 1-D condition picks rows
    ("Snapshot", [_A], [_A]),
    ("StopGradient", [_A], [_A]),
    ("PreventGradient", [_A], [_A]),
    ("IdentityN", [[_A, _IA]], [_A, _IA]),
    ("FFT", [_Z], [torch.fft.fft(_Z)]),
    ("FFT2D", [_Z], [torch.fft.fft2(_Z)]),
]


@pytest.mark.parametrize("op_type,inputs,want", _UNRECORDED, ids=[c[0] for c in _UNRECORDED])
def test_types_without_recorded_calls(op_type, inputs, want):
    got = run_node(op_type, inputs, [(w.dtype, list(w.shape)) for w in want])
    assert_close(list(got), want, "torchair", equal_nan=True)

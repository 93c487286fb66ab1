"""Tests of kernels/activation/pointwise.py: the element-wise activations (Gelu, Relu, Swish, Elu, HardSwish, Mish,
Softplus, ThresholdV2, ...) and their *Grad.
"""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from op_plugin._simulator import capture_graphs
from op_plugin._testing_harness import assert_close, Npugraph, run_node

from tests.simulator.kernels.helpers import _randn, _X, aten, BF16, check_grad_case, F16, F32, I32


def test_hard_sigmoid_alpha_beta_and_int_input():
    x = torch.tensor([-4, 0, 1, 9], dtype=I32)
    (got,) = run_node("HardSigmoid", [x], [(F32, [4])], alpha=0.25, beta=0.25)
    torch.testing.assert_close(got, torch.clamp(0.25 * x.float() + 0.25, 0, 1))


def test_threshold_v2_without_value_replaces_with_zero():
    x, threshold = torch.tensor([0.1, 0.5, 0.9]), torch.tensor(0.5)
    (got,) = run_node("ThresholdV2", [x, threshold, None], [(F32, [3])])
    torch.testing.assert_close(got, torch.tensor([0.0, 0.0, 0.9]))


def test_prelu_refuses_a_slope_count_that_is_not_the_channel_count():
    with pytest.raises(Exception, match=r"PRelu \(node 'op'\): weight has 2 slopes"):
        run_node("PRelu", [torch.rand(2, 3), torch.rand(2)], [(F32, [2, 3])])


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_v2_reads_approximate(approximate):
    (got,) = run_node("GeluV2", [_X], [(F32, [5])], approximate=approximate)
    assert_close(got, F.gelu(_X, approximate=approximate), "torchair", equal_nan=True)


# name -> (fn, input factory(dtype), GE type, oracle or None, dtypes)
_ACTIVATION_CASES = {
    "relu": (lambda g, x: aten.threshold_backward(g, x, 0.0), lambda d: (_randn(3, 5, dtype=d), _randn(3, 5, dtype=d)),
             "ReluGrad", None, (F32, F16, BF16)),
    "relu_0d": (lambda g, x: aten.threshold_backward(g, x, 0.0), lambda d: (_randn(dtype=d), _randn(dtype=d)),
                "ReluGrad", None, (F32,)),
    "relu_empty": (lambda g, x: aten.threshold_backward(g, x, 0.0),
                   # TorchAir folds an empty result into a Const
                   lambda d: (_randn(0, 4, dtype=d), _randn(0, 4, dtype=d)), None, None, (F32,)),
    "threshold": (lambda g, x: aten.threshold_backward(g, x, 0.5),
                  lambda d: (_randn(4, 6, dtype=d), _randn(4, 6, dtype=d)), "ThresholdGradV2D", None, (F32, F16, BF16)),
    "sigmoid": (lambda g, y: aten.sigmoid_backward(g, y),
                lambda d: (_randn(3, 7, dtype=d), torch.rand(3, 7).to(d)), "SigmoidGrad", None, (F32, F16, BF16)),
    "tanh": (lambda g, y: aten.tanh_backward(g, y),
             lambda d: (_randn(2, 3, 4, dtype=d), _randn(2, 3, 4, dtype=d, low=-1, high=1)),
             "TanhGrad", None, (F32, F16)),
    # approximate="none" lowers to GeluGradV2 (op_plugin's numeric correction: eager's exact form);
    # "tanh" keeps TorchAir's GeluGrad, the derivative of CANN's tanh-form Gelu.
    "gelu": (lambda g, x: aten.gelu_backward(g, x), lambda d: (_randn(5, 6, dtype=d), _randn(5, 6, dtype=d)),
             "GeluGradV2", None, (F32, F16, BF16)),
    "gelu_tanh": (lambda g, x: aten.gelu_backward(g, x, approximate="tanh"),
                  lambda d: (_randn(5, 6, dtype=d), _randn(5, 6, dtype=d)), "GeluGrad", None, (F32, F16, BF16)),
    "leaky_relu": (lambda g, x: aten.leaky_relu_backward(g, x, 0.3, False),
                   lambda d: (_randn(3, 4, dtype=d), _randn(3, 4, dtype=d)), "LeakyReluGrad", None, (F32, F16)),
    "elu": (lambda g, x: aten.elu_backward(g, 1.5, 1.2, 1.4, False, x),
            lambda d: (_randn(2, 8, 4, dtype=d), _randn(2, 8, 4, dtype=d)), "EluGradV2", None, (F32, F16)),
    "elu_result": (lambda g, y: aten.elu_backward(g, 1.5, 1.2, 1.4, True, y),
                   lambda d: (_randn(2, 8, 4, dtype=d), _randn(2, 8, 4, dtype=d, low=-1.7, high=3)), "EluGradV2", None,
                   (F32,)),
    "hardtanh": (lambda g, x: aten.hardtanh_backward(g, x, -2.0, 2.0),
                 lambda d: (_randn(4, 4, dtype=d), _randn(4, 4, dtype=d)), "HardtanhGrad", None, (F32, F16)),
    "hardsigmoid": (lambda g, x: aten.hardsigmoid_backward(g, x),
                    lambda d: (_randn(3, 4, dtype=d), _randn(3, 4, dtype=d)), "HardSigmoidGrad", None, (F32, F16)),
    "hardswish": (lambda g, x: aten.hardswish_backward(g, x),
                  lambda d: (_randn(2, 6, 7, dtype=d), _randn(2, 6, 7, dtype=d)), "HardSwishGrad", None, (F32, F16)),
    "log_sigmoid": (lambda g, x: aten.log_sigmoid_backward(g, x, torch.empty(0, dtype=x.dtype)),
                    lambda d: (_randn(3, 5, dtype=d), _randn(3, 5, dtype=d)), "LogSigmoidGrad",
                    lambda g, x: aten.log_sigmoid_backward(g, x, aten.log_sigmoid_forward(x)[1]), (F32, F16)),
    "glu_dim1": (lambda g, x: aten.glu_backward(g, x, 1),
                 lambda d: (_randn(6, 4, 9, dtype=d), _randn(6, 8, 9, dtype=d)),
                 "GLUGrad", None, (F32, F16)),
    "glu_neg_dim": (lambda g, x: aten.glu_backward(g, x, -1),
                    lambda d: (_randn(6, 4, 4, dtype=d), _randn(6, 4, 8, dtype=d)),
                    "GLUGrad", None, (F32,)),
    "prelu": (lambda g, x, w: aten._prelu_kernel_backward(g, x, w),
              lambda d: (_randn(2, 3, 4, dtype=d), _randn(2, 3, 4, dtype=d), _randn(3, 1, dtype=d)), "PReluGrad", None,
              (F32, F16)),
    "prelu_single": (lambda g, x, w: aten._prelu_kernel_backward(g, x, w),
                     lambda d: (_randn(2, 3, 4, dtype=d), _randn(2, 3, 4, dtype=d), _randn(1, dtype=d)), "PReluGrad",
                     None, (F32,)),
}

_IDS = {F32: "fp32", F16: "fp16", BF16: "bf16"}


@pytest.mark.parametrize("name,dtype", [(n, d) for n, c in _ACTIVATION_CASES.items() for d in c[4]],
                         ids=[f"{n}-{_IDS[d]}" for n, c in _ACTIVATION_CASES.items() for d in c[4]])
def test_activation_grad_matches_eager(name, dtype):
    fn, make, ge_type, oracle, _ = _ACTIVATION_CASES[name]
    torch.manual_seed(0)
    check_grad_case(fn, make(dtype), ge_type, oracle=oracle, scale=4.0 if dtype != F32 else 1.0)


def test_relu_grad_nan_and_inf_follow_cann_multiply_form():
    """CANN computes gradients * (features > 0 ? 1 : 0): a NaN feature passes the gradient (as eager),
    an inf gradient on a masked entry gives NaN (eager gives 0)."""
    g = torch.tensor([float("nan"), float("inf"), 1.0, -2.0, float("inf")])
    x = torch.tensor([1.0, 2.0, float("nan"), float("-inf"), -1.0])
    want = torch.tensor([float("nan"), float("inf"), 1.0, -0.0, float("nan")])
    check_grad_case(lambda a, b: aten.threshold_backward(a, b, 0.0), (g, x), "ReluGrad", oracle=lambda a, b: want)


def test_gelu_grad_follows_cann_tanh_form_not_eager_erf():
    """TorchAir's own lowering of aten.gelu_backward(approximate='none') is GeluGrad, the derivative of
    CANN's tanh Gelu (kept with the torchair_gelu option)."""
    x = torch.linspace(-3, 3, 61)
    g = torch.ones_like(x)
    check_grad_case(lambda a, b: aten.gelu_backward(a, b), (g, x), "GeluGrad",
                    oracle=lambda a, b: aten.gelu_backward(a, b, approximate="tanh"),
                    options={"torchair_gelu": True})
    assert (aten.gelu_backward(g, x) - aten.gelu_backward(g, x, approximate="tanh")).abs().max() > 1e-4


def test_threshold_grad_float64_is_refused_as_cann_declares():
    """CANN's ThresholdGradV2D kernel takes bf16/f16/f32/int32/int8/uint8, not float64."""
    g, x = _randn(3, 4, dtype=torch.float64), _randn(3, 4, dtype=torch.float64)
    with pytest.raises(Exception, match="ThresholdGradV2D.*float64"):
        check_grad_case(lambda a, b: aten.threshold_backward(a, b, 0.5), (g, x), "ThresholdGradV2D")


def test_activation_training_step_matches_autograd():
    """Forward + backward through npugraph: the gradients of a small activation stack equal eager's."""
    torch.manual_seed(0)
    layer = torch.nn.Linear(6, 6)

    def step(x):
        h = layer(x)
        h = torch.relu(h) + torch.sigmoid(h) + torch.tanh(h) + torch.nn.functional.leaky_relu(h, 0.2)
        loss = (h * h).sum()
        loss.backward()
        return loss

    x = torch.randn(4, 6)
    compiled = Npugraph(step, fullgraph=False)
    with capture_graphs() as graphs:
        compiled(x)
    got = [p.grad.clone() for p in layer.parameters()]
    layer.zero_grad()
    step(x)
    want = [p.grad for p in layer.parameters()]
    types = {op.type for graph in graphs for op in graph.op}
    assert {"ReluGrad", "SigmoidGrad", "TanhGrad", "LeakyReluGrad"} <= types
    assert_close(got, want, "summed", what="parameter grad")


@pytest.mark.parametrize("approximate", ["none", "tanh"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_gelu_grad_v2_matches_eager_gelu_backward(approximate, dtype):
    """GeluGradV2 (what npugraph lowers gelu_backward to, see numeric_corrections) in both modes."""
    x = torch.linspace(-4, 4, 33).to(dtype)
    dy = torch.linspace(1, 2, 33).to(dtype)
    (got,) = run_node("GeluGradV2", [dy, x], [(dtype, [33])], approximate=approximate)
    want = aten.gelu_backward(dy.float(), x.float(), approximate=approximate).to(dtype)
    if dtype == torch.float32:
        assert_close(got, want, "kernel")
    else:  # bfloat16: within 1e-2 both ways, tighter than the kernel row's rtol
        torch.testing.assert_close(got, want, atol=1e-2, rtol=1e-2)

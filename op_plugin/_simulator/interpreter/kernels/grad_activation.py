"""Backward GE ops of the activations: ReluGrad, ThresholdGradV2D, SigmoidGrad, TanhGrad, GeluGrad,
GeluGradV2, SwishGrad, LeakyReluGrad, EluGradV2, HardtanhGrad, HardSigmoidGrad, HardSwishGrad, LogSigmoidGrad, PReluGrad,
GLUGrad.

Formulas from CANN's operator definitions (REG_OP docs, hicann ops-nn ``activation/*_grad``
READMEs); TorchAir's converters are in ``ge_converter/aten/*_backward.py``. Where the NPU differs
from eager PyTorch the kernel follows the NPU: ``GeluGrad`` is the derivative of CANN's tanh-form
Gelu whatever ``approximate`` the aten op had.

16-bit float inputs are computed in float32 and rounded once, as the vector units do.
"""
from __future__ import annotations

import math

import torch

from .common import check_dtype, fail, opmath, same_dtype
from ..registry import builtin_kernel

_F16_F32 = (torch.float16, torch.float32)
_FLOATS = (torch.float16, torch.float32, torch.bfloat16)


def _grad_and_input(node, inputs, allowed, names=("gradients", "features")):
    """The (gradient, forward tensor) pair of an elementwise grad: one dtype, one shape, declared dtypes."""
    first, second = inputs[0], inputs[1]
    same_dtype(node.type, [first, second])
    check_dtype(node, names[0], first, allowed)
    if first.shape != second.shape:
        fail(node, f"{names[0]} {list(first.shape)} and {names[1]} {list(second.shape)} must have one shape")
    return first, second


@builtin_kernel("ReluGrad")
def _relu_grad(inputs, attrs, node):
    """backprops = gradients * (0 if features <= 0 else 1), TensorFlow's form that CANN follows
    (ops-nn relu_grad_dag.h): a NaN feature passes the gradient, and an inf/NaN gradient where
    features <= 0 gives NaN (eager PyTorch selects 0 there)."""
    real = (torch.float16, torch.float32, torch.bfloat16, torch.float64, torch.int8, torch.uint8, torch.int16,
            torch.int32, torch.int64)
    grad, features = _grad_and_input(node, inputs, real)
    mask = torch.where(features <= 0, 0, 1).to(opmath(grad).dtype)
    return [(opmath(grad) * mask).to(grad.dtype)]


@builtin_kernel("ThresholdGradV2D")
def _threshold_grad_v2d(inputs, attrs, node):
    """backprops = gradients where features > threshold, else 0. TorchAir's prototype docstring lists
    int32 and float16 only, but CANN's kernel (ops impl `threshold_grad_v2_d`, dynamic shape) checks
    bfloat16, float16, float32, int32, int8, uint8, and TorchAir emits it for float32 graphs."""
    grad, features = _grad_and_input(node, inputs, (torch.bfloat16, torch.float16, torch.float32, torch.int32,
                                                    torch.int8, torch.uint8))
    return [torch.where(opmath(features) > attrs["threshold"], grad, torch.zeros((), dtype=grad.dtype))]


def _complex_aware(node, y, dy, attrs, derivative):
    """z = dy * f'(y), conjugating f'(y) for complex inputs when complex_conj is set (TensorFlow's form)."""
    same_dtype(node.type, [y, dy])
    if y.shape != dy.shape:
        fail(node, f"y {list(y.shape)} and dy {list(dy.shape)} must have one shape")
    allowed = _FLOATS + (torch.float64, torch.complex64, torch.complex128)
    check_dtype(node, "y", y, allowed)
    local = derivative(opmath(y))
    if attrs.get("complex_conj", False) and local.is_complex():
        local = local.conj()
    return [(opmath(dy) * local).to(y.dtype)]


@builtin_kernel("SigmoidGrad")
def _sigmoid_grad(inputs, attrs, node):
    """z = dy * y * (1 - y), y = sigmoid(x)."""
    y, dy = inputs
    return _complex_aware(node, y, dy, attrs, lambda out: out * (1 - out))


@builtin_kernel("TanhGrad")
def _tanh_grad(inputs, attrs, node):
    """z = dy * (1 - y^2), y = tanh(x)."""
    y, dy = inputs
    return _complex_aware(node, y, dy, attrs, lambda out: 1 - out * out)


_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


@builtin_kernel("GeluGrad")
def _gelu_grad(inputs, attrs, node):
    """z = dy * d/dx[0.5 x (1 + tanh(b (x + 0.044715 x^3)))], b = sqrt(2/pi): CANN's Gelu is the tanh form,
    so its gradient is too (hicann ops-nn activation/gelu_grad). ``y`` (Gelu's output) is fed but unused
    by the formula; TorchAir passes dy there."""
    dy, x, y = inputs
    same_dtype(node.type, [dy, x, y])
    check_dtype(node, "x", x, _FLOATS)
    wide = opmath(x)
    local = _tanh_gelu_derivative(wide)
    return [(opmath(dy) * local).to(x.dtype)]


def _tanh_gelu_derivative(wide):
    inner = torch.tanh(_SQRT_2_OVER_PI * (wide + 0.044715 * wide ** 3))
    return 0.5 * (1 + inner) + 0.5 * wide * (1 - inner * inner) * _SQRT_2_OVER_PI * (1 + 3 * 0.044715 * wide * wide)


@builtin_kernel("GeluGradV2")
def _gelu_grad_v2(inputs, attrs, node):
    """z = dy * GeluV2'(x) for `approximate` "none" (Phi(x) + x phi(x), the exact erf form) or "tanh"
    (the tanh form's derivative): the gradient of GeluV2 (CANN aclnnGeluBackwardV2)."""
    dy, x = inputs
    same_dtype(node.type, [dy, x])
    check_dtype(node, "x", x, _FLOATS)
    approximate = attrs.get("approximate", "none")
    wide = opmath(x)
    if approximate == "none":
        local = 0.5 * (1 + torch.erf(wide / math.sqrt(2.0))) + wide * torch.exp(-0.5 * wide * wide) / math.sqrt(2 * math.pi)
    elif approximate == "tanh":
        local = _tanh_gelu_derivative(wide)
    else:
        fail(node, f"approximate={approximate!r}; GeluGradV2 takes 'none' or 'tanh'")
    return [(opmath(dy) * local).to(x.dtype)]


@builtin_kernel("SwishGrad")
def _swish_grad(inputs, attrs, node):
    """grad_x = grad * d/dx[x * sigmoid(scale * x)] = grad * (s + scale * y * (1 - s)), s = sigmoid(scale * x),
    y = Swish's output (fed by the converter, as CANN's swish_grad reads it)."""
    grad, x, y = inputs
    same_dtype(node.type, [grad, x, y])
    check_dtype(node, "x", x, _FLOATS)
    scale = attrs.get("scale", 1.0)
    s = torch.sigmoid(scale * opmath(x))
    return [(opmath(grad) * (s + scale * opmath(y) * (1 - s))).to(x.dtype)]


@builtin_kernel("LeakyReluGrad")
def _leaky_relu_grad(inputs, attrs, node):
    """backprops = gradients where features > 0, else gradients * negative_slope."""
    grad, features = _grad_and_input(node, inputs, _F16_F32 + (torch.float64,))
    wide = opmath(grad)
    return [torch.where(features > 0, wide, wide * attrs.get("negative_slope", 0.0)).to(grad.dtype)]


@builtin_kernel("EluGradV2")
def _elu_grad_v2(inputs, attrs, node):
    """Gradient of scale * (x if x > 0 else alpha * (exp(input_scale * x) - 1)).

    is_result=False: activations is x; x <= 0 gives grads * input_scale * alpha * scale * exp(input_scale * x).
    is_result=True: activations is the forward output y; y <= 0 gives grads * input_scale * (y + alpha * scale).
    Positive entries give grads * scale.
    """
    grad, activations = _grad_and_input(node, inputs, _F16_F32, names=("grads", "activations"))
    alpha, scale = attrs.get("alpha", 1.0), attrs.get("scale", 1.0)
    input_scale = attrs.get("input_scale", 1.0)
    wide_grad, act = opmath(grad), opmath(activations)
    if attrs.get("is_result", False):
        negative = wide_grad * input_scale * (act + alpha * scale)
    else:
        negative = wide_grad * input_scale * alpha * scale * torch.exp(act * input_scale)
    return [torch.where(act > 0, wide_grad * scale, negative).to(grad.dtype)]


@builtin_kernel("HardtanhGrad")
def _hardtanh_grad(inputs, attrs, node):
    """y = grad where min_val < result < max_val, else 0 (result: hardtanh's input, as TorchAir feeds it)."""
    result, grad = inputs
    same_dtype(node.type, [result, grad])
    check_dtype(node, "result", result, _F16_F32)
    if result.shape != grad.shape:
        fail(node, f"result {list(result.shape)} and grad {list(grad.shape)} must have one shape")
    low, high = attrs.get("min_val", -1.0), attrs.get("max_val", 1.0)
    inside = (opmath(result) > low) & (opmath(result) < high)
    return [torch.where(inside, grad, torch.zeros((), dtype=grad.dtype))]


@builtin_kernel("HardSigmoidGrad")
def _hard_sigmoid_grad(inputs, attrs, node):
    """y = grads * alpha where 0 < alpha * x + beta < 1, else 0."""
    grad, x = _grad_and_input(node, inputs, _F16_F32, names=("grads", "input_x"))
    alpha, beta = attrs.get("alpha", 0.16666666), attrs.get("beta", 0.5)
    linear = opmath(x) * alpha + beta
    wide = opmath(grad)
    return [torch.where((linear > 0) & (linear < 1), wide * alpha, torch.zeros_like(wide)).to(grad.dtype)]


@builtin_kernel("HardSwishGrad")
def _hard_swish_grad(inputs, attrs, node):
    """y = grad * (0 if x < -3, x / 3 + 0.5 if -3 <= x <= 3, 1 if x > 3)."""
    grad, x = _grad_and_input(node, inputs, _FLOATS, names=("grad", "x"))
    wide, wide_x = opmath(grad), opmath(x)
    local = torch.where(wide_x < -3, torch.zeros_like(wide_x), torch.where(wide_x <= 3, wide_x / 3 + 0.5, 1.0))
    return [(wide * local).to(grad.dtype)]


@builtin_kernel("LogSigmoidGrad")
def _log_sigmoid_grad(inputs, attrs, node):
    """backprops = grads * (1 - sigmoid(features)) = grads * sigmoid(-features)."""
    grad, features = _grad_and_input(node, inputs, _F16_F32, names=("grads", "features"))
    return [(opmath(grad) * torch.sigmoid(-opmath(features))).to(grad.dtype)]


@builtin_kernel("PReluGrad")
def _prelu_grad(inputs, attrs, node):
    """dx = grads * (1 if x > 0 else weight); da = grads * x where x <= 0, else 0.

    da keeps features' shape, unreduced: CANN's PReluGrad of TorchAir's prototype says da "has the same
    dimensions and type as features", as aten._prelu_kernel_backward's grad_weight does (the sum to the
    weight's shape is a separate op). Newer CANN releases reduce da to weights' shape.
    weights: one entry or one per channel (dim 1), possibly with trailing 1-dims (aten's broadcast form).
    """
    grad, features = _grad_and_input(node, inputs[:2], _F16_F32, names=("grads", "features"))
    weights = inputs[2]
    same_dtype(node.type, [grad, weights])
    count = weights.numel()
    if count != 1 and (features.dim() < 2 or features.shape[1] != count):
        fail(node, f"weights with {count} entries need 1 or features.shape[1] entries, features "
                   f"{list(features.shape)}")
    shape = [1] * features.dim()
    if count != 1:
        shape[1] = count
    wide_grad, wide_x = opmath(grad), opmath(features)
    wide_w = opmath(weights).reshape(shape)
    dx = torch.where(wide_x > 0, wide_grad, wide_grad * wide_w)
    da = torch.where(wide_x > 0, torch.zeros_like(wide_x), wide_grad * wide_x)
    return [dx.to(grad.dtype), da.to(grad.dtype)]


@builtin_kernel("GLUGrad")
def _glu_grad(inputs, attrs, node):
    """x = [a, b] split in halves along dim, glu = a * sigmoid(b):
    d a = y_grad * sigmoid(b), d b = y_grad * a * sigmoid(b) * (1 - sigmoid(b))."""
    y_grad, x = inputs
    same_dtype(node.type, [y_grad, x])
    check_dtype(node, "x", x, _FLOATS + (torch.float64,))
    if x.dim() == 0:
        fail(node, "x must have at least one dim")
    dim = attrs.get("dim", -1)
    if not -x.dim() <= dim < x.dim():
        fail(node, f"dim {dim} is out of range for x of rank {x.dim()}")
    if x.shape[dim] % 2:
        fail(node, f"x dim {dim} has odd size {x.shape[dim]}; GLU halves it")
    a, b = opmath(x).chunk(2, dim=dim)
    if list(y_grad.shape) != list(a.shape):
        fail(node, f"y_grad shape {list(y_grad.shape)} must be x's with dim {dim} halved, {list(a.shape)}")
    gate = torch.sigmoid(b)
    wide = opmath(y_grad)
    return [torch.cat([wide * gate, wide * a * gate * (1 - gate)], dim=dim).to(x.dtype)]

"""Activation GE ops (hicann ops-nn ``activation/``), forward and backward.

Forward: Gelu (CANN's tanh form), GeluV2, Swish, LeakyRelu, Elu, LogSigmoid, PRelu (per-channel
slope), HardSigmoid (alpha, beta), HardSwish; without attrs, Relu, Relu6, Sigmoid, FastGelu,
Softplus, Mish; and ThresholdV2.
Backward: ReluGrad, ThresholdGradV2D, SigmoidGrad, TanhGrad, GeluGrad, GeluGradV2, SwishGrad,
LeakyReluGrad, EluGradV2, HardtanhGrad, HardSigmoidGrad, HardSwishGrad, LogSigmoidGrad, PReluGrad,
SoftplusV2Grad: formulas from CANN's operator definitions (REG_OP docs, ops-nn ``activation/*_grad``
READMEs); TorchAir's converters are in ``ge_converter/aten/*_backward.py``.
The softmax family, which CANN also files under ``activation/``, is in `softmax.py`,
the gated units (GLU, SwiGlu and their grads) in `swiglu.py`.

Where the NPU computes differently from eager PyTorch, the kernel follows the NPU: `Gelu` is the
tanh approximation (CANN's Gelu has no erf mode; TorchAir lowers `aten.gelu` with either
`approximate` to it), and ``GeluGrad`` is the derivative of that tanh form whatever ``approximate``
the aten op had. 16-bit float inputs are computed in float32 and rounded once, as the vector units do.
"""
from __future__ import annotations

import math
import torch
from ...registry import ge_kernel, refuse
from ..common import opmath, unary_in_float32, unary_kernel

_F16_F32 = (torch.float16, torch.float32)
_FLOATS = (torch.float16, torch.float32, torch.bfloat16)


@ge_kernel("Gelu", widen=True)
def gelu(x):
    """CANN's Gelu: the tanh approximation, computed in float32 for 16-bit inputs."""
    return torch.nn.functional.gelu(x, approximate="tanh")


@ge_kernel("GeluV2", widen=True, prepared=True)
def gelu_v2(x, *, approximate):
    if approximate not in ("none", "tanh"):
        refuse(f"approximate must be 'none' or 'tanh', got {approximate!r}")
    gelu = torch._C._nn.gelu  # what torch.nn.functional.gelu calls
    return lambda x: gelu(x, approximate=approximate)


@ge_kernel("Swish", widen=True, prepared=True)
def swish(x, *, scale):
    """y = x / (1 + exp(-scale * x)); at scale 1 that is SiLU, computed by the op eager calls."""
    if scale == 1.0:
        return torch._C._nn.silu  # what torch.nn.functional.silu calls
    return lambda x: x * torch.sigmoid(scale * x)


@ge_kernel("LeakyRelu")
def leaky_relu(x, *, negative_slope):
    return torch.nn.functional.leaky_relu(x, negative_slope)


@ge_kernel("Elu", widen=True)
def elu(x, *, alpha, scale, input_scale):
    return scale * torch.where(x > 0, x, alpha * torch.expm1(input_scale * x))


@ge_kernel("LogSigmoid", accepts={"x": _F16_F32}, widen=True)
def log_sigmoid(x):
    """y = log(1 / (1 + exp(-x))), computed stably as -softplus(-x)."""
    return torch.nn.functional.logsigmoid(x)


@ge_kernel("PRelu", accepts={"x": _F16_F32, "weight": _F16_F32}, widen=True)
def prelu(x, weight):
    """y = x where x > 0, else weight * x; weight has one slope, or one per channel (dim 1 of x,
    dim 0 of a 1-D x)."""
    channels = x.shape[1] if x.dim() >= 2 else (x.shape[0] if x.dim() == 1 else 1)
    if weight.numel() != 1:
        if weight.numel() != channels:
            refuse(f"weight has {weight.numel()} slopes but x {tuple(x.shape)} has {channels} channels")
        if x.dim() >= 2:
            weight = weight.reshape([channels] + [1] * (x.dim() - 2))
    return torch.where(x > 0, x, weight * x)


@ge_kernel("HardSigmoid", accepts={"input_x": (torch.float32, torch.float16, torch.int32)})
def hard_sigmoid(input_x, *, alpha, beta):
    """y = max(0, min(1, alpha * x + beta)); an int32 input gives a float32 result."""
    x = input_x
    wide, out_dtype = (x.float(), x.dtype) if x.dtype.is_floating_point else (x.to(torch.float32), torch.float32)
    return torch.clamp(alpha * wide + beta, 0.0, 1.0).to(out_dtype)


@ge_kernel("HardSwish", accepts={"x": _F16_F32}, widen=True)
def hard_swish(x):
    """y = x * relu6(x + 3) / 6."""
    return x * torch.clamp(x + 3.0, 0.0, 6.0) / 6.0


# ---- backward ---------------------------------------------------------------------------------------

def _same_shape(first_name, first, second_name, second):
    """The (gradient, forward tensor) pair of an elementwise grad has one shape (its dtype rules are
    the decorator's)."""
    if first.shape != second.shape:
        refuse(f"{first_name} {list(first.shape)} and {second_name} {list(second.shape)} must have one shape")


_REAL = (torch.float16, torch.float32, torch.bfloat16, torch.float64, torch.int8, torch.uint8, torch.int16,
         torch.int32, torch.int64)


@ge_kernel("ReluGrad", one_dtype=("gradients", "features"), accepts={"gradients": _REAL}, widen=True)
def relu_grad(gradients, features):
    """backprops = gradients * (0 if features <= 0 else 1), TensorFlow's form that CANN follows
    (ops-nn relu_grad_dag.h): a NaN feature passes the gradient, and an inf/NaN gradient where
    features <= 0 gives NaN (eager PyTorch selects 0 there)."""
    _same_shape("gradients", gradients, "features", features)
    return gradients * torch.where(features <= 0, 0, 1).to(gradients.dtype)


@ge_kernel("ThresholdGradV2D", one_dtype=("gradients", "features"), accepts={"gradients": (
        torch.bfloat16, torch.float16, torch.float32, torch.int32, torch.int8, torch.uint8)})
def threshold_grad_v2d(gradients, features, *, threshold):
    """backprops = gradients where features > threshold, else 0. TorchAir's prototype docstring lists
    int32 and float16 only, but CANN's kernel (ops impl `threshold_grad_v2_d`, dynamic shape) checks
    bfloat16, float16, float32, int32, int8, uint8, and TorchAir emits it for float32 graphs."""
    _same_shape("gradients", gradients, "features", features)
    return torch.where(opmath(features) > threshold, gradients, torch.zeros((), dtype=gradients.dtype))


_COMPLEX_AWARE = _FLOATS + (torch.float64, torch.complex64, torch.complex128)


def _complex_aware(y, dy, complex_conj, derivative):
    """z = dy * f'(y), conjugating f'(y) for complex inputs when complex_conj is set (TensorFlow's form)."""
    _same_shape("y", y, "dy", dy)
    local = derivative(y)
    if complex_conj and local.is_complex():
        local = local.conj()
    return dy * local


@ge_kernel("SigmoidGrad", one_dtype=("y", "dy"), accepts={"y": _COMPLEX_AWARE}, widen=True)
def sigmoid_grad(y, dy, *, complex_conj):
    """z = dy * y * (1 - y), y = sigmoid(x)."""
    return _complex_aware(y, dy, complex_conj, lambda out: out * (1 - out))


@ge_kernel("TanhGrad", one_dtype=("y", "dy"), accepts={"y": _COMPLEX_AWARE}, widen=True)
def tanh_grad(y, dy, *, complex_conj):
    """z = dy * (1 - y^2), y = tanh(x)."""
    return _complex_aware(y, dy, complex_conj, lambda out: 1 - out * out)


_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


def _tanh_gelu_derivative(wide):
    inner = torch.tanh(_SQRT_2_OVER_PI * (wide + 0.044715 * wide ** 3))
    return 0.5 * (1 + inner) + 0.5 * wide * (1 - inner * inner) * _SQRT_2_OVER_PI * (1 + 3 * 0.044715 * wide * wide)


@ge_kernel("GeluGrad", one_dtype=("dy", "x", "y"), accepts={"x": _FLOATS}, widen=True)
def gelu_grad(dy, x, y):
    """z = dy * d/dx[0.5 x (1 + tanh(b (x + 0.044715 x^3)))], b = sqrt(2/pi): CANN's Gelu is the tanh form,
    so its gradient is too (hicann ops-nn activation/gelu_grad). ``y`` (Gelu's output) is fed but unused
    by the formula; TorchAir passes dy there."""
    return dy * _tanh_gelu_derivative(x)


@ge_kernel("GeluGradV2", one_dtype=("dy", "x"), accepts={"x": _FLOATS}, widen=True)
def gelu_grad_v2(dy, x, *, approximate):
    """z = dy * GeluV2'(x) for `approximate` "none" (Phi(x) + x phi(x), the exact erf form) or "tanh"
    (the tanh form's derivative): the gradient of GeluV2 (CANN aclnnGeluBackwardV2)."""
    if approximate == "none":
        local = 0.5 * (1 + torch.erf(x / math.sqrt(2.0))) + x * torch.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)
    elif approximate == "tanh":
        local = _tanh_gelu_derivative(x)
    else:
        refuse(f"approximate={approximate!r}; GeluGradV2 takes 'none' or 'tanh'")
    return dy * local


@ge_kernel("SwishGrad", one_dtype=("grad", "x", "y"), accepts={"x": _FLOATS}, widen=True)
def swish_grad(grad, x, y, *, scale):
    """grad_x = grad * d/dx[x * sigmoid(scale * x)] = grad * (s + scale * y * (1 - s)), s = sigmoid(scale * x),
    y = Swish's output (fed by the converter, as CANN's swish_grad reads it)."""
    s = torch.sigmoid(scale * x)
    return grad * (s + scale * y * (1 - s))


@ge_kernel("LeakyReluGrad", one_dtype=("gradients", "features"), accepts={"gradients": _F16_F32 + (torch.float64,)},
           widen=True)
def leaky_relu_grad(gradients, features, *, negative_slope):
    """backprops = gradients where features > 0, else gradients * negative_slope."""
    _same_shape("gradients", gradients, "features", features)
    return torch.where(features > 0, gradients, gradients * negative_slope)


@ge_kernel("EluGradV2", one_dtype=("grads", "activations"), accepts={"grads": _F16_F32}, widen=True)
def elu_grad_v2(grads, activations, *, alpha, scale, input_scale, is_result):
    """Gradient of scale * (x if x > 0 else alpha * (exp(input_scale * x) - 1)).

    is_result=False: activations is x; x <= 0 gives grads * input_scale * alpha * scale * exp(input_scale * x).
    is_result=True: activations is the forward output y; y <= 0 gives grads * input_scale * (y + alpha * scale).
    Positive entries give grads * scale.
    """
    _same_shape("grads", grads, "activations", activations)
    if is_result:
        negative = grads * input_scale * (activations + alpha * scale)
    else:
        negative = grads * input_scale * alpha * scale * torch.exp(activations * input_scale)
    return torch.where(activations > 0, grads * scale, negative)


@ge_kernel("HardtanhGrad", one_dtype=("result", "grad"), accepts={"result": _F16_F32})
def hardtanh_grad(result, grad, *, min_val, max_val):
    """y = grad where min_val < result < max_val, else 0 (result: hardtanh's input, as TorchAir feeds it)."""
    _same_shape("result", result, "grad", grad)
    inside = (opmath(result) > min_val) & (opmath(result) < max_val)
    return torch.where(inside, grad, torch.zeros((), dtype=grad.dtype))


@ge_kernel("HardSigmoidGrad", one_dtype=("grads", "input_x"), accepts={"grads": _F16_F32}, widen=True)
def hard_sigmoid_grad(grads, input_x, *, alpha, beta):
    """y = grads * alpha where 0 < alpha * x + beta < 1, else 0."""
    _same_shape("grads", grads, "input_x", input_x)
    linear = input_x * alpha + beta
    return torch.where((linear > 0) & (linear < 1), grads * alpha, torch.zeros_like(grads))


@ge_kernel("HardSwishGrad", one_dtype=("grad", "x"), accepts={"grad": _FLOATS}, widen=True)
def hard_swish_grad(grad, x):
    """y = grad * (0 if x < -3, x / 3 + 0.5 if -3 <= x <= 3, 1 if x > 3)."""
    _same_shape("grad", grad, "x", x)
    local = torch.where(x < -3, torch.zeros_like(x), torch.where(x <= 3, x / 3 + 0.5, 1.0))
    return grad * local


@ge_kernel("LogSigmoidGrad", one_dtype=("grads", "features"), accepts={"grads": _F16_F32}, widen=True)
def log_sigmoid_grad(grads, features):
    """backprops = grads * (1 - sigmoid(features)) = grads * sigmoid(-features)."""
    _same_shape("grads", grads, "features", features)
    return grads * torch.sigmoid(-features)


@ge_kernel("PReluGrad", one_dtype=("grads", "features", "weights"), accepts={"grads": _F16_F32}, widen=True)
def prelu_grad(grads, features, weights):
    """dx = grads * (1 if x > 0 else weight); da = grads * x where x <= 0, else 0.

    da keeps features' shape, unreduced: CANN's PReluGrad of TorchAir's prototype says da "has the same
    dimensions and type as features", as aten._prelu_kernel_backward's grad_weight does (the sum to the
    weight's shape is a separate op). Newer CANN releases reduce da to weights' shape.
    weights: one entry or one per channel (dim 1), possibly with trailing 1-dims (aten's broadcast form).
    """
    _same_shape("grads", grads, "features", features)
    count = weights.numel()
    if count != 1 and (features.dim() < 2 or features.shape[1] != count):
        refuse(f"weights with {count} entries need 1 or features.shape[1] entries, features "
               f"{list(features.shape)}")
    shape = [1] * features.dim()
    if count != 1:
        shape[1] = count
    weights = weights.reshape(shape)
    dx = torch.where(features > 0, grads, grads * weights)
    da = torch.where(features > 0, torch.zeros_like(features), grads * features)
    return dx, da


# ---- without attrs (Relu, Relu6, Sigmoid, FastGelu, Softplus, Mish) and ThresholdV2 ----------------

ge_kernel("Relu", prepared=True)(unary_kernel("relu", torch.relu))


@ge_kernel("Relu6")
def relu6(x):
    return torch.clamp(x, 0, 6)


ge_kernel("Sigmoid", prepared=True)(unary_in_float32("sigmoid", torch.sigmoid))
ge_kernel("FastGelu", prepared=True)(unary_in_float32("fast_gelu", lambda x: x * torch.sigmoid(1.702 * x)))


# torch refuses integer inputs of these two, so widen= computes exactly what the spelled-out form did.
@ge_kernel("Softplus", widen=True)
def softplus(x):
    return torch.nn.functional.softplus(x)


@ge_kernel("SoftplusV2", widen=True)
def softplus_v2(x, *, beta, threshold):
    """CANN SoftplusV2 (REG_OP SoftplusV2: input x, output y, attrs beta=1.0, threshold=20.0):
    y = log(1 + exp(beta * x)) / beta, and y = x where beta * x > threshold; torch's softplus is
    the same definition, computed in float32 for 16-bit floats."""
    return torch.nn.functional.softplus(x, beta=beta, threshold=threshold)


@ge_kernel("SoftplusV2Grad", widen=True)
def softplus_v2_grad(input_gradients, input_features, *, beta, threshold):
    """The gradient of SoftplusV2 (REG_OP SoftplusV2Grad, "compatible with the PyTorch operator
    SoftplusGrad"; torch_npu's aclop softplus_backward runs it): input_gradients * sigmoid(beta * x),
    and input_gradients where beta * x > threshold (where the forward is x itself)."""
    scaled = input_features * beta
    return torch.where(scaled > threshold, input_gradients, input_gradients * torch.sigmoid(scaled))


@ge_kernel("Mish", widen=True)
def mish(x):
    return torch.nn.functional.mish(x)


@ge_kernel("ThresholdV2", accepts={"x": (torch.float16, torch.float32, torch.int8, torch.int32, torch.uint8,
                                         torch.int64)})
def threshold_v2(x, threshold, value):
    """y = x where x > threshold, else value (0 when the optional value input is unfed).

    The comparison is made in float32 for 16-bit floats; the values chosen are x's own and the
    replacement rounded once to x's dtype (widen= would round a float64 value twice)."""
    replacement = torch.zeros((), dtype=x.dtype) if value is None else value.to(x.dtype)
    return torch.where(opmath(x) > threshold.to(opmath(x).dtype), x, replacement)

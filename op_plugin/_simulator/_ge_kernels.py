"""CPU kernels for built-in GE ops: arithmetic, activations, matmul, normalisation, reductions.

Each kernel follows the op's CANN prototype (``REG_OP``; TorchAir's
``_ge_concrete_graph/auto_generated_ge_raw_ops.py`` lists them): inputs in prototype order,
attributes by their GE names with the prototype defaults. Data-movement ops (reshape,
transpose, concat, gather, slice, ...) live in ``_ge_kernels_shape``.

Where the NPU computes differently from eager PyTorch, the kernel follows the NPU:
``Gelu`` is the tanh approximation (CANN's Gelu has no erf mode; TorchAir lowers
``aten.gelu`` with either ``approximate`` to it). 16-bit float inputs of matmul, softmax and
normalisation are computed in float32 and rounded once, as the NPU kernels do.
"""

from __future__ import annotations

import math

import torch

from ._ge_kernels_shape import int_list  # importing it also registers the data-movement kernels
from ._ge_registry import builtin_kernel
from ._ge_types import ge_dtype_to_torch

_LOW_PRECISION = (torch.float16, torch.bfloat16)


def _opmath(tensor):
    """16-bit floats are computed in float32 (as NPU vector units do), other dtypes as they are."""
    return tensor.float() if tensor.dtype in _LOW_PRECISION else tensor


def _same_dtype(op_type, tensors):
    dtypes = {t.dtype for t in tensors if t is not None}
    if len(dtypes) > 1:
        names = ", ".join(sorted(str(d) for d in dtypes))
        raise TypeError(f"{op_type} needs inputs of one dtype (GE does not promote), got {names}")


# ---- element-wise binary ops (broadcasting, no type promotion) -------------------------------

def _binary(op_type, fn):
    def kernel(inputs, attrs, node):
        x1, x2 = inputs[0], inputs[1]
        _same_dtype(op_type, (x1, x2))
        return [fn(x1, x2)]

    kernel.__name__ = f"ge_{op_type}"
    builtin_kernel(op_type)(kernel)


def _div(x1, x2):
    if x1.dtype.is_floating_point or x1.dtype.is_complex:
        return torch.div(x1, x2)
    return torch.div(x1, x2, rounding_mode="trunc")  # TF/GE Div on integers truncates


def _real_div(x1, x2):
    result = torch.div(x1, x2)
    return result if x1.dtype.is_floating_point else result.to(x1.dtype)


for _op_type, _fn in {
    "Add": torch.add, "AddV2": torch.add, "Sub": torch.sub, "Mul": torch.mul,
    "RealDiv": _real_div, "Div": _div, "DivNoNan": lambda a, b: torch.where(b == 0, torch.zeros_like(a), _div(a, b)),
    "FloorDiv": lambda a, b: torch.div(a, b, rounding_mode="floor"),
    "TruncateDiv": lambda a, b: torch.div(a, b, rounding_mode="trunc"),
    "FloorMod": torch.remainder, "Mod": torch.fmod, "TruncateMod": torch.fmod,
    "Maximum": torch.maximum, "Minimum": torch.minimum, "Pow": torch.pow,
    "SquaredDifference": lambda a, b: (a - b) * (a - b), "Atan2": torch.atan2,
    "Equal": torch.eq, "NotEqual": torch.ne, "Less": torch.lt, "LessEqual": torch.le,
    "Greater": torch.gt, "GreaterEqual": torch.ge,
    "LogicalAnd": torch.logical_and, "LogicalOr": torch.logical_or,
    "BitwiseAnd": torch.bitwise_and, "BitwiseOr": torch.bitwise_or, "BitwiseXor": torch.bitwise_xor,
}.items():
    _binary(_op_type, _fn)


@builtin_kernel("AddN")
def _add_n(inputs, attrs, node):
    _same_dtype("AddN", inputs)
    result = inputs[0].clone()
    for tensor in inputs[1:]:
        result = result + tensor
    return [result]


@builtin_kernel("Axpy")
def _axpy(inputs, attrs, node):
    return [inputs[0] + attrs.get("alpha", 1.0) * inputs[1]]


# ---- element-wise unary ops ------------------------------------------------------------------

def _unary(op_type, fn, *, opmath=False):
    def kernel(inputs, attrs, node):
        x = inputs[0]
        if opmath:
            return [fn(_opmath(x)).to(x.dtype)]
        return [fn(x)]

    kernel.__name__ = f"ge_{op_type}"
    builtin_kernel(op_type)(kernel)


def _gelu_tanh(x):
    return torch.nn.functional.gelu(x, approximate="tanh")


for _op_type, _fn, _opm in (
    ("Relu", torch.relu, False), ("Relu6", lambda x: torch.clamp(x, 0, 6), False),
    ("Gelu", _gelu_tanh, True), ("FastGelu", lambda x: x * torch.sigmoid(1.702 * x), True),
    ("Sigmoid", torch.sigmoid, True), ("Tanh", torch.tanh, True), ("Exp", torch.exp, True),
    ("Log", torch.log, True), ("Log1p", torch.log1p, True), ("Expm1", torch.expm1, True),
    ("Sqrt", torch.sqrt, True), ("Rsqrt", torch.rsqrt, True), ("Erf", torch.erf, True),
    ("Sin", torch.sin, True), ("Cos", torch.cos, True), ("Reciprocal", torch.reciprocal, True),
    ("Softplus", torch.nn.functional.softplus, True), ("Mish", torch.nn.functional.mish, True),
    ("Neg", torch.neg, False), ("Abs", torch.abs, False), ("Square", torch.square, False),
    ("Sign", torch.sign, False), ("Floor", torch.floor, False), ("Ceil", torch.ceil, False),
    ("Round", torch.round, False), ("LogicalNot", torch.logical_not, False),
    ("IsFinite", torch.isfinite, False), ("IsNan", torch.isnan, False), ("IsInf", torch.isinf, False),
    ("ZerosLike", torch.zeros_like, False), ("OnesLike", torch.ones_like, False),
    ("Identity", lambda x: x, False), ("TensorMove", torch.clone, False), ("Snapshot", torch.clone, False),
    ("StopGradient", lambda x: x, False), ("PreventGradient", lambda x: x, False),
):
    _unary(_op_type, _fn, opmath=_opm)


@builtin_kernel("IdentityN")
def _identity_n(inputs, attrs, node):
    return list(inputs)


@builtin_kernel("GeluV2")
def _gelu_v2(inputs, attrs, node):
    x = inputs[0]
    approximate = attrs.get("approximate", "none")
    if approximate not in ("none", "tanh"):
        raise ValueError(f"GeluV2 approximate must be 'none' or 'tanh', got {approximate!r}")
    return [torch.nn.functional.gelu(_opmath(x), approximate=approximate).to(x.dtype)]


@builtin_kernel("Swish")
def _swish(inputs, attrs, node):
    x = inputs[0]
    scale = attrs.get("scale", 1.0)
    wide = _opmath(x)
    return [(wide * torch.sigmoid(scale * wide)).to(x.dtype)]


@builtin_kernel("LeakyRelu")
def _leaky_relu(inputs, attrs, node):
    return [torch.nn.functional.leaky_relu(inputs[0], attrs.get("negative_slope", 0.0))]


@builtin_kernel("Elu")
def _elu(inputs, attrs, node):
    x = inputs[0]
    alpha, scale, input_scale = attrs.get("alpha", 1.0), attrs.get("scale", 1.0), attrs.get("input_scale", 1.0)
    wide = _opmath(x)
    return [(scale * torch.where(wide > 0, wide, alpha * torch.expm1(input_scale * wide))).to(x.dtype)]


@builtin_kernel("Muls")
def _muls(inputs, attrs, node):
    return [inputs[0] * attrs["value"]]


@builtin_kernel("Adds")
def _adds(inputs, attrs, node):
    return [inputs[0] + attrs["value"]]


@builtin_kernel("ClipByValue")
def _clip_by_value(inputs, attrs, node):
    x, low, high = inputs
    return [torch.minimum(torch.maximum(x, low), high)]


@builtin_kernel("SelectV2", "Select")
def _select(inputs, attrs, node):
    condition, then, otherwise = inputs
    _same_dtype(node.type, (then, otherwise))
    condition = condition.bool()
    if node.type == "Select" and condition.dim() == 1 and then.dim() > 1:
        # TF/GE Select: a 1-D condition picks whole rows along the first dimension.
        condition = condition.reshape([-1] + [1] * (then.dim() - 1))
    return [torch.where(condition, then, otherwise)]


@builtin_kernel("Cast")
def _cast(inputs, attrs, node):
    return [inputs[0].to(ge_dtype_to_torch(attrs["dst_type"], where="Cast dst_type: "))]


# ---- softmax, matmul, normalisation ----------------------------------------------------------

def _softmax_like(fn):
    def kernel(inputs, attrs, node):
        x = inputs[0]
        axes = attrs.get("axes", [-1])
        if len(axes) != 1:
            raise ValueError(f"{node.type} over several axes {axes} is not supported by the simulator")
        out_dtype = torch.float32 if attrs.get("half_to_float", False) else x.dtype
        return [fn(_opmath(x), dim=axes[0]).to(out_dtype)]

    return kernel


builtin_kernel("SoftmaxV2")(_softmax_like(torch.softmax))
builtin_kernel("LogSoftmaxV2")(_softmax_like(torch.log_softmax))


def _matmul(x1, x2, bias, transpose_x1, transpose_x2, op_type):
    _same_dtype(op_type, (x1, x2))
    if transpose_x1:
        x1 = x1.transpose(-1, -2)
    if transpose_x2:
        x2 = x2.transpose(-1, -2)
    if x1.dtype.is_floating_point:
        # The cube unit accumulates 16-bit products in float32 and rounds the result once.
        result = torch.matmul(_opmath(x1), _opmath(x2))
        if bias is not None:
            result = result + _opmath(bias)
        return result.to(x1.dtype)
    result = torch.matmul(x1, x2)
    return result if bias is None else result + bias


@builtin_kernel("MatMul", "MatMulV2", "MatMulV3")
def _mat_mul(inputs, attrs, node):
    x1, x2 = inputs[0], inputs[1]
    bias = inputs[2] if len(inputs) > 2 else None
    if len(inputs) > 3 and inputs[3] is not None:
        raise ValueError(f"{node.type} with offset_w (quantised weights) is not supported by the simulator")
    if x1.dim() != 2 or x2.dim() != 2:
        raise ValueError(f"{node.type} takes 2-D inputs, got {list(x1.shape)} and {list(x2.shape)}")
    return [_matmul(x1, x2, bias, attrs.get("transpose_x1", False), attrs.get("transpose_x2", False), node.type)]


@builtin_kernel("BatchMatMul", "BatchMatMulV2", "BatchMatMulV3")
def _batch_mat_mul(inputs, attrs, node):
    x1, x2 = inputs[0], inputs[1]
    bias = inputs[2] if len(inputs) > 2 else None
    if len(inputs) > 3 and inputs[3] is not None:
        raise ValueError(f"{node.type} with offset_w (quantised weights) is not supported by the simulator")
    return [_matmul(x1, x2, bias, attrs.get("adj_x1", False), attrs.get("adj_x2", False), node.type)]


def _normalise(x, dims, epsilon):
    """Mean, rstd (kept dims) and normalised x over ``dims``, all in float32 for 16-bit inputs."""
    wide = _opmath(x)
    mean = wide.mean(dim=dims, keepdim=True)
    variance = ((wide - mean) ** 2).mean(dim=dims, keepdim=True)
    rstd = torch.rsqrt(variance + epsilon)
    return (wide - mean) * rstd, mean, variance, rstd


def _affine(normed, gamma, beta):
    if gamma is not None:
        normed = normed * _opmath(gamma)
    if beta is not None:
        normed = normed + _opmath(beta)
    return normed


@builtin_kernel("LayerNormV4")
def _layer_norm_v4(inputs, attrs, node):
    x, normalized_shape = inputs[0], int_list(inputs[1])
    gamma = inputs[2] if len(inputs) > 2 else None
    beta = inputs[3] if len(inputs) > 3 else None
    dims = list(range(x.dim() - len(normalized_shape), x.dim()))
    normed, mean, _variance, rstd = _normalise(x, dims, attrs.get("epsilon", 1e-5))
    y = _affine(normed, gamma, beta)
    # mean/rstd in x's dtype, as aten.native_layer_norm's meta (and so the graph) declares them
    return [y.to(x.dtype), mean.to(x.dtype), rstd.to(x.dtype)]


def _layer_norm_v1_v3(returns_rstd):
    def kernel(inputs, attrs, node):
        x, gamma, beta = inputs
        begin_norm_axis = attrs.get("begin_norm_axis", 0) % x.dim()
        begin_params_axis = attrs.get("begin_params_axis", 0) % x.dim()
        if begin_params_axis != begin_norm_axis:
            raise ValueError(f"{node.type}: begin_params_axis != begin_norm_axis is not supported by the simulator")
        dims = list(range(begin_norm_axis, x.dim()))
        normed, mean, variance, rstd = _normalise(x, dims, attrs.get("epsilon", 1e-7))
        y = _affine(normed, gamma, beta)
        second = rstd if returns_rstd else variance
        return [y.to(x.dtype), mean.to(x.dtype), second.to(x.dtype)]

    return kernel


builtin_kernel("LayerNorm")(_layer_norm_v1_v3(returns_rstd=False))
builtin_kernel("LayerNormV3")(_layer_norm_v1_v3(returns_rstd=True))


@builtin_kernel("RmsNorm")
def _rms_norm(inputs, attrs, node):
    x, gamma = inputs
    dims = list(range(x.dim() - gamma.dim(), x.dim()))
    wide = _opmath(x)
    rstd = torch.rsqrt(wide.pow(2).mean(dim=dims, keepdim=True) + attrs.get("epsilon", 1e-6))
    return [(wide * rstd * _opmath(gamma)).to(x.dtype), rstd.float()]


# ---- reductions ------------------------------------------------------------------------------

def _reduction(op_type, fn, *, from_attr=False):
    def kernel(inputs, attrs, node):
        x = inputs[0]
        axes = attrs.get("axes", []) if from_attr else int_list(inputs[1])
        keep_dims = attrs.get("keep_dims", False)
        if not axes:
            # An empty axes list reduces nothing (TF semantics) unless noop_with_empty_axes is false.
            if attrs.get("noop_with_empty_axes", True):
                return [x.clone()]
            axes = list(range(x.dim()))
        return [fn(x, axes, keep_dims)]

    kernel.__name__ = f"ge_{op_type}"
    builtin_kernel(op_type)(kernel)


def _mean(x, axes, keep):
    return _opmath(x).mean(dim=axes, keepdim=keep).to(x.dtype)


def _sum(x, axes, keep):
    if x.dtype.is_floating_point:
        return _opmath(x).sum(dim=axes, keepdim=keep).to(x.dtype)
    return x.sum(dim=axes, keepdim=keep, dtype=x.dtype)


def _amax(x, axes, keep):
    return torch.amax(x, dim=axes, keepdim=keep)


def _amin(x, axes, keep):
    return torch.amin(x, dim=axes, keepdim=keep)


def _prod(x, axes, keep):
    result = x
    for axis in sorted((a % x.dim() for a in axes), reverse=True):
        result = result.prod(dim=axis, keepdim=keep)
    return result.to(x.dtype)


def _all(x, axes, keep):
    return torch.all(x.bool(), dim=tuple(axes), keepdim=keep) if axes else x.bool().all()


def _any(x, axes, keep):
    return torch.any(x.bool(), dim=tuple(axes), keepdim=keep) if axes else x.bool().any()


for _suffix, _fn in (("Mean", _mean), ("Sum", _sum), ("Max", _amax), ("Min", _amin),
                     ("Prod", _prod), ("All", _all), ("Any", _any)):
    _reduction(f"Reduce{_suffix}", _fn)
    _reduction(f"Reduce{_suffix}D", _fn, from_attr=True)


@builtin_kernel("ReduceMeanWithCast")
def _reduce_mean_with_cast(inputs, attrs, node):
    x, axes = inputs[0], int_list(inputs[1])
    dtype_number = attrs.get("dtype")
    out_dtype = x.dtype if dtype_number in (None, 28) else ge_dtype_to_torch(dtype_number)  # 28: DT_UNDEFINED
    if not axes and attrs.get("noop_with_empty_axes", True):
        return [x.to(out_dtype)]
    axes = axes or list(range(x.dim()))
    return [_opmath(x).mean(dim=axes, keepdim=attrs.get("keep_dims", False)).to(out_dtype)]


def _arg_reduce(fn):
    def kernel(inputs, attrs, node):
        x, dimension = inputs[0], int_list(inputs[1])
        out_dtype = ge_dtype_to_torch(attrs.get("dtype", 9))  # DT_INT64 by default
        return [fn(x, dim=dimension[0]).to(out_dtype)]

    return kernel


builtin_kernel("ArgMaxV2")(_arg_reduce(torch.argmax))
builtin_kernel("ArgMin")(_arg_reduce(torch.argmin))


@builtin_kernel("Cumsum")
def _cumsum(inputs, attrs, node):
    x, axis = inputs[0], int_list(inputs[1])[0]
    if attrs.get("reverse", False):
        x = x.flip(axis)
    result = torch.cumsum(x, dim=axis, dtype=x.dtype)
    if attrs.get("exclusive", False):
        result = result - x
    if attrs.get("reverse", False):
        result = result.flip(axis)
    return [result]


@builtin_kernel("Range")
def _range(inputs, attrs, node):
    start, limit, delta = inputs
    dtype = start.dtype
    values = [t.item() for t in (start, limit, delta)]
    count = max(0, math.ceil((values[1] - values[0]) / values[2]))
    return [(values[0] + torch.arange(count, dtype=torch.float64) * values[2]).to(dtype)
            if dtype.is_floating_point else torch.arange(*values, dtype=dtype)]


def _arg_with_value(fn):
    def kernel(inputs, attrs, node):
        x = inputs[0]
        values, indices = fn(x, dim=attrs["dimension"], keepdim=attrs.get("keep_dims", False))
        return [indices.to(torch.int32), values]

    return kernel


builtin_kernel("ArgMaxWithValue")(_arg_with_value(torch.max))
builtin_kernel("ArgMinWithValue")(_arg_with_value(torch.min))


@builtin_kernel("MaskedFill")
def _masked_fill(inputs, attrs, node):
    x, mask, value = inputs
    return [torch.where(mask.bool(), value.to(x.dtype), x)]

"""Eager aten ops on npu tensors that run the GE kernel a graph runs: `GE_KERNELS` (docs/virtual-npu.md).

On an NPU, torch_npu's eager kernel of some aten ops and TorchAir's GE lowering of the same op end in
the same CANN kernel, so a single-op graph equals eager bit for bit. The virtual NPU keeps that for the
ops listed here: `fallback.implementation_for(op)` finds the op's adapter in `GE_KERNELS` (key
"aten::mm.default") and runs it on CPU views of the npu tensors' memory; each adapter maps the aten
arguments onto the GE op's inputs and attrs exactly as npugraph lowers it: TorchAir's converter
(torch_npu/dynamo/torchair/_ge_concrete_graph/ge_converter/aten/<op>.py of the pinned wheel), or op_plugin's
correction of it where TorchAir's computes something else than torch_npu's eager kernel
(`_lowering/numeric_corrections.py`: gelu, gelu_backward), and calls
`ge_op(type)`, the kernel a graph node of that type runs. Where the converter refuses an input (int8
matmul), the GE kernel does not take it (integer dtypes, mixed dtypes), or torch_npu's eager kernel and
the lowering part ways (addmm's other cases, below), the adapter answers `DECLINE` and the op runs its
CPU kernel, which gives aten's own error or result.

Each adapter's docstring names the converter it follows and the torch_npu eager kernel (Ascend/op-plugin
`op_plugin/ops/opapi/<Op>KernelNpuOpApi.cpp`, the aclnn API it calls, and the CANN kernel that API runs,
hicann/ops-nn `<family>/<op>/op_api/aclnn_*.cpp`) that make eager and graph the same kernel.

Ops that decompose before reaching the device (`aten.matmul`, `aten.softmax.int`, `aten.log_softmax.int`,
`aten.layer_norm`, `aten.linear`'s CompositeImplicit parts) arrive here as the ops below.
"""
from __future__ import annotations

import torch

from ..interpreter.calls import ge_op

DECLINE = object()  # an adapter's answer for inputs its GE kernel does not take: the CPU kernel runs

_FLOATS = (torch.float16, torch.bfloat16, torch.float32)
_HALVES = (torch.float16, torch.bfloat16)


def _floats(*tensors) -> bool:
    """All of one floating dtype the GE kernels take (aten refuses mixed dtypes itself)."""
    dtypes = {t.dtype for t in tensors}
    return len(dtypes) == 1 and next(iter(dtypes)) in _FLOATS


def _is_one(scalar) -> bool:
    """An aten Scalar argument (beta, alpha) that is the number 1."""
    return not isinstance(scalar, torch.Tensor) and scalar == 1


# ---- matrix products ----------------------------------------------------------------------------------

def mm(self, mat2):
    """ge_converter/aten/mm.py: `ge.MatMul(self, mat2, None)` (int8 refused). 16-bit floats are accumulated in
    float32 and rounded once, as the cube unit does."""
    if not _floats(self, mat2):
        return DECLINE
    return ge_op("MatMul")(self, mat2, None)


def bmm(self, mat2):
    """ge_converter/aten/bmm.py: `ge.BatchMatMul(self, mat2)` after promoting both to the output dtype (one
    dtype here: aten.bmm takes no mixed dtypes)."""
    if not _floats(self, mat2):
        return DECLINE
    return ge_op("BatchMatMul")(self, mat2)


def _bias_row(self, n: int) -> bool:
    """self is a bias row for an [m, n] product: shape (n,) or (1, n)."""
    return list(self.shape) in ([n], [1, n])


def addmm(self, mat1, mat2, *, beta=1, alpha=1):
    """The cases of `beta = alpha = 1` (linear's bias path) where torch_npu's eager addmm and TorchAir's
    lowering (ge_converter/aten/addmm.py) run the same kernels:

    - float16/bfloat16 with a bias row (shape (n,) or (1, n)): `ge.MatMulV2(mat1, mat2, self, None)`, the bias
      fused into the matmul; eager's aclnnAddmm (Ascend/op-plugin AddmmKernelNpuOpApi.cpp) takes the same
      MatMul-with-bias branch (hicann/ops-nn matmul/mat_mul_v3/op_host/op_api/aclnn_addmm.cpp:
      NeedToConvertBias, alpha = beta = 1 and a (n,) or (1, n) bias).
    - float32 with a full (m, n) self: `MatMulV2(mat1, mat2, None, None)`, `Mul(., Const(1))`, `Add(., self)`;
      aclnnAddmm's AddmmMatmulGraph: MatMul, then Add (its Muls by beta = 1 is skipped, Mul by 1 is exact).

    Declined (the CPU kernel runs): other beta/alpha, a float32 bias row (aclnnAddmm fuses it into the
    MatMul, TorchAir adds it after one), a 16-bit (m, n) self (TorchAir rounds the product to 16 bits before
    the Add, aclnnAddmm adds in float32 on Ascend910B), other shapes and dtypes."""
    if not (_floats(self, mat1, mat2) and _is_one(beta) and _is_one(alpha) and mat1.dim() == mat2.dim() == 2):
        return DECLINE
    m, n = mat1.shape[0], mat2.shape[1]
    if self.dtype in _HALVES and _bias_row(self, n):
        return ge_op("MatMulV2")(mat1, mat2, self, None)
    if self.dtype == torch.float32 and list(self.shape) == [m, n]:
        product = ge_op("MatMulV2")(mat1, mat2, None, None)
        product = ge_op("Mul")(product, torch.tensor(1, dtype=torch.float32))  # the converter's alpha Const
        return ge_op("Add")(product, self)
    return DECLINE


# ---- softmax family ---------------------------------------------------------------------------------

def softmax(self, dim, half_to_float):
    """ge_converter/aten/_softmax.py: `ge.SoftmaxV2(self, axes=[dim], half_to_float=half_to_float)`."""
    if not _floats(self) or (half_to_float and self.dtype != torch.float16):
        return DECLINE
    return ge_op("SoftmaxV2")(self, axes=[dim], half_to_float=half_to_float)


def softmax_backward(grad_output, output, dim, input_dtype):
    """ge_converter/aten/_softmax_backward_data.py: `ge.SoftmaxGrad(output, grad_output, axes=[dim])`. Eager:
    aclnnSoftmaxBackward (Ascend/op-plugin SoftmaxBackwardKernelNpuOpApi.cpp), which runs SoftmaxGrad on the
    two inputs (hicann/ops-nn activation/softmax_grad/op_api/aclnn_softmax_backward.cpp). Declined: an
    input_dtype other than the gradient's (half_to_float's backward: aclnn casts SoftmaxGrad's result, the
    converter does not)."""
    if not _floats(grad_output, output) or input_dtype != grad_output.dtype:
        return DECLINE
    return ge_op("SoftmaxGrad")(output, grad_output, axes=[dim])


def log_softmax(self, dim, half_to_float):
    """ge_converter/aten/_log_softmax.py: `ge.LogSoftmaxV2(self, axes=[dim])`. Eager: aclnnLogSoftmax
    (Ascend/op-plugin LogSoftmaxKernelNpuOpApi.cpp), which casts self to the output dtype and runs LogSoftmaxV2
    (hicann/ops-nn activation/log_softmax_v2/op_api/aclnn_log_softmax.cpp). Declined: half_to_float, which
    torch produces for CUDA only (the CPU kernel refuses it, as aten does on CPU)."""
    if not _floats(self) or half_to_float:
        return DECLINE
    return ge_op("LogSoftmaxV2")(self, axes=[dim])


def log_softmax_backward(grad_output, output, dim, input_dtype):
    """ge_converter/aten/_log_softmax_backward_data.py: `ge.LogSoftmaxGrad(grad_output, output, axis=[dim])`.
    Eager: aclnnLogSoftmaxBackward (Ascend/op-plugin LogSoftmaxBackwardKernelNpuOpApi.cpp), which runs
    LogSoftmaxGrad (hicann/ops-nn activation/log_softmax_grad/op_api/aclnn_logsoftmax_backward.cpp). Declined:
    an input_dtype other than the gradient's, as for softmax."""
    if not _floats(grad_output, output) or input_dtype != grad_output.dtype:
        return DECLINE
    return ge_op("LogSoftmaxGrad")(grad_output, output, axis=[dim])


# ---- layer norm -------------------------------------------------------------------------------------

def native_layer_norm(input, normalized_shape, weight, bias, eps):
    """ge_converter/aten/native_layer_norm.py: `ge.LayerNormV4(input, normalized_shape, gamma, beta,
    epsilon=eps)`, a missing weight (bias) filled with ones (zeros) of normalized_shape in input's dtype."""
    if not _floats(*(t for t in (input, weight, bias) if t is not None)):
        return DECLINE
    shape = [int(size) for size in normalized_shape]
    if weight is None:
        weight = torch.ones(shape, dtype=input.dtype)
    if bias is None:
        bias = torch.zeros(shape, dtype=input.dtype)
    return tuple(ge_op("LayerNormV4")(input, torch.tensor(shape, dtype=torch.int64), weight, bias, epsilon=eps))


def native_layer_norm_backward(grad_out, input, normalized_shape, mean, rstd, weight, bias, output_mask):
    """ge_converter/aten/native_layer_norm_backward.py: `ge.LayerNormGradV3(grad_out, input, rstd, mean,
    weight)`, a missing weight filled with ones of normalized_shape in input's dtype; bias is not read. Eager:
    aclnnLayerNormBackward (Ascend/op-plugin LayerNormBackwardKernelNpuOpApi.cpp), which on Ascend910B runs
    LayerNormGradV3 on the same inputs, mean and rstd cast to float32 (hicann/ops-nn
    norm/layer_norm_grad_v3/op_host/op_api/aclnn_layer_norm_backward.cpp). The outputs output_mask leaves out
    are None, as aten's. Declined: a weight of another dtype than input, non-float statistics."""
    if not _floats(grad_out, input, *(t for t in (weight,) if t is not None)):
        return DECLINE
    if mean.dtype not in _FLOATS or rstd.dtype not in _FLOATS:
        return DECLINE
    if weight is None:
        weight = torch.ones([int(size) for size in normalized_shape], dtype=input.dtype)
    grads = ge_op("LayerNormGradV3")(grad_out, input, rstd, mean, weight)
    return tuple(grad if wanted else None for grad, wanted in zip(grads, output_mask, strict=True))


# ---- activations ------------------------------------------------------------------------------------

def gelu(self, *, approximate="none"):
    """torch_npu's eager gelu calls aclnnGeluV2 with the approximate mode (Ascend/op-plugin
    op_plugin/ops/opapi/GeluOutKernelNpuOpApi.cpp); npugraph lowers it the same way
    (`_lowering/numeric_corrections.py`: `GeluV2(x, approximate="none")`; "tanh" keeps TorchAir's
    ge_converter/aten/gelu.py, `ge.Gelu(self)`, CANN's tanh form)."""
    if not _floats(self):
        return DECLINE
    if approximate == "tanh":
        return ge_op("Gelu")(self)
    return ge_op("GeluV2")(self, approximate=approximate)


def gelu_backward(grad_output, self, *, approximate="none"):
    """As npugraph lowers it: "none" `GeluGradV2(dy, x, approximate="none")` (eager's aclnnGeluBackwardV2,
    `_lowering/numeric_corrections.py`); "tanh" TorchAir's ge_converter/aten/gelu_backward.py,
    `ge.GeluGrad(grad_output, self, grad_output)` (its unused `y` input fed with grad_output)."""
    if not _floats(grad_output, self):
        return DECLINE
    if approximate == "tanh":
        return ge_op("GeluGrad")(grad_output, self, grad_output)
    return ge_op("GeluGradV2")(grad_output, self, approximate=approximate)


# aten op (name.overload) -> adapter: the aten op's arguments in, the GE kernel's results (CPU tensors) out.
GE_KERNELS = {
    "aten::mm.default": mm,
    "aten::bmm.default": bmm,
    "aten::addmm.default": addmm,
    "aten::_softmax.default": softmax,
    "aten::_softmax_backward_data.default": softmax_backward,
    "aten::_log_softmax.default": log_softmax,
    "aten::_log_softmax_backward_data.default": log_softmax_backward,
    "aten::native_layer_norm.default": native_layer_norm,
    "aten::native_layer_norm_backward.default": native_layer_norm_backward,
    "aten::gelu.default": gelu,
    "aten::gelu_backward.default": gelu_backward,
}

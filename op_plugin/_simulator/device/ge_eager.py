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
matmul) or the GE kernel does not take it (integer dtypes, mixed dtypes), the adapter answers
`DECLINE` and the op runs its CPU kernel, which gives aten's own error or result.

Ops that decompose before reaching the device (`aten.matmul`, `aten.softmax.int`, `aten.layer_norm`,
`aten.linear`'s CompositeImplicit parts) arrive here as the ops below.
"""
from __future__ import annotations

import torch

from ..interpreter.calls import ge_op

DECLINE = object()  # an adapter's answer for inputs its GE kernel does not take: the CPU kernel runs

_FLOATS = (torch.float16, torch.bfloat16, torch.float32)


def _floats(*tensors) -> bool:
    """All of one floating dtype the GE kernels take (aten refuses mixed dtypes itself)."""
    dtypes = {t.dtype for t in tensors}
    return len(dtypes) == 1 and next(iter(dtypes)) in _FLOATS


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


def softmax(self, dim, half_to_float):
    """ge_converter/aten/_softmax.py: `ge.SoftmaxV2(self, axes=[dim], half_to_float=half_to_float)`."""
    if not _floats(self) or (half_to_float and self.dtype != torch.float16):
        return DECLINE
    return ge_op("SoftmaxV2")(self, axes=[dim], half_to_float=half_to_float)


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
    "aten::_softmax.default": softmax,
    "aten::native_layer_norm.default": native_layer_norm,
    "aten::gelu.default": gelu,
    "aten::gelu_backward.default": gelu_backward,
}

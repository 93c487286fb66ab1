"""Fast calls of the kernels a transformer layer lowers to (kernels/matmul.py, activation_softmax.py,
norm.py, activation.py, shape.py, index.py), for float32/float64 data: the aten call of the kernel's path."""
from __future__ import annotations

import torch

from ..kernels.common import VIEWS_ALLOWED, fresh, int_list
from ..kernels.index import gather_v2 as _gather_kernel
from . import specialises

_WIDE = (torch.float32, torch.float64)
_PLAIN = frozenset({torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.int32, torch.int8,
                    torch.uint8, torch.bool})
_CONTIGUOUS = torch.contiguous_format


def _matmul_call(x1, x2, bias, transpose_x1, transpose_x2):
    """kernels/matmul.py `_matmul` for one float dtype shared by x1, x2 and bias."""
    if x1.dtype not in _WIDE or x2.dtype != x1.dtype or (bias is not None and bias.dtype != x1.dtype):
        return None
    matmul, addmm = torch.matmul, torch.addmm

    def operands(x1, x2):
        return (x1.transpose(-1, -2) if transpose_x1 else x1), (x2.transpose(-1, -2) if transpose_x2 else x2)

    if bias is None:
        if not (transpose_x1 or transpose_x2):
            return lambda x1, x2, *unfed: matmul(x1, x2)
        return lambda x1, x2, *unfed: matmul(*operands(x1, x2))
    if x1.dim() == 2 and x2.dim() == 2 and bias.dim() <= 1:
        return lambda x1, x2, bias, *unfed: addmm(bias, *operands(x1, x2))
    return lambda x1, x2, bias, *unfed: matmul(*operands(x1, x2)) + bias


@specialises("MatMulV2")
def mat_mul_v2(x1, x2, bias, offset_w, *, transpose_x1, transpose_x2, offset_x):
    if offset_w is not None or offset_x:
        return None
    return _matmul_call(x1, x2, bias, transpose_x1, transpose_x2)


@specialises("MatMul")
def mat_mul(x1, x2, bias, *, transpose_x1, transpose_x2):
    return _matmul_call(x1, x2, bias, transpose_x1, transpose_x2)


@specialises("BatchMatMul")
def batch_mat_mul(x1, x2, *, adj_x1, adj_x2):
    return _matmul_call(x1, x2, None, adj_x1, adj_x2)


@specialises("BatchMatMulV2")
def batch_mat_mul_v2(x1, x2, bias, offset_w, *, adj_x1, adj_x2, offset_x):
    if offset_w is not None or offset_x:
        return None
    return _matmul_call(x1, x2, bias, adj_x1, adj_x2)


@specialises("SoftmaxV2")
def softmax_v2(x, *, axes, half_to_float):
    if x.dtype not in _WIDE or len(axes) != 1:
        return None
    softmax, axis = torch.softmax, axes[0]
    return lambda x: softmax(x, axis)


@specialises("LayerNormV4", reads_values=("normalized_shape",))
def layer_norm_v4(x, normalized_shape, gamma, beta, *, epsilon):
    if x.dtype not in _WIDE or any(t is not None and t.dtype != x.dtype for t in (gamma, beta)):
        return None
    shape, norm = int_list(normalized_shape), torch.native_layer_norm
    return lambda x, normalized_shape, gamma, beta: norm(x, shape, gamma, beta, epsilon)


@specialises("GeluV2")
def gelu_v2(x, *, approximate):
    if x.dtype not in _WIDE:
        return None
    gelu = torch._C._nn.gelu
    return lambda x: gelu(x, approximate=approximate)


@specialises("Transpose", reads_values=("perm",))
def transpose(x, perm):
    dims = int_list(perm)
    return lambda x, perm: x.permute(dims).contiguous()


@specialises("Reshape", reads_values=("shape",))
def reshape(x, shape, *, axis, num_axes):
    if axis != 0 or num_axes != -1:
        return None
    dims = int_list(shape)
    if x.dtype not in _PLAIN:
        return lambda x, shape: fresh(x.reshape(dims))
    if VIEWS_ALLOWED.get():  # fixed per plan: `fresh` is then contiguous() (a view where x's layout allows)
        return lambda x, shape: x.reshape(dims).contiguous()
    return lambda x, shape: x.reshape(dims).clone(memory_format=_CONTIGUOUS)  # `fresh`: a buffer of its own


@specialises("GatherV2", reads_values=("axis",))
def gather_v2(x, indices, axis, *, batch_dims, negative_index_support):
    """index_select refuses what the kernel's range check refuses (and negative indices, which the kernel
    may wrap): on any refusal the kernel runs, to raise its own error or to wrap the negative indices."""
    dim = int_list(axis)[0]
    if batch_dims != 0 or x.dim() == 0 or indices.numel() == 0:
        return None
    dim %= x.dim()
    shape = list(x.shape[:dim]) + list(indices.shape) + list(x.shape[dim + 1:])
    select = torch.index_select

    def call(x, indices, axis):
        try:
            picked = select(x, dim, indices.reshape(-1))
        except (IndexError, RuntimeError):
            return _gather_kernel(x, indices, axis, batch_dims=batch_dims,
                                  negative_index_support=negative_index_support)
        return picked.reshape(shape).contiguous()

    return call


@specialises("GatherElements")
def gather_elements(x, index, *, dim):
    if index.dtype != torch.int64:
        return None
    gather = torch.gather
    return lambda x, index: gather(x, dim, index)


@specialises("BroadcastTo", "Expand", reads_values=("shape",))
def broadcast_to(x, shape):
    dims = int_list(shape)
    return lambda x, shape: x.expand(dims).contiguous()

"""Matrix-multiply GE ops: MatMul/MatMulV2/MatMulV3 (2-D) and BatchMatMul/V2/V3 (broadcast batches).

16-bit float inputs are multiplied with float32 accumulation and rounded once, as the cube unit does.
"""
from __future__ import annotations

import torch

from .common import opmath, same_dtype
from ..registry import builtin_kernel


def _matmul(x1, x2, bias, transpose_x1, transpose_x2, op_type):
    same_dtype(op_type, (x1, x2))
    if transpose_x1:
        x1 = x1.transpose(-1, -2)
    if transpose_x2:
        x2 = x2.transpose(-1, -2)
    if x1.dtype.is_floating_point:
        # The cube unit accumulates 16-bit products in float32 and rounds the result once.
        result = torch.matmul(opmath(x1), opmath(x2))
        if bias is not None:
            result = result + opmath(bias)
        return result.to(x1.dtype)
    result = torch.matmul(x1, x2)
    return result if bias is None else result + bias


def _operands(inputs, node):
    """x1, x2 and the optional bias; a quantised weight offset (offset_w) is refused."""
    if len(inputs) > 3 and inputs[3] is not None:
        raise ValueError(f"{node.type} with offset_w (quantised weights) is not supported by the simulator")
    return inputs[0], inputs[1], inputs[2] if len(inputs) > 2 else None


@builtin_kernel("MatMul", "MatMulV2", "MatMulV3")
def _mat_mul(inputs, attrs, node):
    x1, x2, bias = _operands(inputs, node)
    if x1.dim() != 2 or x2.dim() != 2:
        raise ValueError(f"{node.type} takes 2-D inputs, got {list(x1.shape)} and {list(x2.shape)}")
    return [_matmul(x1, x2, bias, attrs.get("transpose_x1", False), attrs.get("transpose_x2", False), node.type)]


@builtin_kernel("BatchMatMul", "BatchMatMulV2", "BatchMatMulV3")
def _batch_mat_mul(inputs, attrs, node):
    x1, x2, bias = _operands(inputs, node)
    return [_matmul(x1, x2, bias, attrs.get("adj_x1", False), attrs.get("adj_x2", False), node.type)]

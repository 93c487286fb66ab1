"""op_plugin's GE converters of torch_npu backward ops that TorchAir ships none for, that a graph-mode
training step through torch_npu's ops reaches (issue 23 item 4).

- `npu::npu_linear_backward(grad, input, weight) -> (grad_input, grad_weight)`: torch_npu's autograd
  formula of `npu_linear` (op-plugin derivatives.yaml: `input, weight: npu_linear_backward(grad, input,
  weight)`). TorchAir has no converter (it would auto-generate a custom node `NpuLinearBackward`, which no
  CANN IR defines: GE mode fails on an NPU too). Lowered as the two products torch_npu's eager op computes:
  `grad_input = MatMul(grad, weight)` ([M, N] x [N, K]) and `grad_weight = MatMul(grad^T, input)`
  (transpose_x1) ([N, M] x [M, K]), as TorchAir lowers `npu_linear` itself (MatMul, transpose_x2).
"""
from __future__ import annotations

from .cases import F16, F32, Support
from .registry import library_converter
from .torchair_api import TorchAirApi


@library_converter("npu::npu_linear_backward", cases=[Support(F32(3, 5), F32(3, 8), F32(5, 8)),
                                                      Support(F16(16, 32), F16(16, 64), F16(32, 64))])
def npu_linear_backward(ta: TorchAirApi, grad, input, weight, meta_outputs=None):  # the op's names
    """(MatMul(grad, weight), MatMul(grad, input, transpose_x1=True))."""
    if grad.rank != 2 or input.rank != 2 or weight.rank != 2:
        raise NotImplementedError(f"npu::npu_linear_backward: op_plugin lowers 2-D grad, input and weight (npu_linear "
                                  f"takes 2-D ones); got ranks {grad.rank}, {input.rank}, {weight.rank}")
    grad_input = ta.ge.MatMul(grad, weight, None, transpose_x1=False, transpose_x2=False)
    grad_weight = ta.ge.MatMul(grad, input, None, transpose_x1=True, transpose_x2=False)
    return grad_input, grad_weight

"""op_plugin's GE converters of torch_npu ops TorchAir ships none for, that graph-mode code calls
(issue 23 item 4): npu_format_cast and npu_top_k_top_p.

- `npu::npu_format_cast(self, acl_format)`: a layout cast (ND, NZ, ...) with no effect on the tensor's
  logical values. GE keeps physical formats itself (it inserts TransData where an op needs another
  layout), so the graph holds a plain copy, `TensorMove(self)`: the same values, a buffer of its own (the
  op returns a new tensor). `customize_dtype` / `input_dtype` (a storage dtype other than the tensor's)
  raise, naming the op.
- `npu::npu_top_k_top_p`: CANN computes it with ApplyTopKTopPWithSorted after a Sort (ops-nn
  `index/apply_top_k_top_p_with_sorted`), which CANN publishes as an aclnn kernel only, with no GE IR
  prototype (REG_OP) and no TorchAir converter: GE mode cannot lower it, on an Ascend host either. The
  converter raises that, naming the op, instead of TorchAir's generic failure.
"""
from __future__ import annotations

from .cases import BF16, F16, F32, Support
from .registry import library_converter
from .torchair_api import TorchAirApi


@library_converter("npu::npu_format_cast", cases=[Support(F32(4, 8), 29), Support(F16(2, 16, 16), 2),
                                                  Support(BF16(3, 32), 29)])
def npu_format_cast(ta: TorchAirApi, self, acl_format, *, customize_dtype=None, input_dtype=None,
                    meta_outputs=None):
    """TensorMove(self): a format cast changes no logical value; GE manages the physical layout."""
    del acl_format, meta_outputs
    if customize_dtype is not None or input_dtype is not None:
        raise NotImplementedError("npu::npu_format_cast: customize_dtype/input_dtype (a storage dtype other than the "
                                  "tensor's) cannot be lowered by op_plugin")
    return ta.ge.TensorMove(self)


@library_converter("npu::npu_top_k_top_p")
def npu_top_k_top_p(ta: TorchAirApi, logits, p=None, k=None, meta_outputs=None):
    raise NotImplementedError(
        "npu::npu_top_k_top_p: GE mode cannot lower it: CANN's ApplyTopKTopPWithSorted is an aclnn kernel with no "
        "GE IR prototype (REG_OP) and TorchAir has no converter for it; call it outside the compiled region "
        "(torch.compiler.disable) or use torch ops (sort, softmax, cumsum, masked_fill) in the graph")

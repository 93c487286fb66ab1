"""CPU reference kernels of torch_npu's npu_quant_scatter and npu_quant_scatter_ (in place).

On an NPU both call aclnnInplaceQuantScatter(V2), the CANN kernel their GE type QuantUpdateScatter runs
in graph mode, so each maps its arguments onto that GE kernel,
``ge_op("QuantUpdateScatter")`` (``interpreter/kernels/index/scatter.py``: semantics and refusals documented
there and in docs/torch-npu-ops.md) and names the op in every refusal:

* ``dst_type`` (torch's ScalarType number) must be self's dtype: None or 1 int8, 23 float8_e5m2, 24
  float8_e4m3fn; 290 (torch_npu's hifloat8, self holding its bits as int8/uint8) has no CPU dtype: refused.
* ``round_mode`` None is "rint", as TorchAir's converter reads it.
"""
from __future__ import annotations

import torch

from ..interpreter.calls import ge_op
from .checks import named_refusals, writable

_DST = {None: torch.int8, 1: torch.int8, 23: torch.float8_e5m2, 24: torch.float8_e4m3fn}
_HIFLOAT8 = 290


def _check(op, self, indices, dst_type):
    if dst_type == _HIFLOAT8:
        raise NotImplementedError(f"npu::{op}: dst_type=290 (hifloat8) has no CPU dtype; not simulated")
    if dst_type not in _DST:
        raise ValueError(f"npu::{op}: dst_type={dst_type}: CANN takes int8 (1), float8_e5m2 (23), float8_e4m3fn "
                         "(24) or hifloat8 (290)")
    if self.dtype != _DST[dst_type]:
        raise ValueError(f"npu::{op}: self is {self.dtype} but dst_type={dst_type} asks for {_DST[dst_type]}; "
                         "pass self in the quantised dtype")
    if indices.dtype not in (torch.int32, torch.int64):
        raise ValueError(f"npu::{op}: indices must be int32 or int64, got {indices.dtype}")


@named_refusals("npu_quant_scatter")
def npu_quant_scatter(self, indices, updates, quant_scales, quant_zero_points=None, axis=-2, quant_axis=-1,
                      reduce="update", dst_type=None, round_mode="rint"):
    _check("npu_quant_scatter", self, indices, dst_type)
    return ge_op("QuantUpdateScatter")(self, indices, updates, quant_scales, quant_zero_points, reduce=reduce,
                                       axis=axis, quant_axis=quant_axis, round_mode=round_mode or "rint")


@named_refusals("npu_quant_scatter_")
def npu_quant_scatter_(self, indices, updates, quant_scales, quant_zero_points=None, axis=-2, quant_axis=-1,
                       reduce="update", dst_type=None, round_mode="rint"):
    _check("npu_quant_scatter_", self, indices, dst_type)
    writable("npu_quant_scatter_", self=self)
    out = ge_op("QuantUpdateScatter")(self, indices, updates, quant_scales, quant_zero_points, reduce=reduce,
                                      axis=axis, quant_axis=quant_axis, round_mode=round_mode or "rint")
    return self.copy_(out)


KERNELS = {
    "npu_quant_scatter": npu_quant_scatter,
    "npu_quant_scatter_": npu_quant_scatter_,
}

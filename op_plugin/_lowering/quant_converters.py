"""op_plugin's converter of torch_npu's npu_add_rms_norm_quant, which TorchAir does not lower (GE mode on an
Ascend host cannot lower it without this): CANN's GE type AddRmsNormQuant, which aclnnAddRmsNormQuant runs
(see its docstring). npu_quant_matmul and the other quantisation ops use TorchAir's own converters (their
`import torch_npu` is served by the CPU-host stand-in, `_simulator/hosting/converter_torch_npu.py`).

The target is named as a string: torch_npu's ops are defined on a CPU host only after op_plugin's
lowering is imported (`registry` resolves "npu::npu_add_rms_norm_quant" when it installs).

One correction (`when="corrects"`, on every host): the MX quantisation ops' float8_e8m0 scales. torch-npu
2.13.0's Meta functions (op_plugin/meta/_meta_registrations.py) return them as uint8, and so does its eager op;
TorchAir's converters mark those GE outputs DT_FLOAT8_E8M0, and TorchAir keeps a "quant dtype" over the FX
meta's (`Tensor.set_torch_dtype` in ge/_ge_graph.py), so a compiled graph returned torch.float8_e8m0fnu where
eager returns uint8 (on an NPU too). Corrected: each such output is bitcast to DT_UINT8 (the same bytes).
"""
from __future__ import annotations

import torch

from .cases import F16, F32, Support, T
from .registry import aten_converter
from .torchair_api import TorchAirApi

_INT8_DEFAULT = 1  # torch.int8's ScalarType number: torch_npu's default output dtype


@aten_converter("npu::npu_add_rms_norm_quant", when="missing", cases=[
    Support(F16(2, 8), F16(2, 8), F16(8), F32(8, value_range=(0.01, 0.1)), None),
    Support(F16(2, 8), F16(2, 8), F16(8), F32(8, value_range=(0.5, 2)), F32(8), beta=F16(8), div_mode=False)])
def npu_add_rms_norm_quant(ta: TorchAirApi, x1, x2, gamma, scales1, zero_points1=None, beta=None, scales2=None,
                           zero_points2=None, *, axis=-1, epsilon=1e-6, div_mode=True, dst_type=None,
                           meta_outputs=None):
    """TorchAir has no converter: the CANN GE type aclnnAddRmsNormQuant runs, AddRmsNormQuant (ops-nn
    norm/add_rms_norm_quant/op_graph/add_rms_norm_quant_proto.h: inputs x1, x2, gamma, scales1, scales2,
    zero_points1, zero_points2, beta; attrs axis, epsilon, div_mode, dst_type), int8 outputs only."""
    if dst_type not in (None, _INT8_DEFAULT):
        raise NotImplementedError(f"npu_add_rms_norm_quant: dst_type {dst_type}: op_plugin lowers int8 outputs only")
    compat, attr = ta._module("_ge_concrete_graph.compat_ir"), ta._module("ge.attr")
    # Without an IrDef, ge_op keeps an absent optional input as an empty slot (named), as the REG_OP orders them.
    inputs = {"x1": x1, "x2": x2, "gamma": gamma, "scales1": scales1, "scales2": scales2,
              "zero_points1": zero_points1, "zero_points2": zero_points2, "beta": beta}
    attrs = {"axis": attr.Int(axis), "epsilon": attr.Float(epsilon), "div_mode": attr.Bool(div_mode),
             "dst_type": attr.Int(ta.graph.torch_dtype_value_to_ge_type(_INT8_DEFAULT))}
    return compat.ge_op(op_type="AddRmsNormQuant", inputs=inputs, attrs=attrs, outputs=["y1", "y2", "x"])


# The MX quant ops whose TorchAir converter leaves float8_e8m0 scale outputs (the wheel's Meta makes them uint8),
# each with the cases TorchAir declares for its converter, or valid ones of ours (grouped declares none).
_E8M0_SCALE_OPS = {
    "npu::npu_dynamic_mx_quant": [Support(F16(8, 256))],
    "npu::npu_dynamic_mx_quant_with_dual_axis": [Support(F16(8, 256))],
    "npu::npu_dynamic_block_mx_quant": [Support(F16(8, 256))],
    "npu::npu_dynamic_dual_level_mx_quant": [Support(F16(8, 256))],
    # TorchAir's own cases of these two have a last dim of 3, which an fp4 output refuses (two per byte): 64 here
    "npu::npu_rms_norm_dynamic_mx_quant": [Support(F16(4, 64), F16(64)), Support(F16(4, 64), F16(64), beta=F16(64))],
    "npu::npu_add_rms_norm_dynamic_mx_quant": [Support(F16(1, 2, 64), F16(1, 2, 64), F16(64)),
                                               Support(F16(1, 2, 64), F16(1, 2, 64), F16(64), beta=F16(64))],
    "npu::npu_swiglu_mx_quant": [Support(F16(2, 8))],
    "npu::npu_grouped_dynamic_mx_quant": [Support(F16(100, 16), T([10, 10, 75, 100], dtype=torch.int32))],
}


def mx_scales_as_uint8(ta: TorchAirApi, *args, meta_outputs=None, **kwargs):
    """TorchAir's lowering, each DT_FLOAT8_E8M0 output bitcast to DT_UINT8: torch-npu 2.13.0's schema and Meta
    give the e8m0 scales as uint8 (`mxscale = input_dummy.new_empty(mxscale_shape, dtype=torch.uint8)` in
    npu_dynamic_mx_quant's Meta, likewise for the others), which is what eager returns; TorchAir's converters set
    the outputs' desc to DT_FLOAT8_E8M0 (custom/npu_dynamic_mx_quant.py: `mxscale.desc.dtype =
    ProtoDataType.DT_FLOAT8_E8M0`) and TorchAir keeps that dtype over the meta's, so the graph handed back
    torch.float8_e8m0fnu."""
    outputs = ta.original(*args, meta_outputs=meta_outputs, **kwargs)
    graph = ta.graph
    e8m0 = graph.ProtoDataType.DT_FLOAT8_E8M0

    def as_uint8(value):
        if isinstance(value, graph.Tensor) and value.desc.dtype == e8m0:
            return ta.ge.Bitcast(value, type=graph.DataType.DT_UINT8)
        return value

    if isinstance(outputs, (tuple, list)):
        return type(outputs)(as_uint8(value) for value in outputs)
    return as_uint8(outputs)


for _op, _cases in _E8M0_SCALE_OPS.items():
    aten_converter(_op, when="corrects", cases=_cases)(mx_scales_as_uint8)
del _op, _cases

"""op_plugin's converters of torch_npu's quantisation ops: npu_quant_matmul (completes TorchAir's) and
npu_add_rms_norm_quant (TorchAir has none).

TorchAir's converter of `npu::npu_quant_matmul` starts with `import torch_npu` (to compare the
fp4/e8m0 dtype arguments with `torch_npu.float4_e2m1fn_x2`), which a CPU host never imports: there
every call fails with ModuleNotFoundError, the int8 W8A8 case included. The completion lowers that
case itself, to exactly the graph TorchAir's converter builds for it off arch35 (Atlas A2/A3):
`QuantBatchMatmulV3(x1, x2, scale, offset, bias, pertoken_scale, dtype=<output dtype>,
transpose_x1=False, transpose_x2=False)`, the output dtype int8 when `output_dtype` is None. Every
other case (int4-in-int32, fp8/fp4/MX dtypes, group sizes, y_scale, arch35's QuantBatchMatmulV4)
goes to TorchAir's converter.

npu_add_rms_norm_quant has no TorchAir converter (GE mode on an Ascend host cannot lower it): it is
lowered to CANN's GE type AddRmsNormQuant, which aclnnAddRmsNormQuant runs (see its docstring).

The targets are named as strings: torch_npu's ops are defined on a CPU host only after op_plugin's
lowering is imported (`registry` resolves "npu::npu_quant_matmul" when it installs).
"""
from __future__ import annotations

import torch

from .cases import F16, F32, I32, Support, T
from .registry import aten_converter
from .torchair_api import TorchAirApi

_INT8_DEFAULT = 1  # torch.int8's ScalarType number: torch_npu's default output dtype
_X1 = T([[-128, 127, 3, -7], [5, -1, 0, 127], [64, -64, 32, -32]], dtype=torch.int8)
_X2 = T([[1, -2, 127], [-128, 3, 4], [7, 7, -7], [0, 1, -1]], dtype=torch.int8)
# npu_trans_quant_param's int64 of 2^-5, 2^-6, 2^-7: the float32 bits | 1 << 46
_PACKED_SCALE = T([bits | 1 << 46 for bits in (0x3D000000, 0x3C800000, 0x3C000000)], dtype=torch.int64)


@aten_converter("npu::npu_quant_matmul", when="completes", cases=[
    Support(_X1, _X2, F32(3, value_range=(1e-3, 1e-2)), pertoken_scale=F32(3, value_range=(0.5, 2)),
            output_dtype=torch.bfloat16),
    Support(_X1, _X2, F32(3, value_range=(1e-3, 1e-2)), pertoken_scale=F32(3, value_range=(0.5, 2)), bias=I32(3),
            output_dtype=torch.float16),
    Support(_X1, _X2, _PACKED_SCALE, bias=I32(3), output_dtype=torch.float16)])
def npu_quant_matmul(ta: TorchAirApi, x1, x2, scale, *, offset=None, pertoken_scale=None, bias=None,
                     output_dtype=None, x1_dtype=None, x2_dtype=None, pertoken_scale_dtype=None, scale_dtype=None,
                     group_sizes=None, y_scale=None, meta_outputs=None):
    """int8 x int8 off arch35: QuantBatchMatmulV3 as TorchAir builds it; anything else: TorchAir's."""
    kwargs = {"offset": offset, "pertoken_scale": pertoken_scale, "bias": bias, "output_dtype": output_dtype,
              "x1_dtype": x1_dtype, "x2_dtype": x2_dtype, "pertoken_scale_dtype": pertoken_scale_dtype,
              "scale_dtype": scale_dtype, "group_sizes": group_sizes, "y_scale": y_scale}
    int8 = ta.graph.DataType.DT_INT8
    plain = all(value is None for value in (x1_dtype, x2_dtype, pertoken_scale_dtype, scale_dtype, group_sizes,
                                            y_scale))
    if not plain or x1.dtype != int8 or x2.dtype != int8 or ta.is_arch35():
        return ta.original(x1, x2, scale, **kwargs, meta_outputs=meta_outputs)
    dtype = ta.graph.torch_dtype_value_to_ge_type(_INT8_DEFAULT if output_dtype is None else output_dtype)
    return ta.ge.QuantBatchMatmulV3(x1, x2, scale, offset=offset, bias=bias, pertoken_scale=pertoken_scale,
                                    dtype=dtype, transpose_x1=False, transpose_x2=False)


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
    compat, attr = ta._module("_ge_concrete_graph.compat_ir"), ta._module("ge.attr")  # pylint: disable=protected-access
    # Without an IrDef, ge_op keeps an absent optional input as an empty slot (named), as the REG_OP orders them.
    inputs = {"x1": x1, "x2": x2, "gamma": gamma, "scales1": scales1, "scales2": scales2,
              "zero_points1": zero_points1, "zero_points2": zero_points2, "beta": beta}
    attrs = {"axis": attr.Int(axis), "epsilon": attr.Float(epsilon), "div_mode": attr.Bool(div_mode),
             "dst_type": attr.Int(ta.graph.torch_dtype_value_to_ge_type(_INT8_DEFAULT))}
    return compat.ge_op(op_type="AddRmsNormQuant", inputs=inputs, attrs=attrs, outputs=["y1", "y2", "x"])

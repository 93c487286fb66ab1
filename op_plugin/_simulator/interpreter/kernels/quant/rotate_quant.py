"""RotateQuant (ops-nn ``matmul/rotate_quant``, the A2/A3 int8/int4 kernel) and FlatQuant (ops-nn
``quant/flat_quant``, the A2/A3 int4 per-token kernel): a rotation (RotateQuant: x blocks times ``rotation``;
FlatQuant: the Kronecker product ``p1 @ (x[k] @ p2)``) followed by per-row symmetric quantisation.

Written from the ops' READMEs and kernels, not from op_plugin's torch_npu reference kernels:

* int4 is held as ``torch.int4`` (one value per byte, ``formats.as_int4``); a Bitcast to a wider type packs 8 of
  them to an int32, element i in bits 4i..4i+3 (``formats.pack_int4``; ops-nn's int4 goldens,
  matmul_quant_util.py and dynamic_quant_update_scatter_v2's golden.py, lay them out so).
* The matmuls accumulate in float32 and write fp16/bf16 through the cube's fixpipe (F322F16 / F322BF16),
  taken as round-half-even (the fixpipe's rounding is not documented); then the vector unit works in float32.

MX (fp4/fp8 per-group) outputs and the Ascend 950 paths are refused by name.
"""
from __future__ import annotations

import torch

from ....._ge.reg_op import parse_reg_ops
from ...registry import ge_kernel, refuse
from ...lowbit_formats import as_int4

_HALF = (torch.float16, torch.bfloat16)
_GE_INT8, _GE_INT32, _GE_INT4, _GE_HIFLOAT8, _GE_FP4_E2M1 = 2, 3, 29, 34, 40

# ops-nn quant/flat_quant/op_graph/flat_quant_proto.h (the pinned
# TorchAir's docstring names the attr dst_type; its raw op writes dst_dtype, as ops-nn does) and TorchAir's own
# RotateQuant docstring with C++'s `false` (it writes `False`, which is no C++ default; its ge_op leaves attrs
# at their default off the node).
_PROTOTYPES = parse_reg_ops('''
"""REG_OP(RotateQuant)
    .INPUT(x, TensorType({DT_FLOAT16, DT_BF16}))
    .INPUT(rotation, TensorType({DT_FLOAT16, DT_BF16}))
    .OPTIONAL_INPUT(alpha, TensorType({DT_BF16}))
    .OUTPUT(y, TensorType({DT_INT8, DT_INT4}))
    .OUTPUT(scale, TensorType({DT_FLOAT32}))
    .ATTR(y_dtype, Int, 0)
    .ATTR(axis, Int, -1)
    .ATTR(round_mode, String, "rint")
    .ATTR(scale_alg, Int, 0)
    .ATTR(dst_type_max, Float, 0.0)
    .ATTR(transpose_y, Bool, false)
    .OP_END_FACTORY_REG(RotateQuant)
"""
"""REG_OP(FlatQuant)
    .INPUT(x, TensorType({DT_FLOAT16, DT_BF16}))
    .INPUT(kronecker_p1, TensorType({DT_FLOAT16, DT_BF16}))
    .INPUT(kronecker_p2, TensorType({DT_FLOAT16, DT_BF16}))
    .OPTIONAL_INPUT(group_list, TensorType({DT_INT64}))
    .OUTPUT(out, TensorType({DT_INT4, DT_FLOAT4_E2M1}))
    .OUTPUT(quant_scale, TensorType({DT_FLOAT, DT_FLOAT8_E8M0}))
    .ATTR(clip_ratio, Float, 1)
    .ATTR(dst_dtype, Int, DT_INT4)
    .ATTR(dst_type_max, Float, 0.0)
    .ATTR(group_list_type, Int, 0)
    .OP_END_FACTORY_REG(FlatQuant)
"""
''', {"DT_FLOAT8_E5M2": 35, "DT_INT4": _GE_INT4})


def _cube(a, b, out_dtype):
    """A cube matmul: float32 accumulation, written through the fixpipe as `out_dtype` (round half to even)."""
    return torch.matmul(a.float(), b.float()).to(out_dtype)


@ge_kernel("RotateQuant", prototype=_PROTOTYPES["RotateQuant"], accepts={"x": _HALF, "rotation": _HALF},
           one_dtype=("x", "rotation"))
def rotate_quant(x, rotation, alpha, *, y_dtype, axis, round_mode, scale_alg, dst_type_max, transpose_y):
    """The A2/A3 kernel (ops-nn matmul/rotate_quant/op_kernel/rotate_quant.h): Y = x.reshape(-1, K) @ rotation
    written as x's dtype; per row f = C / max|Y| (C 127 int8, 7 int4), y = rint(Y * f) (CAST_RINT), scale =
    max|Y| * float32(1 / C)."""
    if y_dtype not in (_GE_INT8, _GE_INT4):
        refuse(f"y_dtype={y_dtype}: only DT_INT8 (2) and DT_INT4 (29) are simulated (the fp4/fp8 MX outputs are "
               "Ascend 950's)")
    if alpha is not None or scale_alg != 0 or dst_type_max != 0.0 or transpose_y:
        refuse("alpha, scale_alg, dst_type_max and transpose_y are the Ascend 950 MX path's (A2/A3: None, 0, 0.0, "
               "false)")
    if round_mode != "rint":
        refuse(f"round_mode={round_mode!r}: the A2/A3 kernel rounds with CAST_RINT whatever the attr says; "
               "only 'rint' is simulated")
    if x.dim() != 2 or rotation.dim() != 2 or rotation.shape[0] != rotation.shape[1]:
        refuse(f"x {list(x.shape)} must be 2-D and rotation {list(rotation.shape)} square")
    if axis not in (-1, 1):
        refuse(f"axis={axis}: the A2/A3 kernel quantises along the last dim (-1 or 1)")
    rows, n, k = x.shape[0], x.shape[1], rotation.shape[0]
    if n % k or n % 8:
        refuse(f"x's last dim {n} must be a multiple of rotation's {k} and of 8")
    rotated = _cube(x.reshape(-1, k), rotation, x.dtype).reshape(rows, n).float()
    if not bool(torch.isfinite(rotated).all()):
        refuse("x @ rotation is not finite in x's dtype: the kernel's scale is then not defined")
    top = torch.tensor(127.0 if y_dtype == _GE_INT8 else 7.0)
    row_max = rotated.abs().amax(dim=-1)
    if bool((row_max == 0).any()):
        refuse("a row of x @ rotation is all zeros: the kernel computes C / 0 and 0 * inf, undefined")
    quantised = torch.round(rotated * (top / row_max).unsqueeze(-1))   # float32 Div, Mul, CAST_RINT
    scale = row_max * (torch.tensor(1.0) / top)                            # float32(1 / C), then Mul
    if y_dtype == _GE_INT8:
        return quantised.clamp(-128, 127).to(torch.int8), scale
    return as_int4(quantised.clamp(-8, 7)), scale


@ge_kernel("FlatQuant", prototype=_PROTOTYPES["FlatQuant"], accepts={"x": _HALF}, one_dtype=("x", "kronecker_p1",
                                                                                             "kronecker_p2"))
def flat_quant(x, kronecker_p1, kronecker_p2, group_list, *, clip_ratio, dst_dtype, dst_type_max, group_list_type):
    """The A2/A3 per-token int4 kernel (ops-nn flat_quant_cube.h, flat_quant_vec.h): per k, x' = x[k] @ p2
    written as x's dtype, x'' = p1 @ x' written as float16; m = max|x''|; quant_scale = m * clip / 7,
    out = rint(float16(x'' * ((7 / clip) / m))) saturated to int4 (m = 0: the factor is 7); float32 scalars."""
    if dst_dtype == _GE_FP4_E2M1:
        refuse("dst_dtype=40 (DT_FLOAT4_E2M1): the per-group MX fp4 output is not simulated")
    if dst_dtype not in (_GE_INT32, _GE_INT4) or dst_type_max != 0.0:
        refuse(f"dst_dtype={dst_dtype}, dst_type_max={dst_type_max}: the int4 output takes DT_INT4/DT_INT32 and 0.0")
    if group_list is not None:
        refuse("group_list (quantising only the first rows of x) is not simulated")
    clip = torch.tensor(clip_ratio, dtype=torch.float32)
    if not 0.0 < float(clip) <= 1.0:
        refuse(f"clip_ratio={clip_ratio} is outside (0, 1]")
    if x.dim() != 3 or tuple(kronecker_p1.shape) != (x.shape[1],) * 2 or tuple(kronecker_p2.shape) != (x.shape[2],) * 2:
        refuse(f"x {list(x.shape)} must be [K, M, N] with kronecker_p1 [M, M] and kronecker_p2 [N, N]")
    if x.shape[2] % 2:
        refuse(f"x's last dim {x.shape[2]} must be even (int4 output)")
    wide = torch.matmul(kronecker_p1.float(), _cube(x, kronecker_p2, x.dtype).float())
    if bool((wide.abs() > torch.finfo(torch.float16).max).any()) or not bool(torch.isfinite(wide).all()):
        refuse("kronecker_p1 @ x @ kronecker_p2 leaves float16's range: the kernel writes it as float16")
    rotated = wide.to(torch.float16).float()
    peak = rotated.abs().amax(dim=(1, 2))
    seven = torch.tensor(7.0)
    factor = torch.where(peak != 0, (seven / clip) / peak, seven)
    quant_scale = peak * clip / seven
    halves = (rotated * factor.reshape(-1, 1, 1)).to(torch.float16).float()
    return as_int4(torch.round(halves).clamp(-8, 7)), quant_scale

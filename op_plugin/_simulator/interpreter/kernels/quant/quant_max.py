"""QuantMax and GroupedQuantMax (CANN ops-nn ``quant/quant_max``, ``quant/grouped_quant_max``, Ascend 950 fp8
outputs): y = fp8(x * scale) and amax = max|x|, per group of rows with a group_list.

Written from the ops' READMEs and kernels, not from op_plugin's torch_npu reference kernels: the fp8 cast is
``formats.fp8_saturating_rint`` (the kernels' ``CastTrait{SatMode::SAT, RoundMode::CAST_RINT}``; asc-devkit's
asc_float2e5m2 doc defines the saturating cast: round half to even, a finite value beyond the format's largest
gives that largest (57344 e5m2, 448 e4m3fn), +-inf gives +-largest, NaN gives 0).

hifloat8 outputs and round modes other than "rint" are refused by name.
"""
from __future__ import annotations

import torch

from ....._ge.reg_op import parse_reg_ops
from ...registry import ge_kernel, refuse
from ...lowbit_formats import FP8, fp8_saturating_rint

_FLOATS = (torch.float32, torch.float16, torch.bfloat16)
_GE_INT4, _GE_HIFLOAT8 = 29, 34

# ops-nn quant/grouped_quant_max/op_graph/grouped_quant_max_proto.h (TorchAir emits the type from inside
# QuantMax's raw op, with no REG_OP text of its own).
_PROTOTYPES = parse_reg_ops('''
"""REG_OP(GroupedQuantMax)
    .INPUT(x, TensorType({DT_FLOAT, DT_FLOAT16, DT_BF16}))
    .INPUT(scale, TensorType({DT_FLOAT}))
    .INPUT(group_list, TensorType({DT_INT64}))
    .OUTPUT(y, TensorType({DT_HIFLOAT8, DT_FLOAT8_E5M2, DT_FLOAT8_E4M3FN}))
    .OUTPUT(amax, TensorType({DT_FLOAT, DT_FLOAT16, DT_BF16}))
    .ATTR(round_mode, String, "rint")
    .ATTR(dst_type, Int, DT_FLOAT8_E5M2)
    .OP_END_FACTORY_REG(GroupedQuantMax)
"""
''', {"DT_FLOAT8_E5M2": 35, "DT_INT4": _GE_INT4})


def _fp8_out(what, number, round_mode):
    if int(number) == _GE_HIFLOAT8:
        refuse(f"{what}=34 (DT_HIFLOAT8): hifloat8 outputs are not simulated (its 'hybrid' rounding is stochastic)")
    if int(number) not in FP8:
        refuse(f"{what}={number} is not 35 (DT_FLOAT8_E5M2), 36 (DT_FLOAT8_E4M3FN) or 34 (DT_HIFLOAT8)")
    if round_mode != "rint":
        refuse(f"round_mode={round_mode!r}: fp8 outputs take 'rint' only (CANN's QuantMax doc)")
    return int(number)


def _check_amax_defined(x):
    if x.numel() == 0:
        refuse("x is empty: the kernel's amax starts at -1.0 and CANN does not document an empty x")
    if bool(torch.isnan(x).any()):
        refuse("x holds NaN: CANN's Max of a NaN is not documented (amax)")


@ge_kernel("QuantMax", accepts={"x": _FLOATS, "scale": (torch.float32,)})
def quant_max(x, scale, group_list, *, round_mode, dst_type):
    """y = Cast(float32(x) * scale, fp8, SAT + rint), amax = max|x| (ops-nn quant_max_per_tensor_regbase.h)."""
    number = _fp8_out("dst_type", dst_type, round_mode)
    if group_list is not None:
        refuse("group_list on QuantMax: TorchAir lowers a grouped npu_quant_max to GroupedQuantMax")
    if tuple(scale.shape) != (1,) or not 1 <= x.dim() <= 8:
        refuse(f"scale of shape {list(scale.shape)} is not [1] or x {list(x.shape)} has not 1 to 8 dims")
    _check_amax_defined(x)
    y = fp8_saturating_rint(x.float() * scale.float()[0], number)
    return y, x.float().abs().amax().reshape(1).to(x.dtype)


@ge_kernel("GroupedQuantMax", prototype=_PROTOTYPES["GroupedQuantMax"],
           accepts={"x": _FLOATS, "scale": (torch.float32,), "group_list": (torch.int64,)})
def grouped_quant_max(x, scale, group_list, *, round_mode, dst_type):
    """Rows group_list[g-1]:group_list[g] of x quantised with scale[g]; amax[g] = max|x_g| (0 for an empty
    group: the kernel starts each group's max at 0.0, grouped_quant_max_regbase.h)."""
    number = _fp8_out("dst_type", dst_type, round_mode)
    ends = [int(v) for v in group_list.reshape(-1).tolist()]
    if not 2 <= x.dim() <= 8 or scale.dim() != 1 or scale.shape[0] != len(ends):
        refuse(f"x {list(x.shape)} must have 2 to 8 dims and scale {list(scale.shape)} one value per group "
               f"({len(ends)})")
    if any(b < a for a, b in zip([0, *ends], ends, strict=False)) or not ends or ends[-1] != x.shape[0]:
        refuse(f"group_list {ends} must rise from 0 to x's dim 0 ({x.shape[0]}): CANN defines no other")
    _check_amax_defined(x)
    wide, starts = x.float(), [0, *ends[:-1]]
    rows = [wide[a:b] * scale.float()[g] for g, (a, b) in enumerate(zip(starts, ends, strict=True))]
    amax = [wide[a:b].abs().amax() if b > a else wide.new_zeros(()) for a, b in zip(starts, ends, strict=True)]
    return fp8_saturating_rint(torch.cat(rows), number), torch.stack(amax).to(x.dtype)

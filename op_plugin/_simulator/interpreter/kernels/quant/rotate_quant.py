"""Quantisation GE ops with fp8 and int4 outputs: QuantMax and GroupedQuantMax (ops-nn ``quant/quant_max``,
``quant/grouped_quant_max``, Ascend 950 fp8 outputs), RotateQuant (ops-nn ``matmul/rotate_quant``, the A2/A3
int8/int4 kernel) and FlatQuant (ops-nn ``quant/flat_quant``, the A2/A3 int4 per-token kernel).

Written from the ops' READMEs and kernels, not from op_plugin's torch_npu reference kernels:

* fp8 (``fp8_saturating_rint``): the QuantMax kernels cast float32 with ``CastTrait{SatMode::SAT,
  RoundMode::CAST_RINT}``; asc-devkit's asc_float2e5m2 doc defines the saturating cast: round half to even,
  a finite value beyond the format's largest gives that largest (57344 e5m2, 448 e4m3fn), +-inf gives +-largest,
  NaN gives 0. Computed here by formula: ``rint(v / q) * q`` with ``q = 2^(max(e, emin) - mantissa bits)``.
* int4 is held as ``torch.int4`` (one value per byte); a Bitcast to a wider type packs 8 of them to an int32,
  element i in bits 4i..4i+3 (``pack_int4``; ops-nn's int4 goldens, matmul_quant_util.py and
  dynamic_quant_update_scatter_v2's golden.py, lay them out so).
* The matmuls accumulate in float32 and write fp16/bf16 through the cube's fixpipe (F322F16 / F322BF16),
  taken as round-half-even (the fixpipe's rounding is not documented); then the vector unit works in float32.

hifloat8 outputs, MX (fp4/fp8 per-group) outputs and the Ascend 950 paths are refused by name.
"""
from __future__ import annotations

import torch

from ...._ge.reg_op import parse_reg_ops
from ..registry import ge_kernel, refuse

_HALF = (torch.float16, torch.bfloat16)
_FLOATS = (torch.float32, torch.float16, torch.bfloat16)
_GE_INT8, _GE_INT32, _GE_INT4, _GE_HIFLOAT8, _GE_FP4_E2M1 = 2, 3, 29, 34, 40
# GE dtype number -> (torch dtype, mantissa bits, smallest normal exponent, largest finite value)
_FP8 = {35: (torch.float8_e5m2, 2, -14, 57344.0), 36: (torch.float8_e4m3fn, 3, -6, 448.0)}

# ops-nn quant/grouped_quant_max/op_graph/grouped_quant_max_proto.h (TorchAir emits the type from inside
# QuantMax's raw op, with no REG_OP text of its own), quant/flat_quant/op_graph/flat_quant_proto.h (the pinned
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


def fp8_saturating_rint(values: torch.Tensor, number: int) -> torch.Tensor:
    """float32 `values` cast to the fp8 format of GE dtype `number` (35 e5m2, 36 e4m3fn) with SAT + CAST_RINT."""
    dtype, mantissa_bits, emin, largest = _FP8[number]
    wide = torch.nan_to_num(values.float(), nan=0.0).clamp(-largest, largest)   # +-inf clamp to +-largest
    _, exponent = torch.frexp(wide)                  # wide = m * 2^exponent, 0.5 <= |m| < 1
    step = torch.clamp(exponent - 1, min=emin) - mantissa_bits
    quantum = ((step + 127) << 23).to(torch.int32).view(torch.float32)   # 2^step, built from its bits
    return (torch.round(wide / quantum) * quantum).to(dtype)   # exact: the grid's points are fp8 values


def _fp8_out(what, number, round_mode):
    if int(number) == _GE_HIFLOAT8:
        refuse(f"{what}=34 (DT_HIFLOAT8): hifloat8 outputs are not simulated (its 'hybrid' rounding is stochastic)")
    if int(number) not in _FP8:
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


def as_int4(values: torch.Tensor) -> torch.Tensor:
    """Integer values in [-8, 7] as a DT_INT4 tensor (torch.int4, one per byte)."""
    return values.to(torch.int8).view(torch.int4)


def pack_int4(x: torch.Tensor, dtype: torch.dtype, keep_dim: bool) -> torch.Tensor:
    """Bitcast of DT_INT4 `x` to int32/int8/uint8: 2 per byte, element i of a group in bits 4i..4i+3."""
    per = {torch.int32: 8, torch.int8: 2, torch.uint8: 2}.get(dtype)
    if per is None:
        refuse(f"a Bitcast of int4 to {dtype}: only int32, int8 and uint8 are simulated")
    nibbles = x.view(torch.int8).to(torch.int64) & 0xF
    if keep_dim:
        if x.dim() == 0 or x.shape[-1] % per:
            refuse(f"int4 x of shape {list(x.shape)} must end in a multiple of {per} to bitcast to {dtype}")
        nibbles = nibbles.reshape(*x.shape[:-1], x.shape[-1] // per, per)
    elif x.dim() == 0 or x.shape[-1] != per:
        refuse(f"int4 x of shape {list(x.shape)} must end in a dim of {per} to bitcast to {dtype}")
    packed = (nibbles << (4 * torch.arange(per))).sum(-1)
    if dtype == torch.uint8:
        return packed.to(torch.uint8)
    bits = 4 * per
    return torch.where(packed >= 2 ** (bits - 1), packed - 2 ** bits, packed).to(dtype)   # two's complement


def unpack_int4(x: torch.Tensor, keep_dim: bool) -> torch.Tensor:
    """Bitcast of int32/int8/uint8 `x` to DT_INT4: each element's nibbles from bit 0 up, sign-extended; a new
    last dim of 8 (int32) or 2 (bytes), or with keep_dim the last dim times that."""
    per = {torch.int32: 8, torch.int8: 2, torch.uint8: 2}.get(x.dtype)
    if per is None:
        refuse(f"a Bitcast of {x.dtype} to int4: only int32, int8 and uint8 are simulated")
    if keep_dim and x.dim() == 0:
        refuse("keep_dim cannot rescale the last dim of a 0-d tensor")
    words = x.to(torch.int64) & (2 ** (4 * per) - 1)
    nibbles = torch.stack([(words >> (4 * index)) & 0xF for index in range(per)], dim=-1)
    values = torch.where(nibbles > 7, nibbles - 16, nibbles)
    return as_int4(values.flatten(-2) if keep_dim else values)


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

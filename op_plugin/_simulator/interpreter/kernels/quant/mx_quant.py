"""MX quantisation GE ops (hicann ops-nn ``quant/``): DynamicMxQuant, DynamicMxQuantWithDualAxis,
DynamicBlockMxQuant, GroupedDynamicMxQuant, DynamicDualLevelMxQuant and the dequantiser AntiMxQuant; the format
itself (scales, element rounding, layouts) is ``formats.py``.

* DynamicMxQuant: blocks of ``block_size`` along ``axis``; mxscale [..., ceil(nb / 2), ..., 2] (the block
  axis padded to even with 0, pairs in the last dim).
* DynamicMxQuantWithDualAxis: blocks of 32 along -1 (y1, mxscale1) and along -2 (y2, mxscale2), each as
  DynamicMxQuant on that axis (its doc: the same formulas, leading dims merged).
* DynamicBlockMxQuant: one scale per 32 x 32 block of the last two dims, broadcast to scale1 (laid out as a
  last-axis mxscale) and scale2 (as an axis -2 mxscale).

* GroupedDynamicMxQuant (aclnnGroupedDynamicMxQuant doc, arch35 kernel): 2-D x, rows grouped by group_index
  (cumulative ends, non-decreasing, the last = rows); each group MX-quantised along dim 0 in blocks of 32 from its
  own first row; group g's scale pairs start at row ``start // 64 + g`` of mxscale [rows // 64 + groups, n, 2]
  (the kernel's scaleOffset). Rows of mxscale no group writes are left undefined by CANN: zeros here.
* AntiMxQuant (aclnnAntiMxQuant doc): ``y = x * 2^(mxscale - 127)`` per block of 32 along ``axis`` (the mxscale
  layout above), in float32 (exact), then rounded to dst_type; the NaN scale 0xFF gives NaN.

fp4 outputs are carried one 4-bit code per byte as torch.float4_e2m1fn_x2 (``_ge/values.py``); TorchAir's
converters pack them with Bitcast. Refused by name: scale_alg 2 outside DynamicMxQuant / DynamicBlockMxQuant and with a
dst_type_max other than 0/6/7 (kernel paths not read), max_low_bound outside scale_alg 1. float4_e1m2 codes are
written one per byte as uint8 (``formats.as_ge``): no torch dtype carries DT_FLOAT4_E1M2, so the executor refuses it
in a graph by name, while torch_npu's eager ops (``npu/quant_mx.py``) call these kernels directly and pack it.

DynamicDualLevelMxQuant (aclnnDynamicDualLevelMxQuant doc, arch35 kernel), fp4 e2m1 along the last dim: x times
smooth_scale (in x's dtype); per level0 block (512) ``s0 = float32(amax) * float32(1/6)`` (0 when below 2^-126);
``temp = x's dtype(float32(x) / s0)`` (a zero x stays itself); then DynamicMxQuant of temp in level1 blocks of 32.
A nonzero x whose level0 scale is 0 (x / 0) is refused: the doc does not define it.
"""
from __future__ import annotations

import torch
from ....._ge.reg_op import parse_reg_ops
from ....._ge.values import TORCH_TO_GE
from ...registry import ge_kernel, refuse
from ... import lowbit_formats as mx
from ...lowbit_formats import as_e8m0, as_ge, check_fp4_last_dim, check_modes, mx_along

# ops-nn quant/dynamic_mx_quant/op_graph/dynamic_mx_quant_proto.h as CANN writes it: the attr is `blocksize`, the
# name TorchAir's generated DynamicMxQuant writes on the node (its docstring says block_size, which no node has).
_PROTOTYPES = parse_reg_ops('''
"""REG_OP(DynamicMxQuant)
    .INPUT(x, TensorType({DT_FLOAT16, DT_BF16, DT_FLOAT}))
    .OUTPUT(y, TensorType({DT_FLOAT4_E2M1, DT_FLOAT4_E1M2, DT_FLOAT6_E3M2, DT_FLOAT6_E2M3, DT_FLOAT8_E4M3FN,
                           DT_FLOAT8_E5M2}))
    .OUTPUT(mxscale, TensorType({DT_FLOAT8_E8M0}))
    .ATTR(axis, Int, -1)
    .ATTR(round_mode, String, "rint")
    .ATTR(dst_type, Int, DT_FLOAT4_E2M1)
    .ATTR(blocksize, Int, 32)
    .ATTR(scale_alg, Int, 0)
    .ATTR(dst_type_max, Float, 0.0)
    .ATTR(max_low_bound, Float, 0.0)
    .OP_END_FACTORY_REG(DynamicMxQuant)
"""
''', {"DT_FLOAT4_E2M1": TORCH_TO_GE[torch.float4_e2m1fn_x2]})
_FLOATS = (torch.float16, torch.bfloat16, torch.float32)
_HALF = (torch.float16, torch.bfloat16)


def block_mx(x, fmt, round_mode, scale_alg=0, dst_type_max=0.0):
    """DynamicBlockMxQuant's (elements, scale1, scale2): one scale per 32 x 32 block of the last two dims (OCP, or
    scale_alg 2 as DynamicMxQuant's: the test golden of ops-nn's dynamic_block_mx_quant computes it alike)."""
    rows, cols = x.shape[-2], x.shape[-1]
    rb, cb = -(-rows // 32), -(-cols // 32)
    wide = torch.nn.functional.pad(x.float(), (0, cb * 32 - cols, 0, rb * 32 - rows))
    tiles = wide.reshape(*x.shape[:-2], rb, 32, cb, 32).movedim(-3, -2)     # [..., rb, cb, 32, 32]
    flat = tiles.flatten(-2)
    if not bool(torch.isfinite(flat).all()):
        refuse("x holds inf/NaN: CANN writes the NaN scale 0xFF and leaves that block's elements undefined")
    codes = mx.ocp_codes(flat, fmt) if scale_alg == 0 else mx.dynamic_range_codes(flat, fmt, dst_type_max)
    scaled = flat * mx.reciprocal(codes, zero_code_zeroes=True).unsqueeze(-1)
    values = mx.round_to_grid(scaled, fmt, round_mode).reshape(tiles.shape).movedim(-2, -3)
    values = values.reshape(*x.shape[:-2], rb * 32, cb * 32)[..., :rows, :cols]
    per_row = codes.repeat_interleave(32, dim=-2)[..., :rows, :]             # [..., rows, cb]
    per_col = codes.repeat_interleave(32, dim=-1)[..., :cols]                # [..., rb, cols]
    return mx.element_output(values, fmt), mx.scale_layout(per_row, -1), mx.scale_layout(per_col, -2)


def _dtype(x, allowed):
    if x.dtype not in allowed:
        refuse(f"x of dtype {x.dtype}: CANN takes {', '.join(str(d).replace('torch.', '') for d in allowed)}")


def check_dynamic_args(x, axis, fmt, round_mode, block_size, scale_alg, dst_type_max, max_low_bound):
    _dtype(x, _FLOATS)
    check_modes(fmt, round_mode, scale_alg, dst_type_max, max_low_bound, alg2_simulated=True)
    if scale_alg == 2 and (block_size != 32 or x.dtype == torch.float32):
        refuse("scale_alg=2 takes block_size 32; a float32 x with it is not simulated (its kernel path not read)")
    if not -x.dim() <= axis < x.dim():
        refuse(f"axis={axis} is out of range for x of rank {x.dim()}")
    if block_size <= 0 or block_size % 32 or block_size > 1024:
        refuse(f"block_size={block_size} must be a multiple of 32 in [32, 1024]")
    if x.dtype == torch.float32 and (block_size != 32 or x.shape[axis] < 32):
        refuse("a float32 x takes block_size 32 and a quantised axis of at least 32 elements")
    check_fp4_last_dim(x, fmt)


def check_dual_axis_args(x, fmt, round_mode, scale_alg, dst_type_max):
    _dtype(x, _HALF)
    check_modes(fmt, round_mode, scale_alg, dst_type_max)
    if x.dim() < 2:
        refuse(f"x must have at least 2 dims (quantised along -1 and -2); got shape {list(x.shape)}")
    check_fp4_last_dim(x, fmt)


def check_block_args(x, fmt, round_mode, scale_alg, dst_type_max):
    _dtype(x, _HALF)
    check_modes(fmt, round_mode, scale_alg, dst_type_max, scale_algs=(0, 2), alg2_simulated=True)
    if x.dim() not in (2, 3):
        refuse(f"x must be 2-D or 3-D (CANN's doc); got shape {list(x.shape)}")
    check_fp4_last_dim(x, fmt)


@ge_kernel("DynamicMxQuant", prototype=_PROTOTYPES["DynamicMxQuant"])
def dynamic_mx_quant(x, *, axis, round_mode, dst_type, blocksize, scale_alg, dst_type_max, max_low_bound):
    fmt = mx.element_format("dst_type", dst_type)
    check_dynamic_args(x, axis, fmt, round_mode, blocksize, scale_alg, dst_type_max, max_low_bound)
    y, codes = mx_along(x, axis, blocksize, fmt, round_mode, scale_alg, max_low_bound, dst_type_max)
    return as_ge(y, fmt), as_e8m0(codes)


@ge_kernel("DynamicMxQuantWithDualAxis")
def dynamic_mx_quant_with_dual_axis(x, *, round_mode, dst_type, scale_alg, dst_type_max):
    fmt = mx.element_format("dst_type", dst_type)
    check_dual_axis_args(x, fmt, round_mode, scale_alg, dst_type_max)
    y1, codes1 = mx_along(x, -1, 32, fmt, round_mode, scale_alg)
    y2, codes2 = mx_along(x, -2, 32, fmt, round_mode, scale_alg)
    return as_ge(y1, fmt), as_e8m0(codes1), as_ge(y2, fmt), as_e8m0(codes2)


@ge_kernel("DynamicBlockMxQuant")
def dynamic_block_mx_quant(x, *, round_mode, dst_type, scale_alg, dst_type_max):
    fmt = mx.element_format("dst_type", dst_type)
    check_block_args(x, fmt, round_mode, scale_alg, dst_type_max)
    y, scale1, scale2 = block_mx(x, fmt, round_mode, scale_alg, dst_type_max)
    return as_ge(y, fmt), as_e8m0(scale1), as_e8m0(scale2)


_ANTI_DST = {0: torch.float32, 1: torch.float16, 27: torch.bfloat16}   # ge::DataType numbers


def anti_mx(values, codes, axis):
    """float32 x values times 2^(code - 127) of their block (CANN's mxscale layout along axis)."""
    axis = axis % values.dim()
    if codes.dim() != values.dim() + 1 or codes.shape[-1] != 2:
        refuse(f"mxscale of shape {list(codes.shape)} must have x's rank + 1 dims, the last of 2")
    blocks = codes.long().movedim(-1, axis + 1).flatten(axis, axis + 1)
    want = list(values.shape)
    blocks_along = (values.shape[axis] + 31) // 32
    want[axis] = (blocks_along + 1) // 2 * 2
    if list(blocks.shape) != want:
        refuse(f"mxscale of shape {list(codes.shape)} does not fit x {list(values.shape)} along axis {axis}")
    scale = torch.pow(2.0, blocks.double() - 127).float()
    scale = torch.where(blocks == 255, torch.full_like(scale, float("nan")), scale)
    per_element = scale.repeat_interleave(32, dim=axis).narrow(axis, 0, values.shape[axis])
    return values * per_element


@ge_kernel("AntiMxQuant")
def anti_mx_quant(x, mxscale, *, axis, dst_type):
    dst = _ANTI_DST.get(int(dst_type))
    if dst is None:
        refuse(f"dst_type={dst_type}: CANN takes DT_FLOAT (0), DT_FLOAT16 (1) or DT_BF16 (27)")
    if x.dtype == torch.float4_e2m1fn_x2:
        values = mx.fp4_values(x.view(torch.uint8), mx.E2M1)
    elif x.dtype in (torch.float8_e4m3fn, torch.float8_e5m2):
        values = x.float()
    else:
        refuse(f"x of dtype {x.dtype}: CANN takes fp4 e2m1/e1m2 or fp8 e4m3fn/e5m2")
    if mxscale.dtype not in (torch.float8_e8m0fnu, torch.uint8):
        refuse(f"mxscale of dtype {mxscale.dtype}: CANN takes float8_e8m0 (uint8 storage from torch_npu)")
    if not -x.dim() <= axis < x.dim():
        refuse(f"axis={axis} is out of range for x of rank {x.dim()}")
    return anti_mx(values, mxscale.view(torch.uint8), axis).to(dst)


def grouped_mx(x, group_index, fmt, round_mode, scale_alg, blocksize):
    """GroupedDynamicMxQuant's (elements, mxscale codes uint8 [rows // 64 + groups, n, 2])."""
    _dtype(x, _HALF)
    check_modes(fmt, round_mode, scale_alg)
    if x.dim() != 2 or group_index.dim() != 1 or group_index.dtype not in (torch.int32, torch.int64):
        refuse(f"x must be 2-D and group_index 1-D int32; got {list(x.shape)}, {group_index.dtype}"
               f"{list(group_index.shape)}")
    if blocksize != 32:
        refuse(f"blocksize={blocksize}: CANN supports 32")
    check_fp4_last_dim(x, fmt)
    ends = [int(v) for v in group_index.tolist()]
    if any(e < 0 for e in ends) or ends != sorted(ends) or not ends or ends[-1] != x.shape[0]:
        refuse(f"group_index {ends} must be non-negative, non-decreasing and end at x's {x.shape[0]} rows")
    values = torch.zeros(x.shape, dtype=torch.float64)
    scales = torch.zeros(x.shape[0] // 64 + len(ends), x.shape[1], 2, dtype=torch.uint8)
    start = 0
    for g, end in enumerate(ends):
        if end > start:
            result = mx.quantize_blocks(x[start:end], 0, 32, fmt, round_mode, scale_alg)
            values[start:end] = result.values
            pairs = mx.scale_layout(result.codes, 0)
            scales[start // 64 + g:start // 64 + g + pairs.shape[0]] = pairs
        start = end
    return mx.element_output(values, fmt), scales


@ge_kernel("GroupedDynamicMxQuant")
def grouped_dynamic_mx_quant(x, group_index, *, round_mode, dst_type, blocksize, scale_alg, dst_type_max):
    fmt = mx.element_format("dst_type", dst_type)
    check_modes(fmt, round_mode, scale_alg, dst_type_max)
    y, scales = grouped_mx(x, group_index, fmt, round_mode, scale_alg, blocksize)
    return as_ge(y, fmt), as_e8m0(scales)


_INV_FP4_MAX = torch.tensor(0x3E2AAAAB, dtype=torch.int32).view(torch.float32)   # the kernel's float32 1/6


def dual_level_mx(x, smooth_scale, round_mode, level0_block_size, level1_block_size):
    """(fp4 codes, level0 scales float32 [..., ceil(n / 512)], level1 mxscale codes) of DynamicDualLevelMxQuant."""
    if x.dtype not in _HALF or x.dim() == 0:
        refuse(f"x must be float16/bfloat16 of at least 1 dim; got {x.dtype}{list(x.shape)}")
    if (level0_block_size, level1_block_size) != (512, 32):
        refuse(f"level0/level1 block sizes {level0_block_size}/{level1_block_size}: CANN supports 512/32")
    mx.check_round_mode(mx.E2M1, round_mode)
    check_fp4_last_dim(x, mx.E2M1)
    if not bool(torch.isfinite(x).all()):
        refuse("x holds inf/NaN: CANN leaves the MX elements of such a block undefined")
    if smooth_scale is not None:
        if smooth_scale.dtype != x.dtype or smooth_scale.shape[-1:] != x.shape[-1:] or smooth_scale.dim() != 1:
            refuse(f"smooth_scale must be 1-D of x's last dim and dtype; got {smooth_scale.dtype}"
                   f"{list(smooth_scale.shape)}")
        x = x * smooth_scale                          # the kernel multiplies in x's dtype
    n = x.shape[-1]
    nb = -(-n // 512)
    blocks = torch.nn.functional.pad(x.float(), (0, nb * 512 - n)).reshape(*x.shape[:-1], nb, 512)
    level0 = blocks.abs().amax(dim=-1) * _INV_FP4_MAX
    level0 = torch.where(level0 < 2.0 ** -126, torch.zeros_like(level0), level0)
    if bool(((level0 == 0).unsqueeze(-1) & (blocks != 0)).any()):
        refuse("a level0 block whose scale underflows to 0 holds nonzero values (x / 0): undefined in CANN's doc")
    temp = torch.where(blocks == 0, blocks, blocks / level0.unsqueeze(-1)).flatten(-2)[..., :n].to(x.dtype)
    codes, scale = mx_along(temp, -1, 32, mx.E2M1, round_mode)
    return codes, level0, scale


@ge_kernel("DynamicDualLevelMxQuant")
def dynamic_dual_level_mx_quant(x, smooth_scale, *, round_mode, level0_block_size, level1_block_size):
    codes, level0, scale = dual_level_mx(x, smooth_scale, round_mode, level0_block_size, level1_block_size)
    return as_ge(codes, mx.E2M1), level0, as_e8m0(scale)

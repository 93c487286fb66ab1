"""MC2 GE ops, second generation (hicann ops-transformer ``mc2/all_gather_matmul_v2``,
``mc2/matmul_reduce_scatter_v2``; TorchAir lowers npu_all_gather_quant_mm and npu_quant_mm_reduce_scatter
to them), as their READMEs and aclnn docs state them:

* AllGatherMatmulV2: ``gather_out = AllGather(x1)`` (dim 0, group-rank order), ``y = gather_out @ x2 + bias``
  for float16/bfloat16 x1 and x2 (case 1; y has x1's dtype); ``y = (x1_scale * x2_scale) *
  (gather_out @ x2)`` for float8 (e4m3fn/e5m2) x1 and x2 with per-tensor float32 scales (case 2);
* MatmulReduceScatterV2: ``y = ReduceScatter(x1 @ x2 + bias)`` along dim 0 (case 1);
  ``y = ReduceScatter((x1_scale * x2_scale) * (x1 @ x2))`` for float8 per-tensor (case 2).

Numerics: the matmul accumulates in float32 (float8 values are exact in it); the per-tensor scales are
multiplied together first, then with the product, which is rounded once to y's dtype (float16, bfloat16
or float32 for float8 inputs) before the collective, which then reduces in that dtype (gloo's order).
amax_out is the empty float32 tensor CANN's docs allow ("only nullptr or an empty tensor").

Refused, naming the node: a bias with float8 inputs (the two READMEs disagree on where it goes:
AllGatherMatmulV2's case 2 scales ``(x1 @ x2 + bias)``, MatmulReduceScatterV2's adds it after the
scale), per-token/per-channel/per-block/MX scales (block_size, group_size, FLOAT8_E8M0 scales),
hifloat8 and float4 inputs (no CPU dtype here), quant_scale and is_amax_out (CANN: null / empty only),
transposed x1, gather_index != 0 and comm_turn != 0 (CANN: 0 only), reduce_op other than "sum".
int8/int4 inputs (A2/A3, comm_mode "aiv") are not in the pinned TorchAir's prototypes of these types.
"""
from __future__ import annotations

import torch

from ..registry import ge_kernel, refuse
from .common import attr_dtype
from .hccl import hcom_all_gather, hcom_reduce_scatter

_HALF = (torch.float16, torch.bfloat16)
_FP8 = (torch.float8_e4m3fn, torch.float8_e5m2)
_ENGINE = "which engine (AI CPU, AIV or CCU) runs the communication: a schedule, not a value"


def _product(x1, x2, bias, x1_scale, x2_scale, quant_scale, *, is_trans_a, is_trans_b, block_size, group_size,
             is_amax_out, y_dtype) -> torch.Tensor:
    """The matmul (and dequantisation) of both V2 ops, rounded to y's dtype (module docstring)."""
    if is_trans_a:
        refuse("is_trans_a=true: CANN's MC2 ops take x1 untransposed")
    if quant_scale is not None:
        refuse("quant_scale: CANN's docs support only a null quant_scale")
    if is_amax_out:
        refuse("is_amax_out=true: CANN's docs support only an empty amax_out")
    if block_size or group_size:
        refuse(f"block_size={block_size}, group_size={group_size}: per-block or MX quantisation is not simulated")
    if x1.dim() != 2 or x2.dim() != 2:
        refuse(f"x1 {list(x1.shape)} and x2 {list(x2.shape)} must be 2-D")
    right = x2.T if is_trans_b else x2
    if x1.shape[1] != right.shape[0]:
        refuse(f"k of x1 {list(x1.shape)} and of x2 {list(x2.shape)} (is_trans_b={is_trans_b}) differ")
    out = attr_dtype("y_dtype", y_dtype)
    if x1.dtype in _HALF:
        if x2.dtype != x1.dtype or out != x1.dtype:
            refuse(f"x1 {x1.dtype}, x2 {x2.dtype}, y {out}: float16/bfloat16 inputs share one dtype, and y has it")
        if x1_scale is not None or x2_scale is not None:
            refuse("x1_scale/x2_scale go with float8 inputs; float16/bfloat16 inputs take none")
        product = x1.float() @ right.float()
        if bias is not None:
            if bias.dtype != x1.dtype or tuple(bias.shape) != (right.shape[1],):
                refuse(f"bias {bias.dtype} {list(bias.shape)} must be {x1.dtype} [{right.shape[1]}]")
            product = product + bias.float()
        return product.to(out)
    if x1.dtype not in _FP8 or x2.dtype not in _FP8:
        refuse(f"x1 {x1.dtype} and x2 {x2.dtype}: only float16/bfloat16 or float8 (e4m3fn/e5m2) inputs are "
               "simulated (hifloat8 and float4 have no CPU dtype here)")
    if out not in _HALF + (torch.float32,):
        refuse(f"y dtype {out}: float8 inputs output float16, bfloat16 or float32")
    if bias is not None:
        refuse("a bias with float8 inputs: the AllGatherMatmulV2 and MatmulReduceScatterV2 READMEs place it "
               "differently (inside or outside the scaled product), so it is not simulated")
    for name, scale in (("x1_scale", x1_scale), ("x2_scale", x2_scale)):
        if scale is None or scale.dtype != torch.float32 or tuple(scale.shape) != (1,):
            refuse(f"{name} {'absent' if scale is None else f'{scale.dtype} {list(scale.shape)}'}: only per-tensor "
                   "float32 scales of shape [1] are simulated with float8 inputs")
    scale = x1_scale.float() * x2_scale.float()
    return (scale * (x1.float() @ right.float())).to(out)


def _gathered(x1, rank_size: int, group: str) -> torch.Tensor:
    if x1.dtype in _FP8:  # gloo moves bytes: float8 travels as uint8
        return hcom_all_gather(x1.view(torch.uint8), rank_size=rank_size, group=group).view(x1.dtype)
    return hcom_all_gather(x1, rank_size=rank_size, group=group)


def _no_amax() -> torch.Tensor:
    return torch.empty(0, dtype=torch.float32)


@ge_kernel("AllGatherMatmulV2", accepts={"x1": _HALF + _FP8, "x2": _HALF + _FP8}, layout_only={"comm_mode": _ENGINE})
def all_gather_matmul_v2(x1, x2, bias, x1_scale, x2_scale, quant_scale, *, group, is_trans_a, is_trans_b,
                         gather_index, comm_turn, rank_size, block_size, group_size, is_gather_out, is_amax_out,
                         y_dtype):
    """gather_out = AllGather(x1); y = gather_out @ x2 + bias, or (x1_scale * x2_scale) * (gather_out @ x2)
    for float8 (module docstring). Returns (y, gather_out or an empty tensor, amax_out (empty))."""
    if gather_index != 0:
        refuse(f"gather_index={gather_index}: CANN supports only 0 (gather x1)")
    if comm_turn != 0:
        refuse(f"comm_turn={comm_turn}: CANN's docs support only 0 (one communication pass)")
    if x1.dim() != 2:
        refuse(f"x1 {list(x1.shape)} must be 2-D (m, k)")
    gathered = _gathered(x1, rank_size, group)
    y = _product(gathered, x2, bias, x1_scale, x2_scale, quant_scale, is_trans_a=is_trans_a, is_trans_b=is_trans_b,
                 block_size=block_size, group_size=group_size, is_amax_out=is_amax_out, y_dtype=y_dtype)
    return y, (gathered if is_gather_out else x1.new_empty(0)), _no_amax()


@ge_kernel("MatmulReduceScatterV2", accepts={"x1": _HALF + _FP8, "x2": _HALF + _FP8},
           layout_only={"comm_mode": _ENGINE})
def matmul_reduce_scatter_v2(x1, x2, bias, x1_scale, x2_scale, quant_scale, *, group, reduce_op, is_trans_a,
                             is_trans_b, comm_turn, rank_size, block_size, group_size, is_amax_out, y_dtype):
    """y = ReduceScatter(x1 @ x2 + bias), or ReduceScatter((x1_scale * x2_scale) * (x1 @ x2)) for float8, along
    dim 0: group rank r gets rows [r*m/n, (r+1)*m/n). Returns (y, amax_out (empty))."""
    if reduce_op != "sum":
        refuse(f"reduce_op={reduce_op!r}: CANN's MC2 ops support only 'sum'")
    if comm_turn != 0:
        refuse(f"comm_turn={comm_turn}: CANN's docs support only 0 (one communication pass)")
    if x1.dim() != 2 or rank_size <= 0 or x1.shape[0] % rank_size:
        refuse(f"x1 {list(x1.shape)} must be 2-D with m a multiple of rank_size {rank_size}")
    y = _product(x1, x2, bias, x1_scale, x2_scale, quant_scale, is_trans_a=is_trans_a, is_trans_b=is_trans_b,
                 block_size=block_size, group_size=group_size, is_amax_out=is_amax_out, y_dtype=y_dtype)
    return hcom_reduce_scatter(y, reduction="sum", group=group, rank_size=rank_size), _no_amax()

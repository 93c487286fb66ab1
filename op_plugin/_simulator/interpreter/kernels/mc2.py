"""MC2 GE ops: a matmul fused with a collective (hicann ops-transformer ``mc2/``), run as the matmul
then the collective over torch.distributed, as the ops' CANN definitions state them:

* MatmulAllReduce: ``y = AllReduce(x1 @ x2 + bias) + x3`` (aclnnMatmulAllReduce / V2; x1 (m, k) or
  (b, s, k), x2 (k, n), bias (n), reduce_op "sum" only);
* AllGatherMatmul: ``gather_out = AllGather(x1)``, ``y = gather_out @ x2 + bias`` (gather_index 0
  only, the gathered rows in group-rank order; gather_out is empty when is_gather_out is false);
* MatmulReduceScatter: ``y = ReduceScatter(x1 @ x2 + bias)`` along dim 0 (m a multiple of
  rank_size; reduce_op "sum" only).

The `group` attr is the communicator name TorchAir passes through from the op's `hcom` argument;
on a CPU host it must name a gloo process group as TorchAir names one (``tag=<pg tag>;rank_list=<ranks>``,
`..collectives.process_group`; `op_plugin._simulator.npu.collective_matmul.hccl_comm_name(group)`
gives it). Numerics: the matmul accumulates in float32 and its result (with bias) is rounded to
the inputs' dtype before the collective, which then reduces in that dtype (gloo's order, not
HCCL's: docs/distributed.md). The non-quantised forms only (fp16/bf16, as CANN and TorchAir's
converters require); the quantisation inputs, transposed x1 and a split communication
(comm_turn != 0, "supports only 0" in CANN's docs) are refused naming the op.
"""
from __future__ import annotations

import torch

from ...._ge.values import ge_dtype_to_torch
from ..registry import ge_kernel, refuse
from .hccl import hcom_all_gather, hcom_all_reduce, hcom_reduce_scatter

_HALF = (torch.float16, torch.bfloat16)
_UNDEFINED_DTYPE = 28  # GE DT_UNDEFINED: y takes x1's dtype
_ENGINE = "which engine (AI CPU or CCU) runs the communication: a schedule, not a value"


def _matmul(x1, x2, bias, is_trans_a: bool, is_trans_b: bool) -> torch.Tensor:
    if is_trans_a:
        refuse("is_trans_a=true: CANN's MC2 ops take x1 untransposed")
    if x2.dim() != 2 or x1.dim() not in (2, 3):
        refuse(f"x1 {list(x1.shape)} must be 2-D or 3-D and x2 {list(x2.shape)} 2-D")
    right = x2.float().T if is_trans_b else x2.float()
    if x1.shape[-1] != right.shape[0]:
        refuse(f"k of x1 {list(x1.shape)} and of x2 {list(x2.shape)} (is_trans_b={is_trans_b}) differ")
    product = x1.float() @ right
    if bias is not None:
        if bias.dim() != 1 or bias.shape[0] != right.shape[1]:
            refuse(f"bias {list(bias.shape)} must be ({right.shape[1]},)")
        product = product + bias.float()
    return product.to(x1.dtype)


def _only_sum(reduce_op: str) -> None:
    if reduce_op != "sum":
        refuse(f"reduce_op={reduce_op!r}: CANN's MC2 ops support only 'sum'")


def _one_pass(comm_turn: int) -> None:
    if comm_turn != 0:
        refuse(f"comm_turn={comm_turn}: CANN's docs support only 0 (one communication pass)")


@ge_kernel("MatmulAllReduce", one_dtype=("x1", "x2"), accepts={"x1": _HALF, "x2": _HALF},
           layout_only={"comm_mode": _ENGINE})
def matmul_all_reduce(x1, x2, bias, x3, antiquant_scale, antiquant_offset, dequant_scale, pertoken_scale,
                      comm_quant_scale_1, comm_quant_scale_2, *, group, reduce_op, is_trans_a, is_trans_b,
                      comm_turn, antiquant_group_size, group_size, y_dtype, comm_quant_mode):
    """y = AllReduce(x1 @ x2 + bias) + x3 over `group` (module docstring)."""
    quantised = {"antiquant_scale": antiquant_scale, "antiquant_offset": antiquant_offset,
                 "dequant_scale": dequant_scale, "pertoken_scale": pertoken_scale,
                 "comm_quant_scale_1": comm_quant_scale_1, "comm_quant_scale_2": comm_quant_scale_2}
    given = [name for name, value in quantised.items() if value is not None]
    if given or comm_quant_mode or antiquant_group_size or group_size:
        refuse(f"the quantised MatmulAllReduce ({given or 'quantisation attrs'}) is not simulated; only "
               "x1 @ x2 + bias in fp16/bf16")
    if y_dtype != _UNDEFINED_DTYPE and ge_dtype_to_torch(y_dtype) != x1.dtype:
        refuse(f"y_dtype={y_dtype}: the non-quantised MatmulAllReduce outputs x1's dtype ({x1.dtype})")
    _only_sum(reduce_op)
    _one_pass(comm_turn)
    y = hcom_all_reduce(_matmul(x1, x2, bias, is_trans_a, is_trans_b), reduction="sum", group=group)
    if x3 is not None:
        if x3.shape != y.shape:
            refuse(f"x3 {list(x3.shape)} must have y's shape {list(y.shape)}")
        y = (y.float() + x3.float()).to(y.dtype)
    return y


@ge_kernel("AllGatherMatmul", one_dtype=("x1", "x2"), accepts={"x1": _HALF, "x2": _HALF})
def all_gather_matmul(x1, x2, bias, *, group, is_trans_a, is_trans_b, gather_index, comm_turn, rank_size,
                      is_gather_out):
    """gather_out = AllGather(x1) along dim 0; y = gather_out @ x2 + bias (module docstring)."""
    if gather_index != 0:
        refuse(f"gather_index={gather_index}: CANN supports only 0 (gather x1)")
    if x1.dim() != 2:
        refuse(f"x1 {list(x1.shape)} must be 2-D (m, k)")
    _one_pass(comm_turn)
    gathered = hcom_all_gather(x1, rank_size=rank_size, group=group)
    y = _matmul(gathered, x2, bias, is_trans_a, is_trans_b)
    return y, (gathered if is_gather_out else x1.new_empty(0))


@ge_kernel("MatmulReduceScatter", one_dtype=("x1", "x2"), accepts={"x1": _HALF, "x2": _HALF})
def matmul_reduce_scatter(x1, x2, bias, *, group, reduce_op, is_trans_a, is_trans_b, comm_turn, rank_size):
    """y = ReduceScatter(x1 @ x2 + bias) along dim 0: group rank r gets rows [r*m/n, (r+1)*m/n)."""
    _only_sum(reduce_op)
    _one_pass(comm_turn)
    if x1.dim() != 2 or x1.shape[0] % rank_size:
        refuse(f"x1 {list(x1.shape)} must be 2-D with m a multiple of rank_size {rank_size}")
    return hcom_reduce_scatter(_matmul(x1, x2, bias, is_trans_a, is_trans_b), reduction="sum", group=group,
                               rank_size=rank_size)

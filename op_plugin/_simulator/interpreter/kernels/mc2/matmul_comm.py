"""MC2 GE ops: a matmul fused with a collective (hicann ops-transformer ``mc2/``), run as the matmul
then the collective over torch.distributed, as the ops' CANN definitions state them:

* MatmulAllReduce: ``y = AllReduce(x1 @ x2 + bias + x3)`` (aclnnMatmulAllReduceV2's formula; the
  kernel adds x3 to each rank's matmul output before the all-reduce, ``matmul_all_reduce_add_x3.h``,
  so every rank's x3 is summed); x1 (m, k) or (b, s, k), x2 (k, n), bias (n), reduce_op "sum" only.
  Full-quant form (torch_npu's docs, table 3; the README's cases 3 and 4): int8 x1/x2, int32 bias,
  ``y = AllReduce(dequant_scale * pertoken_scale * (x1 @ x2 + bias) + x3)``, the product computed as
  QuantBatchMatmulV3 (`quantize.py`: exact int32 accumulation, an int64/uint64 dequant_scale read as
  TransQuantParam's FP19) and rounded to the output dtype (y_dtype: float16/bfloat16) before x3 and
  the all-reduce;
* AllGatherMatmul: ``gather_out = AllGather(x1)``, ``y = gather_out @ x2 + bias`` (gather_index 0
  only, the gathered rows in group-rank order; gather_out is empty when is_gather_out is false);
* MatmulReduceScatter: ``y = ReduceScatter(x1 @ x2 + bias)`` along dim 0 (m a multiple of
  rank_size; reduce_op "sum" only).

The `group` attr is the communicator name TorchAir passes through from the op's `hcom` argument;
on a CPU host it must name a gloo process group as TorchAir names one (``tag=<pg tag>;rank_list=<ranks>``,
`..collectives.process_group`; `op_plugin._simulator.npu.collective_matmul.hccl_comm_name(group)`
gives it). Numerics: the matmul accumulates in float32 and its result (with bias) is rounded to
the inputs' dtype before the collective, which then reduces in that dtype (gloo's order, not
HCCL's: docs/distributed.md). Weight-quant form (table 2, README case 7): float16/bfloat16 x1, int8 x2,
``AllReduce(x1 @ ((x2 + antiquant_offset) * antiquant_scale) + bias + x3)`` as WeightQuantBatchMatmulV2
(per-tensor, per-channel, per-group). Refused naming the op: low-bit communication (comm_quant_scale_1/2),
per-block quantisation (group_size), transposed x1 and a split communication (comm_turn != 0,
"supports only 0" in CANN's docs). AllGatherMatmulV2 and
MatmulReduceScatterV2 (npu_all_gather_quant_mm, npu_quant_mm_reduce_scatter) are in `mc2_v2.py`.
"""
from __future__ import annotations

import torch

from ...._ge.values import TORCH_TO_GE, ge_dtype_to_torch
from ..registry import ge_kernel, refuse
from .common import attr_dtype
from .hccl import hcom_all_gather, hcom_all_reduce, hcom_reduce_scatter
from .quantize import quant_batch_matmul_v3, weight_quant_batch_matmul_v2

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


# The full-quantised MatmulAllReduce (torch_npu's docs of npu_mm_all_reduce_base, table 3; ops-transformer
# matmul_all_reduce README, cases 3 and 4): int8 x1/x2, an int32 bias or none, and these
# (dequant_scale dtypes, output dtype, pertoken_scale dtype or None) combinations.
_QUANT_COMBINATIONS = (
    ((torch.int64, torch.uint64), torch.float16, None),
    ((torch.bfloat16,), torch.bfloat16, None),
    ((torch.float32,), torch.float16, torch.float32),
    ((torch.bfloat16,), torch.bfloat16, torch.float32),
)


def _quantised_product(x1, x2, bias, dequant_scale, pertoken_scale, out, is_trans_b):
    """dequant_scale * pertoken_scale * (x1 @ x2 + bias), rounded to `out`: the matmul of QuantBatchMatmulV3
    (kernels/quantize.py) on x1 flattened to (m, k), as MatmulAllReduce's quant kernels run it."""
    combination = (dequant_scale.dtype, out, None if pertoken_scale is None else pertoken_scale.dtype)
    if not any(combination[0] in scales and combination[1:] == (o, p) for scales, o, p in _QUANT_COMBINATIONS):
        refuse(f"dequant_scale {dequant_scale.dtype}, output {out}, pertoken_scale "
               f"{combination[2]}: not one of CANN's full-quant combinations (int64/uint64 -> float16 without "
               "pertoken_scale; bfloat16 -> bfloat16; float32 -> float16 with a float32 pertoken_scale)")
    if bias is not None and bias.dtype != torch.int32:
        refuse(f"bias of dtype {bias.dtype}: the full-quant MatmulAllReduce takes an int32 bias")
    n = x2.shape[0] if is_trans_b else x2.shape[-1]
    if tuple(dequant_scale.shape) not in ((1,), (n,), (1, n)):
        refuse(f"dequant_scale {list(dequant_scale.shape)} must be [1] (per tensor), [{n}] or [1, {n}] (per channel)")
    rows = x1.reshape(-1, x1.shape[-1])
    if pertoken_scale is not None and tuple(pertoken_scale.shape) != (rows.shape[0],):
        refuse(f"pertoken_scale {list(pertoken_scale.shape)} must be [{rows.shape[0]}] (one per row of x1, b*s "
               "for a 3-D x1)")
    y = quant_batch_matmul_v3(rows, x2, dequant_scale.reshape(-1), None, bias, pertoken_scale,
                              dtype=TORCH_TO_GE[out], transpose_x1=False, transpose_x2=is_trans_b)
    return y.reshape(*x1.shape[:-1], y.shape[-1])


def _weight_quantised_product(x1, x2, bias, antiquant_scale, antiquant_offset, group_size, dequant_scale,
                              pertoken_scale, y_dtype, is_trans_b):
    """x1 @ ((x2 + antiquant_offset) * antiquant_scale) + bias in x1's dtype (torch_npu's docs, table 2; the
    README's case 7): WeightQuantBatchMatmulV2 (kernels/quantize.py), whose kernel MatmulAllReduce's
    weight-quant path runs (matmul_all_reduce_weight_quant.h), on x1 flattened to (m, k)."""
    if x1.dtype not in _HALF or x2.dtype != torch.int8:
        refuse(f"x1 {x1.dtype} and x2 {x2.dtype}: the weight-quantised form takes float16/bfloat16 x1 and int8 x2")
    if dequant_scale is not None or pertoken_scale is not None:
        refuse("dequant_scale/pertoken_scale go with the full-quant form, not with antiquant_scale")
    if y_dtype != _UNDEFINED_DTYPE and ge_dtype_to_torch(y_dtype) != x1.dtype:
        refuse(f"y_dtype={y_dtype}: the weight-quantised MatmulAllReduce outputs x1's dtype ({x1.dtype})")
    for name, tensor in (("antiquant_scale", antiquant_scale), ("antiquant_offset", antiquant_offset),
                         ("bias", bias)):
        if tensor is not None and tensor.dtype != x1.dtype:
            refuse(f"{name} of dtype {tensor.dtype}: the weight-quantised form takes x1's dtype ({x1.dtype})")
    rows = x1.reshape(-1, x1.shape[-1])
    y = weight_quant_batch_matmul_v2(rows, x2, antiquant_scale, antiquant_offset, None, None, bias,
                                     transpose_x=False, transpose_weight=is_trans_b,
                                     antiquant_group_size=group_size, dtype=-1)
    return y.reshape(*x1.shape[:-1], y.shape[-1])


@ge_kernel("MatmulAllReduce", accepts={"x1": _HALF + (torch.int8,), "x2": _HALF + (torch.int8,)},
           layout_only={"comm_mode": _ENGINE})
def matmul_all_reduce(x1, x2, bias, x3, antiquant_scale, antiquant_offset, dequant_scale, pertoken_scale,
                      comm_quant_scale_1, comm_quant_scale_2, *, group, reduce_op, is_trans_a, is_trans_b,
                      comm_turn, antiquant_group_size, group_size, y_dtype, comm_quant_mode):
    """y = AllReduce(x1 @ x2 + bias + x3) over `group`; full-quant (int8 x1/x2):
    y = AllReduce(dequant_scale * pertoken_scale * (x1 @ x2 + bias) + x3); weight-quant (int8 x2 with
    antiquant_scale): y = AllReduce(x1 @ ((x2 + antiquant_offset) * antiquant_scale) + bias + x3)."""
    if antiquant_scale is None and (antiquant_offset is not None or antiquant_group_size):
        refuse("antiquant_offset/antiquant_group_size without antiquant_scale")
    if comm_quant_scale_1 is not None or comm_quant_scale_2 is not None or comm_quant_mode:
        refuse("low-bit communication (comm_quant_scale_1/2, comm_quant_mode: all-to-all + all-gather of int8 "
               "partial sums) is not simulated")
    if group_size:
        refuse(f"group_size={group_size} (per-block quantisation, Ascend 950) is not simulated")
    _only_sum(reduce_op)
    _one_pass(comm_turn)
    if is_trans_a:
        refuse("is_trans_a=true: CANN's MC2 ops take x1 untransposed")
    if antiquant_scale is not None:
        y = _weight_quantised_product(x1, x2, bias, antiquant_scale, antiquant_offset, antiquant_group_size,
                                      dequant_scale, pertoken_scale, y_dtype, is_trans_b)
    elif x1.dtype == torch.int8:
        if x2.dtype != torch.int8 or dequant_scale is None:
            refuse(f"x1 int8 with x2 {x2.dtype} and dequant_scale {'absent' if dequant_scale is None else 'given'}: "
                   "the full-quant form takes int8 x1 and x2 and a dequant_scale")
        if y_dtype == _UNDEFINED_DTYPE:
            refuse("y_dtype undefined: the full-quant MatmulAllReduce needs its output dtype (float16/bfloat16)")
        y = _quantised_product(x1, x2, bias, dequant_scale, pertoken_scale, attr_dtype("y_dtype", y_dtype),
                               is_trans_b)
    else:
        if x2.dtype != x1.dtype:
            refuse(f"x1 {x1.dtype} and x2 {x2.dtype}: the non-quantised MatmulAllReduce takes one dtype")
        if dequant_scale is not None or pertoken_scale is not None:
            refuse("dequant_scale/pertoken_scale go with int8 x1 and x2 (the full-quant form)")
        if y_dtype != _UNDEFINED_DTYPE and ge_dtype_to_torch(y_dtype) != x1.dtype:
            refuse(f"y_dtype={y_dtype}: the non-quantised MatmulAllReduce outputs x1's dtype ({x1.dtype})")
        y = _matmul(x1, x2, bias, is_trans_a, is_trans_b)
    if x3 is not None:
        if x3.shape != y.shape or x3.dtype != y.dtype:
            refuse(f"x3 {x3.dtype} {list(x3.shape)} must have y's dtype and shape ({y.dtype} {list(y.shape)})")
        y = (y.float() + x3.float()).to(y.dtype)  # added on each rank before the all-reduce (the kernel's AddX3)
    return hcom_all_reduce(y, reduction="sum", group=group)


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

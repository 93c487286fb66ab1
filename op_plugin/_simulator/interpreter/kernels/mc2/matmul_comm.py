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
MatmulReduceScatterV2 (npu_all_gather_quant_mm, npu_quant_mm_reduce_scatter) are below (the second generation).

MC2 GE ops, second generation (hicann ops-transformer ``mc2/all_gather_matmul_v2``,
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
from ....._ge.values import TORCH_TO_GE, ge_dtype_to_torch
from ...registry import ge_kernel, refuse
from ..common import attr_dtype
from ..hccl.collectives import hcom_all_gather, hcom_all_reduce, hcom_reduce_scatter
from ..matmul.quant_matmul import quant_batch_matmul_v3, weight_quant_batch_matmul_v2

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
_FP8 = (torch.float8_e4m3fn, torch.float8_e5m2)
_ENGINE_V2 = "which engine (AI CPU, AIV or CCU) runs the communication: a schedule, not a value"


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


@ge_kernel("AllGatherMatmulV2", accepts={"x1": _HALF + _FP8, "x2": _HALF + _FP8}, layout_only={"comm_mode": _ENGINE_V2})
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
           layout_only={"comm_mode": _ENGINE_V2})
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

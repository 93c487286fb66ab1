"""CPU reference kernels of torch_npu's MC2 ops (a matmul fused with a collective) over
torch.distributed, and the CPU stand-in for the HCCL communicator name they take.

On an NPU these eager ops call the CANN kernels their GE types run in graph mode
(aclnnMatmulAllReduce, aclnnAllGatherMatmul, aclnnMatmulReduceScatter), so each maps its torch_npu
arguments onto the GE kernel (`interpreter/kernels/mc2/matmul_comm.py`: the formulas, numerics and refusals)
calls it through ``ge_op(Type)`` as a graph node runs it (dtype rules included), and names the op in
every refusal; the adapters refuse only arguments the GE ops have no input or attr for:

* ``npu_mm_all_reduce_base(x1, x2, hcom, *, reduce_op, bias, x3, dequant_scale, pertoken_scale, y_dtype, ...)``
  -> MatmulAllReduce: ``AllReduce(x1 @ x2 + bias + x3)``; with int8 x1/x2 and a dequant_scale the
  full-quant ``AllReduce(dequant_scale * pertoken_scale * (x1 @ x2 + bias) + x3)`` (y: y_dtype, else
  bfloat16 for a bfloat16 dequant_scale and float16 otherwise, as TorchAir's converter and the Meta);
* ``npu_all_gather_base_mm(x1, x2, hcom, world_size, *, bias, gather_index, gather_output, ...)`` ->
  AllGatherMatmul: ``(AllGather(x1) @ x2 + bias, AllGather(x1))`` (an empty tensor for the second
  when gather_output is false);
* ``npu_mm_reduce_scatter_base(x1, x2, hcom, world_size, *, reduce_op, bias, ...)`` ->
  MatmulReduceScatter: ``ReduceScatter(x1 @ x2 + bias)`` along dim 0;
* ``npu_all_gather_quant_mm(self, x2, hcom, world_size, *, bias, x1_scale, x2_scale, y_dtype, ...)`` ->
  AllGatherMatmulV2 and ``npu_quant_mm_reduce_scatter(...)`` -> MatmulReduceScatterV2: float16/bfloat16,
  or float8 with per-tensor scales (`interpreter/kernels/mc2/matmul_comm.py`); each returns an empty amax_out.

`hcom`: on an NPU, the HCCL communicator name of a process group
(``group._get_backend(torch.device("npu")).get_hccl_comm_name(rank)``); on a CPU host with gloo,
``hccl_comm_name(group)``: the name TorchAir gives that group in a GE graph, which the simulator
resolves back to it. Quantised forms the GE kernels do not compute (weight quantisation, low-bit
communication, per-block/MX scales, hifloat8/float4 formats) are refused naming the op.
"""
from __future__ import annotations


import torch

from .checks import named_refusals
from .quant import scalar_dtype
from ..._ge.values import TORCH_TO_GE
from ..interpreter.calls import ge_op

_UNDEFINED_DTYPE = 28  # GE DT_UNDEFINED


def hccl_comm_name(group=None) -> str:
    """The CPU stand-in for an HCCL communicator name: what TorchAir names the gloo process group
    `group` (default: the world) in a GE graph, ``tag=<pg tag>;rank_list=<global ranks>``."""
    from torch.distributed import distributed_c10d as c10d

    group = group if group is not None else c10d._get_default_group()
    ranks = c10d.get_process_group_ranks(group)
    return f"tag={c10d._get_group_tag(group)};rank_list={','.join(str(r) for r in ranks)}"



def _no_quantisation(op: str, **arguments) -> None:
    given = sorted(name for name, value in arguments.items() if value is not None)
    if given:
        raise NotImplementedError(f"npu::{op}: {given}: this quantised form is not simulated "
                                  "(docs/distributed.md lists the MC2 forms that are)")


@named_refusals("npu_mm_all_reduce_base")
def npu_mm_all_reduce_base(x1, x2, hcom, *, reduce_op="sum", bias=None, antiquant_scale=None, antiquant_offset=None,
                           x3=None, dequant_scale=None, pertoken_scale=None, comm_quant_scale_1=None,
                           comm_quant_scale_2=None, antiquant_group_size=0, comm_turn=0, group_sizes=None,
                           y_dtype=None, x1_dtype=None, x2_dtype=None, dequant_scale_dtype=None,
                           pertoken_scale_dtype=None, comm_quant_mode=0, comm_mode=None):
    op = "npu_mm_all_reduce_base"
    _no_quantisation(op, group_sizes=group_sizes, x1_dtype=x1_dtype, x2_dtype=x2_dtype,
                     dequant_scale_dtype=dequant_scale_dtype, pertoken_scale_dtype=pertoken_scale_dtype)
    if dequant_scale is not None:  # as TorchAir's converter and the wheel's Meta: bfloat16 scale -> bfloat16
        default = torch.bfloat16 if dequant_scale.dtype == torch.bfloat16 else torch.float16
        out = scalar_dtype(op, "y_dtype", y_dtype, default)
        ge_y_dtype = TORCH_TO_GE.get(out, -1)
    elif y_dtype is not None:
        raise ValueError(f"npu::{op}: y_dtype is for the full-quant form (with dequant_scale); the output has "
                         "x1's dtype")
    else:
        ge_y_dtype = _UNDEFINED_DTYPE
    return ge_op("MatmulAllReduce")(
        x1, x2, bias, x3, antiquant_scale, antiquant_offset, dequant_scale, pertoken_scale, comm_quant_scale_1,
        comm_quant_scale_2, group=hcom, reduce_op=reduce_op, is_trans_a=False, is_trans_b=False, comm_turn=comm_turn,
        antiquant_group_size=antiquant_group_size, group_size=0, y_dtype=ge_y_dtype,
        comm_quant_mode=comm_quant_mode)


@named_refusals("npu_all_gather_base_mm")
def npu_all_gather_base_mm(x1, x2, hcom, world_size, *, bias=None, x1_scale=None, x2_scale=None, gather_index=0,
                           gather_output=True, comm_turn=0, output_dtype=None, comm_mode=None):
    _no_quantisation("npu_all_gather_base_mm", x1_scale=x1_scale, x2_scale=x2_scale, output_dtype=output_dtype)
    return ge_op("AllGatherMatmul")(x1, x2, bias, group=hcom, is_trans_a=False, is_trans_b=False,
                                 gather_index=gather_index, comm_turn=comm_turn, rank_size=world_size,
                                 is_gather_out=gather_output)


@named_refusals("npu_mm_reduce_scatter_base")
def npu_mm_reduce_scatter_base(x1, x2, hcom, world_size, *, reduce_op="sum", bias=None, x1_scale=None,
                               x2_scale=None, comm_turn=0, output_dtype=None, comm_mode=None):
    _no_quantisation("npu_mm_reduce_scatter_base", x1_scale=x1_scale, x2_scale=x2_scale, output_dtype=output_dtype)
    return ge_op("MatmulReduceScatter")(x1, x2, bias, group=hcom, reduce_op=reduce_op, is_trans_a=False,
                                     is_trans_b=False, comm_turn=comm_turn, rank_size=world_size)


def _v2_y_dtype(op: str, x1, y_dtype) -> int:
    """y's GE dtype, as TorchAir's converter and the wheel's Meta give it: y_dtype, else x1's dtype."""
    out = scalar_dtype(op, "y_dtype", y_dtype, x1.dtype)
    if out not in TORCH_TO_GE:
        raise ValueError(f"npu::{op}: y_dtype={y_dtype} ({out}) is not an output dtype of this op")
    return TORCH_TO_GE[out]


def _v2_checks(op: str, x1, x2, group_sizes, **formats) -> None:
    if group_sizes is not None and any(group_sizes):
        raise NotImplementedError(f"npu::{op}: group_sizes={list(group_sizes)} (per-block quantisation) is not "
                                  "simulated")
    _no_quantisation(op, **formats)


@named_refusals("npu_all_gather_quant_mm")
def npu_all_gather_quant_mm(self, x2, hcom, world_size, *, bias=None, x1_scale=None, x2_scale=None,
                            quant_scale=None, block_size=0, gather_index=0, gather_output=True, comm_turn=0,
                            group_sizes=None, amax_output=False, y_dtype=None, x1_dtype=None, x2_dtype=None,
                            x1_scale_dtype=None, x2_scale_dtype=None, comm_mode=None):
    op = "npu_all_gather_quant_mm"
    _v2_checks(op, self, x2, group_sizes, x1_dtype=x1_dtype, x2_dtype=x2_dtype, x1_scale_dtype=x1_scale_dtype,
               x2_scale_dtype=x2_scale_dtype)
    return ge_op("AllGatherMatmulV2")(
        self, x2, bias, x1_scale, x2_scale, quant_scale, group=hcom, is_trans_a=False, is_trans_b=False,
        gather_index=gather_index, comm_turn=comm_turn, rank_size=world_size, block_size=block_size, group_size=0,
        is_gather_out=gather_output, is_amax_out=amax_output, y_dtype=_v2_y_dtype(op, self, y_dtype))


@named_refusals("npu_quant_mm_reduce_scatter")
def npu_quant_mm_reduce_scatter(self, x2, hcom, world_size, *, reduce_op="sum", bias=None, x1_scale=None,
                                x2_scale=None, quant_scale=None, block_size=0, comm_turn=0, group_sizes=None,
                                amax_output=False, y_dtype=None, x1_dtype=None, x2_dtype=None, x1_scale_dtype=None,
                                x2_scale_dtype=None, comm_mode=None):
    op = "npu_quant_mm_reduce_scatter"
    _v2_checks(op, self, x2, group_sizes, x1_dtype=x1_dtype, x2_dtype=x2_dtype, x1_scale_dtype=x1_scale_dtype,
               x2_scale_dtype=x2_scale_dtype)
    return ge_op("MatmulReduceScatterV2")(
        self, x2, bias, x1_scale, x2_scale, quant_scale, group=hcom, reduce_op=reduce_op, is_trans_a=False,
        is_trans_b=False, comm_turn=comm_turn, rank_size=world_size, block_size=block_size, group_size=0,
        is_amax_out=amax_output, y_dtype=_v2_y_dtype(op, self, y_dtype))


KERNELS = {
    "npu_mm_all_reduce_base": npu_mm_all_reduce_base,
    "npu_all_gather_base_mm": npu_all_gather_base_mm,
    "npu_mm_reduce_scatter_base": npu_mm_reduce_scatter_base,
    "npu_all_gather_quant_mm": npu_all_gather_quant_mm,
    "npu_quant_mm_reduce_scatter": npu_quant_mm_reduce_scatter,
}

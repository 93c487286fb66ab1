"""Completions of TorchAir's collective converters (`when="completes"`): `reduce_type="avg"`, and
the non-quantised `npu_mm_all_reduce_base` (an MC2 op) where TorchAir's converter cannot import
torch_npu (its docstring).

TorchAir lowers torch's functional all_reduce / reduce_scatter_tensor to `HcomAllReduce` /
`HcomReduceScatter` with `normalize_reduceop_type(reduce_type)`, which raises
`ge unsupported reduce type AVG` on any host: HCCL has no average. torch_npu's eager
ProcessGroupHCCL computes AVG as HCCL's SUM followed by a division by the group size
(`getHcclReduceOp`: "HCCL does not support ReduceOp::AVG yet, PTA supports it by summing first,
then dividing"), as gloo does. The completion lowers "avg" the same way: TorchAir's own
converter with "sum", then `Div` by the group size in the tensor's dtype. Every other reduction is
TorchAir's.

Integer and bool tensors are refused: torch's eager AVG divides in place (`div_`), which fails for
them on gloo and HCCL alike ("result type Float can't be cast to ..."), so there is no eager
result to be faithful to.
"""
from __future__ import annotations

import torch

from .registry import aten_converter
from .torchair_api import TorchAirApi

if torch.distributed.is_available():
    # registers the legacy `c10d_functional` ops TorchAir lowers too (torch registers them here)
    import torch.distributed._functional_collectives  # noqa: F401

_FLOAT_TYPES = ("DT_FLOAT", "DT_FLOAT16", "DT_BF16", "DT_DOUBLE")


def _completes(namespace: str, name: str):
    """`aten_converter(op, when="completes")` of `torch.ops.<namespace>.<name>.default`, if this torch
    has the op (no torch.distributed: none)."""
    packet = getattr(getattr(torch.ops, namespace), name, None) if torch.distributed.is_available() else None
    if packet is None:
        return lambda fn: fn
    return aten_converter(packet.default, when="completes")


def _group_size(group_name: str) -> int:
    group = torch.distributed.distributed_c10d._resolve_process_group(group_name)
    return torch.distributed.get_world_size(group)


def _average(ta: TorchAirApi, summed, dtype, group_size: int, what: str):
    data_type = ta.graph.DataType
    if dtype not in {getattr(data_type, name) for name in _FLOAT_TYPES}:
        raise NotImplementedError(
            f"{what}(reduce_type='avg'): the tensor is not floating point (GE dtype {dtype}); torch's eager AVG "
            "divides the sum in place and fails for integer tensors on every backend. Reduce with 'sum' and "
            "divide by the group size yourself, in the dtype you want.")
    return ta.ge.Div(summed, ta.dtype_promote(group_size, target_dtype=dtype))


@_completes("_c10d_functional", "all_reduce")
def all_reduce(ta: TorchAirApi, self, reduce_type: str, group_name: str, *, out=None, meta_outputs=None):
    """`_c10d_functional.all_reduce(x, "avg", group)`: HcomAllReduce(sum), then Div by the group
    size (module docstring); other reductions are TorchAir's."""
    if reduce_type.lower() != "avg":
        return ta.original(self, reduce_type, group_name, out=out, meta_outputs=meta_outputs)
    summed = ta.original(self, "sum", group_name, out=out, meta_outputs=meta_outputs)
    return _average(ta, summed, self.dtype, _group_size(group_name), "_c10d_functional.all_reduce")


@_completes("c10d_functional", "all_reduce")
def all_reduce_legacy(ta: TorchAirApi, self, reduce_type: str, tag: str, rank_list, group_size: int, *,
                      out=None, meta_outputs=None):
    """The legacy `c10d_functional.all_reduce(x, "avg", tag, ranks, group_size)`: as `all_reduce`."""
    if reduce_type.lower() != "avg":
        return ta.original(self, reduce_type, tag, rank_list, group_size, out=out, meta_outputs=meta_outputs)
    summed = ta.original(self, "sum", tag, rank_list, group_size, out=out, meta_outputs=meta_outputs)
    return _average(ta, summed, self.dtype, group_size, "c10d_functional.all_reduce")


@_completes("_c10d_functional", "reduce_scatter_tensor")
def reduce_scatter_tensor(ta: TorchAirApi, self, reduce_type: str, group_size: int, group_name: str, *,
                          out=None, meta_outputs=None):
    """`_c10d_functional.reduce_scatter_tensor(x, "avg", n, group)`: HcomReduceScatter(sum), then
    Div by the group size, as torch_npu's eager reduce_scatter with AVG."""
    if reduce_type.lower() != "avg":
        return ta.original(self, reduce_type, group_size, group_name, out=out, meta_outputs=meta_outputs)
    summed = ta.original(self, "sum", group_size, group_name, out=out, meta_outputs=meta_outputs)
    return _average(ta, summed, self.dtype, group_size, "_c10d_functional.reduce_scatter_tensor")


@_completes("c10d_functional", "reduce_scatter_tensor")
def reduce_scatter_tensor_legacy(ta: TorchAirApi, self, reduce_type: str, tag: str, rank_list, group_size: int, *,
                                 out=None, meta_outputs=None):
    """The legacy `c10d_functional.reduce_scatter_tensor(x, "avg", tag, ranks, group_size)`."""
    if reduce_type.lower() != "avg":
        return ta.original(self, reduce_type, tag, rank_list, group_size, out=out, meta_outputs=meta_outputs)
    summed = ta.original(self, "sum", tag, rank_list, group_size, out=out, meta_outputs=meta_outputs)
    return _average(ta, summed, self.dtype, group_size, "c10d_functional.reduce_scatter_tensor")


@aten_converter("npu::npu_mm_all_reduce_base", when="completes")
def npu_mm_all_reduce_base(ta: TorchAirApi, x1, x2, hcom: str, *, reduce_op: str = "sum", bias=None,
                           antiquant_scale=None, antiquant_offset=None, x3=None, dequant_scale=None,
                           pertoken_scale=None, comm_quant_scale_1=None, comm_quant_scale_2=None,
                           antiquant_group_size: int = 0, comm_turn: int = 0, group_sizes=None, y_dtype=None,
                           x1_dtype=None, x2_dtype=None, dequant_scale_dtype=None, pertoken_scale_dtype=None,
                           comm_quant_mode: int = 0, comm_mode=None, meta_outputs=None):
    """TorchAir's converter of `npu::npu_mm_all_reduce_base` starts with `import torch_npu` (for the
    fp4 dtype constant of its quantised branch), which fails on a CPU host for every call. The
    completion lowers the non-quantised case (fp16/bf16 x1 and x2, no scales, no dtype arguments)
    to exactly the graph TorchAir's converter builds for it: `MatmulAllReduce(x1, x2, bias, x3,
    group=hcom, reduce_op, is_trans_a=False, is_trans_b=False, comm_turn, antiquant_group_size,
    group_size=0, y_dtype=DT_UNDEFINED, comm_quant_mode, comm_mode or "ai_cpu")` with the output's
    dtype x1's, after the same checks; every other case is TorchAir's."""
    kwargs = {"reduce_op": reduce_op, "bias": bias, "antiquant_scale": antiquant_scale,
              "antiquant_offset": antiquant_offset, "x3": x3, "dequant_scale": dequant_scale,
              "pertoken_scale": pertoken_scale, "comm_quant_scale_1": comm_quant_scale_1,
              "comm_quant_scale_2": comm_quant_scale_2, "antiquant_group_size": antiquant_group_size,
              "comm_turn": comm_turn, "group_sizes": group_sizes, "y_dtype": y_dtype, "x1_dtype": x1_dtype,
              "x2_dtype": x2_dtype, "dequant_scale_dtype": dequant_scale_dtype,
              "pertoken_scale_dtype": pertoken_scale_dtype, "comm_quant_mode": comm_quant_mode,
              "comm_mode": comm_mode}
    data_type = ta.graph.DataType
    plain = all(value is None for value in (antiquant_scale, dequant_scale, group_sizes, y_dtype, x1_dtype, x2_dtype,
                                            dequant_scale_dtype, pertoken_scale_dtype))
    if not plain or x1.dtype not in (data_type.DT_FLOAT16, data_type.DT_BF16):
        return ta.original(x1, x2, hcom, **kwargs, meta_outputs=meta_outputs)
    for name, value in (("x2", x2), ("bias", bias), ("x3", x3)):  # TorchAir's check_dtype_non_quant
        if value is not None and value.dtype != x1.dtype:
            raise AssertionError(f"Non-quant scene: x1 dtype {x1.dtype} != {name} dtype {value.dtype}, must be same.")
    for name, value in (("x1", x1), ("x2", x2)):
        if value.rank < 2:
            raise RuntimeError(f"Input {name} dimension can't be less than 2, actual {name} dimension is {value.rank}.")
    allowed = ("ccu", "ai_cpu") if ta.is_arch35() else ("ai_cpu",)
    if comm_mode is not None and comm_mode not in allowed:
        raise RuntimeError(f"npu_mm_all_reduce_base: comm_mode {comm_mode!r} must be one of {allowed} on this SoC")
    out = ta.ge.MatmulAllReduce(
        x1, x2, bias=bias, x3=x3, antiquant_scale=None, antiquant_offset=antiquant_offset, dequant_scale=None,
        pertoken_scale=pertoken_scale, comm_quant_scale_1=comm_quant_scale_1, comm_quant_scale_2=comm_quant_scale_2,
        group=hcom, reduce_op=reduce_op, is_trans_a=False, is_trans_b=False, comm_turn=comm_turn,
        antiquant_group_size=antiquant_group_size, group_size=0, y_dtype=data_type.DT_UNDEFINED,
        comm_quant_mode=comm_quant_mode, comm_mode=comm_mode or "ai_cpu")
    out.desc.dtype = ta.graph._ge_dtype_to_ge_proto_dtype(x1.dtype)  # pylint: disable=protected-access
    return out

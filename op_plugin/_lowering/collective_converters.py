"""Completions of TorchAir's collective converters (`when="completes"`): `reduce_type="avg"`.
(`npu::npu_mm_all_reduce_base` is TorchAir's own converter: its `import torch_npu` gets the CPU host's
stand-in while it runs, simulator hosting/converter_torch_npu.py.)

TorchAir lowers torch's functional all_reduce / reduce_scatter_tensor to `HcomAllReduce` /
`HcomReduceScatter` with `normalize_reduceop_type(reduce_type)`, which raises
`ge unsupported reduce type AVG` on any host: HCCL has no average. torch_npu's eager
ProcessGroupHCCL computes AVG as HCCL's SUM followed by a division by the group size
(`getHcclReduceOp`: "HCCL does not support ReduceOp::AVG yet, PTA supports it by summing first,
then dividing"), as gloo does. The completion lowers "avg" the same way: TorchAir's own
converter with "sum", then `Div` by the group size in the tensor's dtype. Every other reduction is
TorchAir's.

The targets are named as strings ("ns::name"), resolved when the converters are installed: torch
registers the legacy `c10d_functional` ops only when torch.distributed._functional_collectives is
imported (TorchAir imports it), and op_plugin's import does not pay for that.

Integer and bool tensors are refused: torch's eager AVG divides in place (`div_`), which fails for
them on gloo and HCCL alike ("result type Float can't be cast to ..."), so there is no eager
result to be faithful to.
"""
from __future__ import annotations

import torch

from .registry import aten_converter
from .torchair_api import TorchAirApi

_FLOAT_TYPES = ("DT_FLOAT", "DT_FLOAT16", "DT_BF16", "DT_DOUBLE")


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


@aten_converter("_c10d_functional::all_reduce", when="completes")
def all_reduce(ta: TorchAirApi, self, reduce_type: str, group_name: str, *, out=None, meta_outputs=None):
    """`_c10d_functional.all_reduce(x, "avg", group)`: HcomAllReduce(sum), then Div by the group
    size (module docstring); other reductions are TorchAir's."""
    if reduce_type.lower() != "avg":
        return ta.original(self, reduce_type, group_name, out=out, meta_outputs=meta_outputs)
    summed = ta.original(self, "sum", group_name, out=out, meta_outputs=meta_outputs)
    return _average(ta, summed, self.dtype, _group_size(group_name), "_c10d_functional.all_reduce")


@aten_converter("c10d_functional::all_reduce", when="completes")
def all_reduce_legacy(ta: TorchAirApi, self, reduce_type: str, tag: str, rank_list, group_size: int, *,
                      out=None, meta_outputs=None):
    """The legacy `c10d_functional.all_reduce(x, "avg", tag, ranks, group_size)`: as `all_reduce`."""
    if reduce_type.lower() != "avg":
        return ta.original(self, reduce_type, tag, rank_list, group_size, out=out, meta_outputs=meta_outputs)
    summed = ta.original(self, "sum", tag, rank_list, group_size, out=out, meta_outputs=meta_outputs)
    return _average(ta, summed, self.dtype, group_size, "c10d_functional.all_reduce")


@aten_converter("_c10d_functional::reduce_scatter_tensor", when="completes")
def reduce_scatter_tensor(ta: TorchAirApi, self, reduce_type: str, group_size: int, group_name: str, *,
                          out=None, meta_outputs=None):
    """`_c10d_functional.reduce_scatter_tensor(x, "avg", n, group)`: HcomReduceScatter(sum), then
    Div by the group size, as torch_npu's eager reduce_scatter with AVG."""
    if reduce_type.lower() != "avg":
        return ta.original(self, reduce_type, group_size, group_name, out=out, meta_outputs=meta_outputs)
    summed = ta.original(self, "sum", group_size, group_name, out=out, meta_outputs=meta_outputs)
    return _average(ta, summed, self.dtype, group_size, "_c10d_functional.reduce_scatter_tensor")


@aten_converter("c10d_functional::reduce_scatter_tensor", when="completes")
def reduce_scatter_tensor_legacy(ta: TorchAirApi, self, reduce_type: str, tag: str, rank_list, group_size: int, *,
                                 out=None, meta_outputs=None):
    """The legacy `c10d_functional.reduce_scatter_tensor(x, "avg", tag, ranks, group_size)`."""
    if reduce_type.lower() != "avg":
        return ta.original(self, reduce_type, tag, rank_list, group_size, out=out, meta_outputs=meta_outputs)
    summed = ta.original(self, "sum", tag, rank_list, group_size, out=out, meta_outputs=meta_outputs)
    return _average(ta, summed, self.dtype, group_size, "c10d_functional.reduce_scatter_tensor")

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

`all_to_all_single`'s decomposition (`install_torchair_corrections`, on both hosts, every TorchAir
mode): TorchAir decomposes `_c10d_functional.all_to_all_single` into its
`npu_define.all_to_all_single_npu` with counts in elements, taking the elements per row as
`numel // shape[0]`, or `numel` when `shape[0] == 0`. A rank with no rows to send then gets every
count 0: its receive counts too, and with equal (zero) counts the converter writes the even
`HcomAllToAll` while its peers run `HcomAllToAllV` and send it rows (a rank-divergent graph on any
host). The correction takes the row size from the trailing dims, which also asks nothing of a
data-dependent dim 0 (TorchAir's `shape[0] == 0` raised GuardOnDataDependentSymNode).

Split sizes computed inside the graph (`.tolist()` / `.item()` of a tensor, as MoE token dispatch does)
are refused there in GE mode, naming what works (`_refuse_data_dependent_splits`, docs/distributed.md).
"""
from __future__ import annotations

import functools
import math

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


# ---- all_to_all_single: the decomposition, and split sizes computed in the graph ----------------------

def all_to_all_single_decomposition(input_tensor, output_split_sizes, input_split_sizes, group_name: str, *,
                                    refuse_data_dependent: bool = True):
    """`_c10d_functional.all_to_all_single` as TorchAir's `npu_define.all_to_all_single_npu`, with the counts
    in elements of rows whose size comes from the trailing dims (module docstring)."""
    if refuse_data_dependent:
        _refuse_data_dependent_splits(input_tensor, output_split_sizes, input_split_sizes)
    c10d = torch.distributed.distributed_c10d
    group = c10d._resolve_process_group(group_name)
    ranks = torch.distributed.get_process_group_ranks(group)
    size = len(ranks)
    row = math.prod(input_tensor.shape[1:])
    even = [input_tensor.shape[0] // size] * size
    sends = [rows * row for rows in (even if input_split_sizes is None else input_split_sizes)]
    recvs = [rows * row for rows in (even if output_split_sizes is None else output_split_sizes)]
    if len(sends) != size or len(recvs) != size:
        raise ValueError(f"_c10d_functional.all_to_all_single: {len(sends)} input and {len(recvs)} output split "
                         f"sizes for a group of {size} ranks ({group_name!r})")
    send_displacements = [sum(sends[:i]) for i in range(size)]
    recv_displacements = [sum(recvs[:i]) for i in range(size)]
    return torch.ops.npu_define.all_to_all_single_npu(input_tensor, sends, send_displacements, recvs,
                                                      recv_displacements, c10d._get_group_tag(group), ranks, size)


def install_torchair_corrections(torchair) -> None:
    """TorchAir's merged decompositions (`npu_fx_compiler._get_merged_decompositions`, which every compile of
    `get_npu_backend` and of its cache compiler reads) with `all_to_all_single`'s corrected, unless the user
    gave their own; data-dependent splits are refused in GE mode only (idempotent; a TorchAir without that
    function is left as it is)."""
    npu_fx_compiler = getattr(torchair, "npu_fx_compiler", None)
    original = getattr(npu_fx_compiler, "_get_merged_decompositions", None)
    if original is None or getattr(original, "_op_plugin_corrected", False):
        return

    @functools.wraps(original)
    def get_merged_decompositions(compiler_config, custom_decompositions=None):
        decompositions = original(compiler_config, custom_decompositions)
        op = torch.ops._c10d_functional.all_to_all_single.default
        if op in decompositions and op not in (custom_decompositions or {}):
            ge_mode = compiler_config.mode.value == "max-autotune"
            decompositions[op] = functools.partial(all_to_all_single_decomposition, refuse_data_dependent=ge_mode)
        return decompositions

    get_merged_decompositions._op_plugin_corrected = True
    npu_fx_compiler._get_merged_decompositions = get_merged_decompositions


def _refuse_data_dependent_splits(input_tensor, output_split_sizes, input_split_sizes) -> None:
    """Split sizes (or an input dim 0) read from a tensor's data in the graph: unbacked sizes, which TorchAir's
    GE lowering cannot carry (no converter for `.tolist()`'s `aten._local_scalar_dense`; its converters ask
    every node's output size for concrete answers), on an Ascend host alike. Refused here, naming what works."""
    from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols

    sizes = [*(output_split_sizes or ()), *(input_split_sizes or ()), *input_tensor.shape[:1]]
    if not any(isinstance(size, torch.SymInt) and free_unbacked_symbols(size) for size in sizes):
        return
    raise NotImplementedError(
        "all_to_all_single with split sizes read from a tensor inside the graph (.tolist() / .item(): "
        "data-dependent sizes): TorchAir's GE mode cannot lower them, on an Ascend host alike. Compute the splits "
        "outside the compiled function and pass them in as lists of Python ints (with dynamic=True new values "
        "reuse the graph), or read them in a function under torch.compiler.disable (a graph break), or compile "
        "this part with backend='aot_eager'. Splits known at trace time compile to HcomAllToAllV "
        "(docs/distributed.md)")

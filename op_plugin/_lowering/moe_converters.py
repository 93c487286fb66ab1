"""op_plugin's GE converters for mixture-of-experts models (transformers' default `grouped_mm`
experts: Mixtral, Qwen2-MoE, ...), which neither TorchAir nor torch_npu lowers in graph mode:

- `aten.histc` (tokens per expert): GE `Histogram(x, bins, min, max)`, aclnnHistc's semantics
  (hicann ops-math math/histogram_v2: equal-width bins over [min, max], min == max takes the data's
  range, values outside are not counted); x cast to float32 unless float16/float32/int32, the
  counts cast to the node's dtype.
- `aten._grouped_mm` (bfloat16 `F.grouped_mm`) and transformers' float32 op
  `transformers::grouped_mm_fallback` with its backward: GE `GroupedMatmul` (CANN ops-transformer
  gmm/grouped_matmul), non-quantised, split_item 3, the rows of x grouped by the cumulative
  offsets (group_type 0). The empty quantisation lists are filled as TorchAir's own
  `npu_grouped_matmul` converter fills them; that converter is not called because it imports
  torch_npu while lowering, which the CPU simulator never does. The backward's input gradient is
  the same call on the transposed weights; its weight gradient groups the token axis
  (`GroupedMatmul([input^T], [grad])`, group_type 2).

transformers registers its ops when its MoE module is imported, possibly after npugraph's first
compile: `install_library_converters` runs at every compile and installs what has appeared since.
"""
from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

import torch

from .._base.handles import HandleGroup, RegistrationHandle
from ._converter_slots import ge_graph, raw_ge_ops, replace_converter, torchair_lowers


def histc(torchair: Any) -> Callable:
    def convert(self, bins=100, min=0, max=0, meta_outputs=None):  # noqa: A002 (aten's names)
        graph_module = ge_graph(torchair)
        data_type, cast = graph_module.DataType, graph_module.Cast
        x = self if self.dtype in (data_type.DT_FLOAT, data_type.DT_FLOAT16, data_type.DT_INT32) else \
            cast(self, dst_type=data_type.DT_FLOAT)  # Histogram takes float16/float32/int32
        counts = raw_ge_ops(torchair).Histogram(x, bins=bins, min=float(min), max=float(max))
        return cast(counts, dst_type=meta_outputs.dtype) if counts.dtype != meta_outputs.dtype else counts

    return convert


def grouped_mm(torchair: Any) -> Callable:
    """x (M, K) times one (K, N) weight per group of x's rows, groups ending at `offs` (cumulative)."""
    def convert(self, mat2, offs=None, bias=None, out_dtype=None, meta_outputs=None):
        if self.rank != 2 or mat2.rank != 3 or offs is None:
            raise NotImplementedError(
                "grouped mm: op_plugin lowers a 2-D input by a 3-D (groups, K, N) weight with offsets "
                f"(mixture of experts); got ranks {self.rank} and {mat2.rank}, offs "
                f"{'given' if offs is not None else None}")
        graph_module = ge_graph(torchair)
        if out_dtype is not None and graph_module.torch_dtype_value_to_ge_type(out_dtype) != self.dtype:
            raise NotImplementedError("grouped mm: an out_dtype other than the input's is a quantised case")
        if bias is not None:
            raise NotImplementedError("grouped mm: a bias is not lowered (transformers adds it after the call)")
        return _gmm(torchair, self, mat2, offs, group_type=0, dtype=self.dtype)

    return convert


def _gmm(torchair: Any, x, weight, group_list, group_type, dtype):
    """GE GroupedMatmul as TorchAir's npu_grouped_matmul converter builds it for a non-quantised
    single-tensor call (empty lists filled as it fills them), split_item 3, cumulative group_list.
    `dtype`: x's GE dtype (a Transpose's output does not carry one yet)."""
    ge = raw_ge_ops(torchair)
    graph_module = ge_graph(torchair)
    data_type, const = graph_module.DataType, graph_module.Const

    def empty(dtype):
        return [ge.Fill(const([0], dtype=data_type.DT_INT32), graph_module.Cast(0.0, dst_type=dtype))]

    gmm = importlib.import_module(f"{torchair.__name__}._ge_concrete_graph.dynamic_output_ops").GroupedMatmul
    bias = empty(data_type.DT_FLOAT if dtype == data_type.DT_BF16 else dtype)
    outputs = gmm([x], [weight], bias, empty(data_type.DT_UINT64), empty(data_type.DT_FLOAT),
                  empty(data_type.DT_FLOAT16), empty(data_type.DT_FLOAT16),
                  graph_module.Cast(group_list, dst_type=data_type.DT_INT64), None, split_item=3, dtype=-1,
                  transpose_weight=False, transpose_x=False, group_type=group_type, group_list_type=0, act_type=0)
    return outputs[0]


def _grouped_mm_fallback_backward(torchair: Any) -> Callable:
    """d input: each group's rows of grad times its weight transposed (rows grouped, as the forward);
    d weight: input^T times grad with the token axis grouped (GroupedMatmul group_type 2, as torch_npu's
    gmm backward computes the weight gradient)."""
    def convert(input, weight, offs, grad_output, meta_outputs=None):  # noqa: A002 (the op's names)
        ge = raw_ge_ops(torchair)
        const = ge_graph(torchair).Const
        grad_input = _gmm(torchair, grad_output, ge.Transpose(weight, const([0, 2, 1])), offs, group_type=0,
                          dtype=grad_output.dtype)
        grad_weight = _gmm(torchair, ge.Transpose(input, const([1, 0])), grad_output, offs, group_type=2,
                           dtype=input.dtype)
        return grad_input, grad_weight

    return convert


def _grouped_mm_fallback(torchair: Any) -> Callable:
    lowering = grouped_mm(torchair)

    def convert(input, weight, offs, meta_outputs=None):  # noqa: A002 (the op's names)
        return lowering(input, weight, offs, meta_outputs=meta_outputs)

    return convert


# (namespace, name) of an op a model library registers -> factory of op_plugin's converter.
LIBRARY_CONVERTERS = {
    ("transformers", "grouped_mm_fallback"): _grouped_mm_fallback,
    ("transformers", "grouped_mm_fallback_backward"): _grouped_mm_fallback_backward,
}
_library_handles: dict[tuple[str, str], RegistrationHandle] = {}


def install_library_converters(torchair: Any) -> HandleGroup:
    """Register op_plugin's converter for each library op of LIBRARY_CONVERTERS that exists by now
    (and is not installed already, nor lowered by TorchAir itself)."""
    group = HandleGroup("op_plugin's converters of library ops")
    for key, factory in LIBRARY_CONVERTERS.items():
        installed = _library_handles.get(key)
        if installed is not None and not installed.destroyed:
            continue
        namespace, name = key
        try:
            op = getattr(getattr(torch.ops, namespace), name).default
        except (AttributeError, RuntimeError):
            continue  # the library is not imported (yet)
        if torchair_lowers(op):
            continue
        _library_handles[key] = group.add(replace_converter(torchair, op, factory(torchair),
                                                           f"op_plugin's converter of {op}"))
    return group

"""op_plugin's GE converters for mixture-of-experts models (transformers' default `grouped_mm`
experts: Mixtral, Qwen2-MoE, ...), which neither TorchAir nor torch_npu lowers in graph mode:
tokens per expert by `aten.histc`, then grouped matmuls, `aten._grouped_mm` in bfloat16 and
transformers' own op `transformers::grouped_mm_fallback` in float32 (with its backward in training).

transformers registers its ops when its MoE module is imported, possibly after npugraph's first
compile: they are library converters (`registry.library_converter`), installed at the first
compile after transformers registers them.
"""
from __future__ import annotations

import torch

from .cases import BF16, F32, Support, T
from .registry import aten_converter, library_converter
from .torchair_api import TorchAirApi


@aten_converter(torch.ops.aten.histc.default, when="missing",
                cases=[Support(F32(64, value_range=(0, 1)), bins=4, min=0, max=1), Support(F32(50), bins=5),
                       Support(F32(8, 8, value_range=(-2, 2)), bins=3, min=-1, max=1),
                       Support(T([0.0, 3.0, 1.0, 1.0, 2.0, 3.0], dtype=torch.float32), bins=4, min=0, max=3)])
def histc(ta: TorchAirApi, self, bins=100, min=0, max=0, meta_outputs=None):  # aten's names
    """`aten.histc` (tokens per expert): GE `Histogram(x, bins, min, max)`, aclnnHistc's semantics
    (hicann ops-math `math/histogram_v2/docs/aclnnHistc.md`: equal-width bins over [min, max],
    min == max takes the data's range, values outside are not counted); x cast to float32 unless
    float16/float32/int32, the counts cast to the node's dtype."""
    graph_module = ta.graph
    data_type, cast = graph_module.DataType, graph_module.Cast
    x = self if self.dtype in (data_type.DT_FLOAT, data_type.DT_FLOAT16, data_type.DT_INT32) else \
        cast(self, dst_type=data_type.DT_FLOAT)  # Histogram takes float16/float32/int32
    counts = ta.ge.Histogram(x, bins=bins, min=float(min), max=float(max))
    return cast(counts, dst_type=meta_outputs.dtype) if counts.dtype != meta_outputs.dtype else counts


@aten_converter(torch.ops.aten._grouped_mm.default, when="missing",
                cases=[Support(BF16(6, 16), BF16(2, 16, 8), offs=T([2, 6], dtype=torch.int32)),
                       Support(BF16(10, 8), BF16(3, 8, 16), offs=T([3, 3, 10], dtype=torch.int32))])
def grouped_mm(ta: TorchAirApi, self, mat2, offs=None, bias=None, out_dtype=None, meta_outputs=None):
    """`aten._grouped_mm` (bfloat16 `F.grouped_mm`): x (M, K) times one (K, N) weight per group of
    x's rows, groups ending at `offs` (cumulative). GE `GroupedMatmul` (CANN ops-transformer
    gmm/grouped_matmul, aclnnGroupedMatmul.md: y_i = x_i @ w_i, rows past the last group not
    updated), non-quantised, split_item 3, the rows of x grouped by the cumulative offsets
    (group_type 0). The empty quantisation lists are filled as TorchAir's own `npu_grouped_matmul`
    converter fills them (TorchAir has no converter for `aten._grouped_mm`)."""
    if self.rank != 2 or mat2.rank != 3 or offs is None:
        raise NotImplementedError(
            "grouped mm: op_plugin lowers a 2-D input by a 3-D (groups, K, N) weight with offsets "
            f"(mixture of experts); got ranks {self.rank} and {mat2.rank}, offs "
            f"{'given' if offs is not None else None}")
    if out_dtype is not None and ta.graph.torch_dtype_value_to_ge_type(out_dtype) != self.dtype:
        raise NotImplementedError("grouped mm: an out_dtype other than the input's is a quantised case")
    if bias is not None:
        raise NotImplementedError("grouped mm: a bias is not lowered (transformers adds it after the call)")
    return _gmm(ta, self, mat2, offs, group_type=0, dtype=self.dtype)


def _gmm(ta: TorchAirApi, x, weight, group_list, group_type, dtype):
    """GE GroupedMatmul as TorchAir's npu_grouped_matmul converter builds it for a non-quantised
    single-tensor call (empty lists filled as it fills them), split_item 3, cumulative group_list.
    `dtype`: x's GE dtype (a Transpose's output does not carry one yet)."""
    ge, graph_module = ta.ge, ta.graph
    data_type, const = graph_module.DataType, graph_module.Const

    def empty(dtype):
        return [ge.Fill(const([0], dtype=data_type.DT_INT32), graph_module.Cast(0.0, dst_type=dtype))]

    gmm = ta.dynamic_ge.GroupedMatmul
    bias = empty(data_type.DT_FLOAT if dtype == data_type.DT_BF16 else dtype)
    outputs = gmm([x], [weight], bias, empty(data_type.DT_UINT64), empty(data_type.DT_FLOAT),
                  empty(data_type.DT_FLOAT16), empty(data_type.DT_FLOAT16),
                  graph_module.Cast(group_list, dst_type=data_type.DT_INT64), None, split_item=3, dtype=-1,
                  transpose_weight=False, transpose_x=False, group_type=group_type, group_list_type=0, act_type=0)
    return outputs[0]


@library_converter("transformers::grouped_mm_fallback",
                   cases=[Support(F32(6, 4), F32(2, 4, 3), T([2, 6], dtype=torch.int32))])
def grouped_mm_fallback(ta: TorchAirApi, input, weight, offs, meta_outputs=None):  # the op's names
    """transformers' float32 op `transformers::grouped_mm_fallback` (its `grouped_mm` experts under
    compile): lowered as `aten._grouped_mm` (GroupedMatmul, group_type 0)."""
    return grouped_mm(ta, input, weight, offs, meta_outputs=meta_outputs)


@library_converter("transformers::grouped_mm_fallback_backward",
                   cases=[Support(F32(6, 4), F32(2, 4, 3), T([2, 6], dtype=torch.int32), F32(6, 3))])
def grouped_mm_fallback_backward(ta: TorchAirApi, input, weight, offs, grad_output,
                                 meta_outputs=None):
    """The backward op of `transformers::grouped_mm_fallback`. d input: each group's rows of grad
    times its weight transposed (rows grouped, as the forward: GroupedMatmul group_type 0); d
    weight: input^T times grad with the token axis grouped (`GroupedMatmul([input^T], [grad])`,
    group_type 2, as torch_npu's gmm backward computes the weight gradient)."""
    ge, const = ta.ge, ta.graph.Const
    grad_input = _gmm(ta, grad_output, ge.Transpose(weight, const([0, 2, 1])), offs, group_type=0,
                      dtype=grad_output.dtype)
    grad_weight = _gmm(ta, ge.Transpose(input, const([1, 0])), grad_output, offs, group_type=2, dtype=input.dtype)
    return grad_input, grad_weight

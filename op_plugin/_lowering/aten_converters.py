"""op_plugin's own GE converters for aten ops that real models produce and TorchAir does not lower.

Installed on every host (an Ascend host's TorchAir has the same gaps), and only where TorchAir
has no converter or one that only raises NotImplementedError: when a later TorchAir lowers the op
itself, its converter is kept and ours is not installed (`install_aten_converters` checks each op
at install time). docs/npu-faithful-lowering.md lists them.

- `aten.true_divide.Tensor` / `aten.true_divide.Scalar`: torch defines true_divide as an alias of
  `div` with rounding_mode=None (torch.true_divide docs; native_functions.yaml implements it by
  calling div). TorchAir's converters raise NotImplementedError; dynamo produces the op when a
  Python float becomes a 0-d tensor input under dynamic shapes (GPT-2's attention scaling with
  `dynamic=True`). Lowered with TorchAir's own `aten.div.Tensor` / `aten.div.Scalar` converter
  (RealDiv after TorchAir's dtype promotion), so the GE graph is what `div` gives.
- `aten.norm.ScalarOpt_dim` / `aten.norm.ScalarOpt_dim_dtype`: ATen computes `norm(self, p, dim,
  keepdim[, dtype])` as `linalg_vector_norm(self, p if p is not None else 2, dim, keepdim,
  dtype=dtype)` (aten/src/ATen/native/ReduceOps.cpp, `impl_func_norm`). TorchAir's converters raise
  NotImplementedError; `torch._weight_norm` (weight-normalised convolutions, e.g. Wav2Vec2's
  positional embedding) reaches it through `norm_except_dim` on an Ascend host. Lowered with
  TorchAir's own `aten.linalg_vector_norm` converter (LpNormV2).
- `aten.silu_backward`: TorchAir lowers `aten.silu` to `Swish(scale=1.0)` and raises
  NotImplementedError for the backward (every SiLU/SwiGLU model in training: Llama, Qwen2).
  Lowered to Swish's own backward, `SwishGrad(grad, x, y=Swish(x), scale=1.0)` (hicann ops-nn
  activation/swish_grad: grad_x = grad * sigmoid(x) * (1 + x * (1 - sigmoid(x)))), the pair
  torch_npu itself uses for its Swish-based silu (Ascend/op-plugin op_plugin/ops/aclops/
  SiluKernelNpu.cpp).

- `aten.eye.default` / `aten.eye.m`: TorchAir's converters raise NotImplementedError; XLNet builds
  its attention mask with `torch.eye(seq_len)`. torch_npu's eager eye is aclnnEye (an identity
  matrix, Ascend/op-plugin EyeKernelNpuOpApi.cpp); GE's `Eye` takes its sizes as attributes, which
  a symbolic length cannot be. Lowered as `Cast(Equal(Unsqueeze(Range(n), 1), Unsqueeze(Range(m),
  0)), dtype)`, with TorchAir's own `aten.arange` converter for the ranges.
- `aten.index_put` (`.default`, `.hacked_twin`) and `aten._unsafe_index_put`: TorchAir's converters
  raise NotImplementedError, so `x[..., i, j] = v` and the backward of every `x[..., i, j]` gather
  (BEiT's relative position bias table, and bilinear interpolation's decomposition, in training)
  fail to lower. aten semantics (native_functions.yaml index_put; negative indices wrap, indices
  broadcast together, values broadcast to the indexed shape) for integer index tensors on adjacent
  dims after any number of ':'; other patterns raise NotImplementedError naming the op. The indexed
  dims are merged into one (x reshaped, flat index ((i0 * s1) + i1) * ...); with accumulate:
  `InplaceIndexAdd(TensorMove(x), flat, values, axis)`, fed as TorchAir's own `index_add` converter
  feeds it (int32 indices, a copy of x); without: `ScatterElements(x, flat broadcast, values, axis)`
  (repeated indices: the NPU's pick, unspecified as in torch); then reshaped back.
- `aten.histc`, `aten._grouped_mm` (mixture of experts): moe_converters.py.
- `torch.sym_max` / `torch.sym_min` (size arithmetic in the FX graph, not aten ops): TorchAir lowers
  operator.add/sub/mul/floordiv/... (builtin_converters.py) but not these; sliding-window attention
  (Mistral, Gemma2) computes `max(0, cache_length - window)` with `dynamic=True`. Lowered like
  TorchAir's operator converters: Python's max/min when both are ints, else GE `Maximum`/`Minimum`
  after TorchAir's dtype promotion to the node's dtype.

Completions: where TorchAir's converter lowers an op but raises NotImplementedError (or fails) for
one case real models produce, op_plugin's converter lowers that case and hands every other to TorchAir's:

- `aten.convolution_backward` with a one-element stride/padding/dilation/output_padding (aten passes
  `padding=[0]` for `padding="valid"`, e.g. EfficientNet's depthwise convs in training): ATen expands
  it to every spatial dim (Convolution.cpp, expand_param_if_needed); TorchAir's converter indexes
  `padding[1]` and fails with IndexError. Expanded as ATen does, then TorchAir's converter.

- `aten.constant_pad_nd` with symbolic pads (a dynamic-shape model padding by a size, e.g. Swin's
  window padding with `dynamic=True`): TorchAir gets the pad list as one GE tensor and raises.
  Lowered exactly as TorchAir lowers a pad list: torch's (last dim first) pairs are reversed into
  PadV3's per-dimension order and zero pairs fill the leading dimensions, only with GE ops on the
  tensor (Reshape [k, 2], ReverseV2 axis 0, Reshape [2k], ConcatV2 after zeros), then
  `PadV3(x, paddings, value)`.
- `aten.clone` with `memory_format=torch.channels_last` (or channels_last_3d / preserve_format):
  TorchAir raises NotImplementedError for any format but contiguous; BEiT/YOLOS/PVT/DPT's position
  embedding interpolation produces it. A GE tensor has no strides (its layout is its shape), so the
  clone's values are its input's: `Identity(x)`. The graph output is contiguous where eager's is
  channels_last (same values; TorchAir gives contiguous outputs on an Ascend host too).
- `aten._native_batch_norm_legit.no_stats` (training batch norm without running statistics, e.g.
  BiT's weight-standardised convolutions normalising their weights with `F.batch_norm(w, None,
  None, training=True)`): TorchAir lowers it on arch35 SoCs only and raises NotImplementedError
  elsewhere. Lowered off arch35 exactly as TorchAir lowers it on arch35: its own
  `_native_batch_norm_legit_functional` converter (BatchNormV3, training) fed running statistics
  filled with 0 and 1, returning (y, save_mean, save_rstd) as TorchAir's arch35 branch does.
"""
from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

import torch

from .._base.handles import HandleGroup
from ._converter_slots import (
    ge_graph, is_not_implemented_stub, raw_ge_ops, replace_converter, torchair_converter, torchair_lowers,
)
from .moe_converters import grouped_mm, histc


def _same_args(*args, **kwargs):
    return args, kwargs


def _alias_of(target: Any, translate: Callable = _same_args) -> Callable[[Any], Callable]:
    """A converter factory lowering an op as TorchAir lowers `target`, with the arguments
    `translate(*args, **kwargs) -> (args, kwargs)` gives. TorchAir's converter of `target` is
    looked up when a graph is lowered (installation imports nothing of TorchAir's)."""

    def factory(torchair: Any) -> Callable:
        del torchair

        def convert(*args, meta_outputs=None, **kwargs):
            lower_target = torchair_converter(target)
            if lower_target is None or is_not_implemented_stub(lower_target):
                raise NotImplementedError(f"op_plugin lowers this op as {target}, which this TorchAir does not lower")
            args, kwargs = translate(*args, **kwargs)
            return lower_target(*args, meta_outputs=meta_outputs, **kwargs)

        return convert

    return factory


def _norm_as_vector_norm(self, p=None, dim=None, keepdim=False, dtype=None):
    return (self, 2 if p is None else p, dim, keepdim), {"dtype": dtype}


def _silu_backward(torchair: Any) -> Callable:
    def convert(grad_output, self, meta_outputs=None):
        ge = raw_ge_ops(torchair)
        return ge.SwishGrad(grad_output, self, ge.Swish(self, scale=1.0), scale=1.0)

    return convert


def _eye(torchair: Any) -> Callable:
    def convert(n, m=None, *, dtype=None, layout=None, device=None, pin_memory=None, meta_outputs=None):
        del dtype, layout, device, pin_memory  # the dtype is meta_outputs'; the rest do not change the graph
        ge = raw_ge_ops(torchair)
        graph_module = ge_graph(torchair)
        arange = torchair_converter(torch.ops.aten.arange.default)
        rows = ge.Unsqueeze(arange(n, dtype=torch.int64, meta_outputs=None), axes=[1])
        cols = ge.Unsqueeze(arange(n if m is None else m, dtype=torch.int64, meta_outputs=None), axes=[0])
        return graph_module.Cast(ge.Equal(rows, cols), dst_type=meta_outputs.dtype)  # a GE DataType

    return convert


def _sym_extreme(python_fn: Callable, ge_type: str) -> Callable[[Any], Callable]:
    def factory(torchair: Any) -> Callable:
        def convert(a, b, meta_outputs=None):
            graph_module = ge_graph(torchair)
            if not isinstance(a, graph_module.Tensor) and not isinstance(b, graph_module.Tensor):
                return python_fn(a, b)
            utils = importlib.import_module(f"{torchair.__name__}._ge_concrete_graph.utils")
            a, b = utils.dtype_promote(a, b, target_dtype=meta_outputs.dtype)
            return getattr(raw_ge_ops(torchair), ge_type)(a, b)

        return convert

    return factory


def _index_put(torchair: Any) -> Callable:
    def convert(self, indices, values, accumulate=False, meta_outputs=None):
        ge = raw_ge_ops(torchair)
        graph_module = ge_graph(torchair)
        utils = importlib.import_module(f"{torchair.__name__}._ge_concrete_graph.utils")
        int32, const = graph_module.DataType.DT_INT32, graph_module.Const
        positions = [i for i, index in enumerate(indices) if index is not None]
        if (not positions or positions != list(range(positions[0], positions[-1] + 1))
                or any(indices[i].dtype in (graph_module.DataType.DT_BOOL, graph_module.DataType.DT_UINT8)
                       for i in positions)):
            raise NotImplementedError(
                "aten.index_put: op_plugin lowers integer index tensors on adjacent dims after any number "
                f"of ':' (x[:, i, j] = v, and the backward of x[:, i, j]); got indices {indices}")
        axis, count, rank = positions[0], len(positions), self.rank
        shape = ge.Shape(self, dtype=int32)
        # the indexed dims merged into one: flat = ((i0 * s1) + i1) * s2 + ..., each index wrapped
        # when negative; int32 as TorchAir's index_add converter feeds InplaceIndexAdd (the NPU
        # kernel splits an int64 into two int32). Add/Mul broadcast the indices together.
        flat = None
        for dim in positions:
            size = ge.Gather(shape, dim)
            index = utils.dtype_promote(indices[dim], target_dtype=int32)
            index = ge.SelectV2(ge.Less(index, const(0, dtype=int32)), ge.Add(index, size), index)
            flat = index if flat is None else ge.Add(ge.Mul(flat, size), index)
        lead = [ge.Gather(shape, const(list(range(axis)), dtype=int32))] if axis else []
        trail = ([ge.Gather(shape, const(list(range(axis + count, rank)), dtype=int32))]
                 if axis + count < rank else [])
        merged = lead + [const([-1], dtype=int32)] + trail
        merged = ge.ConcatV2(merged, const(0), N=len(merged))
        # aten broadcasts values to the indexed shape: self.shape[:axis] + indices' shape + the rest
        indexed = lead + [ge.Shape(flat, dtype=int32)] + trail
        values = ge.Reshape(ge.BroadcastTo(values, ge.ConcatV2(indexed, const(0), N=len(indexed))), merged)
        flat = ge.Reshape(flat, const([-1]))
        target = ge.Reshape(self, merged)
        if accumulate:
            # InplaceIndexAdd updates its input: a copy first, as TorchAir's index_add does
            result = ge.InplaceIndexAdd(ge.TensorMove(target), flat, values, None, axis=axis)
        else:
            out_rank = rank - count + 1
            spread = ge.Reshape(flat, const([1] * axis + [-1] + [1] * (out_rank - axis - 1)))
            result = ge.ScatterElements(target, ge.BroadcastTo(spread, ge.Shape(values, dtype=int32)), values,
                                        axis=axis)
        return ge.Reshape(result, shape)

    return convert


# op -> factory of op_plugin's converter (given the host's TorchAir).
ATEN_CONVERTERS = {
    torch.ops.aten.true_divide.Tensor: _alias_of(torch.ops.aten.div.Tensor),
    torch.ops.aten.true_divide.Scalar: _alias_of(torch.ops.aten.div.Scalar),
    torch.ops.aten.norm.ScalarOpt_dim: _alias_of(torch.ops.aten.linalg_vector_norm.default, _norm_as_vector_norm),
    torch.ops.aten.norm.ScalarOpt_dim_dtype: _alias_of(torch.ops.aten.linalg_vector_norm.default,
                                                       _norm_as_vector_norm),
    torch.ops.aten.silu_backward.default: _silu_backward,
    torch.ops.aten.eye.default: _eye,
    torch.ops.aten.eye.m: _eye,
    torch.ops.aten.index_put.default: _index_put,
    torch.ops.aten.index_put.hacked_twin: _index_put,
    torch.ops.aten._unsafe_index_put.default: _index_put,
    torch.ops.aten.histc.default: histc,
    torch.ops.aten._grouped_mm.default: grouped_mm,
    torch.sym_max: _sym_extreme(max, "Maximum"),
    torch.sym_min: _sym_extreme(min, "Minimum"),
}


def _constant_pad_nd(torchair: Any, original: Callable) -> Callable:
    def convert(self, pad, value=0, meta_outputs=None):
        graph_module = ge_graph(torchair)
        if not isinstance(pad, graph_module.Tensor):
            return original(self, pad, value, meta_outputs=meta_outputs)
        ge = raw_ge_ops(torchair)
        length = pad.symsize[0] if pad.symsize else None
        if not isinstance(length, int) or length % 2:
            raise NotImplementedError(f"constant_pad_nd: pad list of length {length!r}")
        pairs = length // 2
        if pairs > self.rank:
            raise AssertionError("Length of pad should be no more than twice the number of dimensions of the input.")
        per_dim = ge.Reshape(ge.ReverseV2(ge.Reshape(pad, graph_module.Const([pairs, 2])), graph_module.Const([0])),
                             graph_module.Const([length]))
        if pairs < self.rank:
            zeros = graph_module.Const([0] * (2 * (self.rank - pairs)), dtype=pad.dtype)
            per_dim = ge.ConcatV2([zeros, per_dim], graph_module.Const(0), N=2)
        return ge.PadV3(self, per_dim, value)

    return convert


def _clone(torchair: Any, original: Callable) -> Callable:
    def convert(self, *, memory_format=None, meta_outputs=None):
        if memory_format in (None, torch.contiguous_format):
            return original(self, memory_format=memory_format, meta_outputs=meta_outputs)
        if memory_format not in (torch.channels_last, torch.channels_last_3d, torch.preserve_format):
            raise NotImplementedError(f"clone: memory_format {memory_format}")
        return raw_ge_ops(torchair).Identity(self)

    return convert


def _batch_norm_no_stats(torchair: Any, original: Callable) -> Callable:
    # TorchAir's own converter (GE output order), taken now: install_lowering installs these
    # completions before numeric_corrections re-orders that converter's outputs.
    functional = torchair_converter(torch.ops.aten._native_batch_norm_legit_functional.default)

    def convert(input, weight, bias, training, momentum, eps, meta_outputs=None):
        platform = importlib.import_module(f"{torchair.__name__}._utils.check_platform")
        if not training or platform.is_arch35():
            return original(input, weight, bias, training, momentum, eps, meta_outputs=meta_outputs)
        ge = raw_ge_ops(torchair)
        graph_module = ge_graph(torchair)
        channels = ge.Gather(ge.Shape(input, dtype=graph_module.DataType.DT_INT32), 1)
        running_mean = ge.Fill(channels, graph_module.Cast(0.0, dst_type=input.dtype))
        running_var = ge.Fill(channels, graph_module.Cast(1.0, dst_type=input.dtype))
        if functional is None:
            raise NotImplementedError("this TorchAir does not lower _native_batch_norm_legit_functional")
        y, _, _, save_mean, save_rstd = functional(input, weight, bias, running_mean, running_var, training,
                                                   momentum, eps, meta_outputs=None)
        return y, save_mean, save_rstd

    return convert


def _convolution_backward(torchair: Any, original: Callable) -> Callable:
    def convert(grad_output, input, weight, bias_sizes, stride, padding, dilation, transposed, output_padding,
                groups, output_mask, meta_outputs=None):
        # ATen expands a one-element stride/padding/dilation to every spatial dim (Convolution.cpp,
        # expand_param_if_needed); TorchAir's converter indexes [0] and [1].
        spatial = weight.rank - 2

        def expanded(param):
            return list(param) * spatial if isinstance(param, (list, tuple)) and len(param) == 1 else param

        return original(grad_output, input, weight, bias_sizes, expanded(stride), expanded(padding),
                        expanded(dilation), transposed, expanded(output_padding), groups, output_mask,
                        meta_outputs=meta_outputs)

    return convert


# op -> factory(torchair, TorchAir's converter) of a converter completing TorchAir's.
COMPLETIONS = {
    torch.ops.aten.constant_pad_nd.default: _constant_pad_nd,
    torch.ops.aten.clone.default: _clone,
    torch.ops.aten._native_batch_norm_legit.no_stats: _batch_norm_no_stats,
    torch.ops.aten.convolution_backward.default: _convolution_backward,
}


def install_aten_converters(torchair: Any) -> HandleGroup:
    """Register op_plugin's converter for each op in ATEN_CONVERTERS that TorchAir does not lower."""
    group = HandleGroup("op_plugin's aten converters")
    try:
        for op, factory in ATEN_CONVERTERS.items():
            if torchair_lowers(op):
                continue  # TorchAir's own converter wins
            group.add(replace_converter(torchair, op, factory(torchair), f"op_plugin's converter of {op}"))
        for op, factory in COMPLETIONS.items():
            original = torchair_converter(op)
            if original is None:
                continue  # nothing to complete
            group.add(replace_converter(torchair, op, factory(torchair, original), f"completion of {op}"))
    except Exception:
        group.destroy()
        raise
    return group

"""op_plugin's GE converters for aten ops (and FX targets) that real models produce and TorchAir
does not lower (`when="missing"`).

Installed on every host (an Ascend host's TorchAir has the same gaps), and only where TorchAir has
no converter or one that only raises NotImplementedError: a later TorchAir that lowers the op
keeps its own (`registry`). Each converter's docstring says which models produce the op and where
its semantics come from; docs/npu-faithful-lowering.md lists them. The mixture-of-experts ops
(`aten.histc`, `aten._grouped_mm`) are in `moe_converters`, the completions of TorchAir's
converters in `aten_completions`.
"""
from __future__ import annotations

import math

import torch

from .cases import F32, Support, T
from .registry import aten_converter, library_converter
from .torchair_api import TorchAirApi


@aten_converter(torch.ops.aten.true_divide.Tensor, when="missing",
                cases=[Support(F32(2, 3), F32(2, 3)), Support(F32(4, 3), F32(3))])
def true_divide_tensor(ta: TorchAirApi, *args, meta_outputs=None, **kwargs):
    """`aten.true_divide.Tensor`: torch defines true_divide as an alias of `div` with
    rounding_mode=None (torch.true_divide docs; native_functions.yaml implements it by calling
    div). TorchAir's converter raises NotImplementedError; dynamo produces the op when a Python
    float becomes a 0-d tensor input under dynamic shapes (GPT-2's attention scaling with
    `dynamic=True`). Lowered with TorchAir's own `aten.div.Tensor` converter (RealDiv after
    TorchAir's dtype promotion), so the GE graph is what `div` gives."""
    return ta.lowering(torch.ops.aten.div.Tensor)(*args, meta_outputs=meta_outputs, **kwargs)


@aten_converter(torch.ops.aten.true_divide.Scalar, when="missing",
                cases=[Support(F32(2, 3), 2.0), Support(F32(4), 3)])
def true_divide_scalar(ta: TorchAirApi, *args, meta_outputs=None, **kwargs):
    """`aten.true_divide.Scalar`: as `true_divide.Tensor`, with TorchAir's own `aten.div.Scalar`
    converter."""
    return ta.lowering(torch.ops.aten.div.Scalar)(*args, meta_outputs=meta_outputs, **kwargs)


def _norm_as_vector_norm(self, p=None, dim=None, keepdim=False, dtype=None):
    return (self, 2 if p is None else p, dim, keepdim), {"dtype": dtype}


@aten_converter(torch.ops.aten.norm.ScalarOpt_dim, when="missing",
                cases=[Support(F32(4, 3), 2, [1], True), Support(F32(4, 3), None, [0]),
                       Support(F32(2, 3, 4), 1.0, [1, 2])])
@aten_converter(torch.ops.aten.norm.ScalarOpt_dim_dtype, when="missing",
                cases=[Support(F32(4, 3), 2, [1], False, dtype=torch.float32)])
def norm(ta: TorchAirApi, *args, meta_outputs=None, **kwargs):
    """`aten.norm.ScalarOpt_dim` / `aten.norm.ScalarOpt_dim_dtype`: ATen computes `norm(self, p,
    dim, keepdim[, dtype])` as `linalg_vector_norm(self, p if p is not None else 2, dim, keepdim,
    dtype=dtype)` (aten/src/ATen/native/ReduceOps.cpp, `impl_func_norm`). TorchAir's converters
    raise NotImplementedError; `torch._weight_norm` (weight-normalised convolutions, e.g.
    Wav2Vec2's positional embedding) reaches it through `norm_except_dim` on an Ascend host.
    Lowered with TorchAir's own `aten.linalg_vector_norm` converter (LpNormV2)."""
    args, kwargs = _norm_as_vector_norm(*args, **kwargs)
    return ta.lowering(torch.ops.aten.linalg_vector_norm.default)(*args, meta_outputs=meta_outputs, **kwargs)


@aten_converter(torch.ops.aten.silu_backward.default, when="missing",
                cases=[Support(F32(4, 3), F32(4, 3)), Support(F32(2, 8), F32(2, 8, value_range=(-6, 6)))])
def silu_backward(ta: TorchAirApi, grad_output, self, meta_outputs=None):
    """`aten.silu_backward`: TorchAir lowers `aten.silu` to `Swish(scale=1.0)` and raises
    NotImplementedError for the backward (every SiLU/SwiGLU model in training: Llama, Qwen2).
    Lowered to Swish's own backward, `SwishGrad(grad, x, y=Swish(x), scale=1.0)` (hicann ops-nn
    activation/swish_grad: grad_x = grad * sigmoid(x) * (1 + x * (1 - sigmoid(x)))), the pair
    torch_npu itself uses for its Swish-based silu (Ascend/op-plugin op_plugin/ops/aclops/
    SiluKernelNpu.cpp)."""
    return ta.ge.SwishGrad(grad_output, self, ta.ge.Swish(self, scale=1.0), scale=1.0)


@aten_converter(torch.ops.aten.eye.default, when="missing",
                cases=[Support(3), Support(4, dtype=torch.int32), Support(1)])
@aten_converter(torch.ops.aten.eye.m, when="missing",
                cases=[Support(2, 5), Support(4, 3, dtype=torch.float16), Support(3, 3, dtype=torch.bool)])
def eye(ta: TorchAirApi, n, m=None, *, dtype=None, layout=None, device=None, pin_memory=None, meta_outputs=None):
    """`aten.eye.default` / `aten.eye.m`: TorchAir's converters raise NotImplementedError; XLNet
    builds its attention mask with `torch.eye(seq_len)`. torch_npu's eager eye is aclnnEye (an
    identity matrix, Ascend/op-plugin EyeKernelNpuOpApi.cpp); GE's `Eye` takes its sizes as
    attributes, which a symbolic length cannot be. Lowered as `Cast(Equal(Unsqueeze(Range(n), 1),
    Unsqueeze(Range(m), 0)), dtype)`, with TorchAir's own `aten.arange` converter for the ranges."""
    del dtype, layout, device, pin_memory  # the dtype is meta_outputs'; the rest do not change the graph
    ge = ta.ge
    arange = ta.converter(torch.ops.aten.arange.default)
    rows = ge.Unsqueeze(arange(n, dtype=torch.int64, meta_outputs=None), axes=[1])
    cols = ge.Unsqueeze(arange(n if m is None else m, dtype=torch.int64, meta_outputs=None), axes=[0])
    return ta.graph.Cast(ge.Equal(rows, cols), dst_type=meta_outputs.dtype)  # a GE DataType


_INDEX_PUT_CASES = [
    Support(F32(5, 4), [T([0, 2, 4], dtype=torch.int64)], F32(3, 4)),
    Support(F32(5, 4), [T([0, 2, 0, -1], dtype=torch.int64)], F32(4, 4), True),
    Support(F32(3, 5, 6), [None, T([[0], [4], [-1]], dtype=torch.int64), T([1, 5], dtype=torch.int64)], F32(2), True),
]


@aten_converter(torch.ops.aten.index_put.default, when="missing",
                cases=[*_INDEX_PUT_CASES, Support(F32(4, 6), [None, T([4, 1], dtype=torch.int64)], F32(1))])
@aten_converter(torch.ops.aten.index_put.hacked_twin, when="missing", cases=_INDEX_PUT_CASES[:2])
@aten_converter(torch.ops.aten._unsafe_index_put.default, when="missing", cases=_INDEX_PUT_CASES)
def index_put(ta: TorchAirApi, self, indices, values, accumulate=False, meta_outputs=None):
    """`aten.index_put` (`.default`, `.hacked_twin`) and `aten._unsafe_index_put`: TorchAir's
    converters raise NotImplementedError, so `x[..., i, j] = v` and the backward of every
    `x[..., i, j]` gather (BEiT's relative position bias table, and bilinear interpolation's
    decomposition, in training) fail to lower. aten semantics (native_functions.yaml index_put;
    negative indices wrap, indices broadcast together, values broadcast to the indexed shape;
    torch_npu eager: aclnnIndexPutImpl, Ascend/op-plugin IndexPutKernelNpuOpApi.cpp) for integer
    index tensors on adjacent dims after any number of ':'; other patterns raise
    NotImplementedError naming the op. The indexed dims are merged into one (x reshaped, flat
    index ((i0 * s1) + i1) * ...); with accumulate: `InplaceIndexAdd(TensorMove(x), flat, values,
    axis)`, fed as TorchAir's own `index_add` converter feeds it (int32 indices, a copy of x);
    without: `ScatterElements(x, flat broadcast, values, axis)` (repeated indices: the NPU's pick,
    unspecified as in torch); then reshaped back."""
    ge, graph_module = ta.ge, ta.graph
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
        index = ta.dtype_promote(indices[dim], target_dtype=int32)
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


def _sym_extreme(ta: TorchAirApi, a, b, python_fn, ge_type: str, meta_outputs):
    if not isinstance(a, ta.graph.Tensor) and not isinstance(b, ta.graph.Tensor):
        return python_fn(a, b)
    a, b = ta.dtype_promote(a, b, target_dtype=meta_outputs.dtype)
    return getattr(ta.ge, ge_type)(a, b)


# No declared cases: a case's sizes are static, so dynamo computes sym_max/sym_min itself and no
# graph holds them; tests/test_torchair_gaps.py compiles them with dynamic=True.
@aten_converter(torch.sym_max, when="missing")
def sym_max(ta: TorchAirApi, a, b, meta_outputs=None):
    """`torch.sym_max` (size arithmetic in the FX graph, not an aten op): TorchAir lowers
    operator.add/sub/mul/floordiv/... (builtin_converters.py) but not this; sliding-window
    attention (Mistral, Gemma2) computes `max(0, cache_length - window)` with `dynamic=True`.
    Lowered like TorchAir's operator converters: Python's max when both are ints, else GE
    `Maximum` after TorchAir's dtype promotion to the node's dtype."""
    return _sym_extreme(ta, a, b, max, "Maximum", meta_outputs)


@aten_converter(torch.sym_min, when="missing")
def sym_min(ta: TorchAirApi, a, b, meta_outputs=None):
    """`torch.sym_min`: as `torch.sym_max`, with Python's min and GE `Minimum` (`min(length, end)`
    in sliding-window attention)."""
    return _sym_extreme(ta, a, b, min, "Minimum", meta_outputs)


@aten_converter(torch.ops.aten.index_copy.default, when="missing",
                cases=[Support(F32(1, 2, 8, 4), 2, T([3, 4], dtype=torch.int64), F32(1, 2, 2, 4)),
                       Support(F32(6, 3), 0, T([5, 0, 2], dtype=torch.int64), F32(3, 3)),
                       Support(F32(4, 5), -1, T([1], dtype=torch.int64), F32(4, 1))])
def index_copy(ta: TorchAirApi, self, dim, index, source, meta_outputs=None):
    """`aten.index_copy`: TorchAir's converter raises NotImplementedError; transformers' static
    KV cache (`StaticCache.update`, `generate(..., cache_implementation="static")`, the setting
    transformers recommends for torch.compile) writes each step's keys and values with
    `k_cache.index_copy_(2, cache_position, k)`. aten semantics (native_functions.yaml
    index_copy: `self[..., index[i], ...] = source[..., i, ...]` along `dim`, index 1-D or 0-d;
    repeated indices: unspecified which source slice wins); torch_npu's eager kernel is
    aclnnIndexCopy (Ascend/op-plugin op_plugin/ops/opapi/IndexCopyKernelNpuOpApi.cpp). GE has no
    IndexCopy prototype in TorchAir's op set; lowered as `ScatterElements(self, index broadcast to
    source's shape along dim, source, axis=dim)`, the op op_plugin's `index_put` uses."""
    ge, const = ta.ge, ta.graph.Const
    rank = self.rank
    dim = dim + rank if dim < 0 else dim
    if rank == 0:
        return ge.Reshape(source, ge.Shape(self))
    spread = ge.Reshape(index, const([1] * dim + [-1] + [1] * (rank - dim - 1)))
    indices = ge.BroadcastTo(spread, ge.Shape(source))
    return ge.ScatterElements(self, indices, ge.Reshape(source, ge.Shape(indices)), axis=dim)


@aten_converter(torch.ops.aten._assert_tensor_metadata.default, when="missing",
                cases=[Support(F32(2, 3), None, None, torch.float32)])
def assert_tensor_metadata(ta: TorchAirApi, a, size=None, stride=None, dtype=None, *, device=None, layout=None,
                           meta_outputs=None):
    """`aten._assert_tensor_metadata` (no output): non-strict `torch.export` leaves it in the
    exported module (`ep.module()`) after each dtype conversion, to check the tensor's dtype,
    device and layout at run time; TorchAir has no converter. The check concerns the traced
    tensor, whose metadata the FX graph already fixed when it was traced (AOT autograd ran it on
    fake tensors, which raise on a mismatch), so it adds nothing to the GE graph, as Inductor
    lowers it to nothing (torch/_inductor/lowering.py registers it as a no-op). torch_npu has no
    kernel of its own (a CompositeExplicit check in ATen)."""
    del ta, a, size, stride, dtype, device, layout, meta_outputs
    return None


@library_converter("prims::fma", cases=[Support(F32(4, 3), F32(4, 3), F32(4, 3)),
                                        Support(F32(4, 3), F32(3), F32(4, 1))])
def prims_fma(ta: TorchAirApi, a, b, c, meta_outputs=None):
    """`prims.fma(a, b, c) = a * b + c` (registered by torch/_inductor/inductor_prims.py, hence a
    library op: installed at the first compile after dynamo imports it): dynamo decomposes
    `t.addcmul_(t1, t2, value=v)` into `fma(t1 * t2, v, t)` (torch/_dynamo/variables/tensor.py
    `method_addcmul_`, under `enable_dynamo_decompositions`, the default) in a compiled optimizer
    step (`torch.compile(opt.step)` for Adam/AdamW: `exp_avg_sq.mul_
    (beta2).addcmul_(grad, grad, value=1 - beta2)`), and TorchAir has no prims.fma converter.
    Lowered to the CANN op torch_npu's eager addcmul runs, `Addcmul(input_data=c, x1=a, x2=b,
    value=1)` (Ascend/op-plugin op_plugin/ops/opapi/AddcmulKernelNpuOpApi.cpp, aclnnAddcmul;
    REG_OP Addcmul: y = input_data + value * x1 * x2), inputs promoted to the node's dtype."""
    dtype = meta_outputs.dtype
    a, b, c = ta.dtype_promote(a, b, c, target_dtype=dtype)
    value = ta.dtype_promote(1, target_dtype=dtype)
    return ta.ge.Addcmul(c, a, b, value)


@aten_converter(torch.ops.aten.softplus.default, when="missing",
                cases=[Support(F32(4, 8, value_range=(-30, 30))), Support(F32(4, 8), 2.0, 5.0),
                       Support(F32(3, 5, value_range=(-4, 4)), 0.5, 1.0)])
def softplus(ta: TorchAirApi, self, beta=1, threshold=20, meta_outputs=None):
    """`aten.softplus`: TorchAir's converter raises NotImplementedError; state-space models
    (Mamba, Mamba2, Jamba: `dt = softplus(dt + dt_bias)`) use it. torch_npu's eager softplus is
    aclnnSoftplus with beta and threshold (Ascend/op-plugin op_plugin/ops/opapi/
    SoftplusKernelNpuOpApi.cpp; the aclop path runs GE `SoftplusV2`). Lowered to `SoftplusV2(x,
    beta, threshold)` (REG_OP SoftplusV2: y = log(1 + exp(beta * x)) / beta, or x where beta * x
    > threshold, torch's definition)."""
    return ta.ge.SoftplusV2(self, beta=float(beta), threshold=float(threshold))


@aten_converter(torch.ops.aten.softplus_backward.default, when="missing",
                cases=[Support(F32(4, 8), F32(4, 8, value_range=(-30, 30)), 1, 20),
                       Support(F32(3, 5), F32(3, 5, value_range=(-4, 4)), 2.0, 3.0)])
def softplus_backward(ta: TorchAirApi, grad_output, self, beta, threshold, meta_outputs=None):
    """`aten.softplus_backward` (training a state-space model: Mamba's `softplus(dt + dt_bias)`):
    TorchAir's converter raises NotImplementedError. torch_npu's aclop softplus_backward runs
    `SoftplusV2Grad(grad_output, self, beta, threshold)` (Ascend/op-plugin
    utils/custom_functions/aclops/SoftplusBackwardKernelNpu.cpp), the backward of the SoftplusV2
    the forward lowers to."""
    return ta.ge.SoftplusV2Grad(grad_output, self, beta=float(beta), threshold=float(threshold))


@aten_converter(torch.ops.aten.amax.default, when="missing",
                cases=[Support(F32(3, 4, 5), [1], True), Support(F32(3, 4, 5), [-1]),
                       Support(F32(3, 4)), Support(F32(2, 3, 4), [0, 2], False)])
def amax(ta: TorchAirApi, self, dim=(), keepdim=False, meta_outputs=None):
    """`aten.amax`: TorchAir's converter raises NotImplementedError (`x.amax(dim)`, and the
    max-subtraction of hand-written stable softmax/logsumexp code). torch_npu's eager amax is
    aclnnAmax (Ascend/op-plugin op_plugin/ops/opapi/AmaxKernelNpuOpApi.cpp), the GE op
    `ReduceMax(x, axes, keep_dims)` TorchAir's own `aten.max.dim` and `logsumexp` converters use;
    `dim=[]` reduces every dim (aten's convention)."""
    dims = list(dim) if dim else list(range(self.rank))
    return ta.ge.ReduceMax(self, ta.graph.Const(dims, dtype=ta.graph.DataType.DT_INT64), keep_dims=keepdim)


# No declared cases: a case's sizes are static, so no graph holds size arithmetic.
@aten_converter(math.trunc, when="missing")
def math_trunc(ta: TorchAirApi, a, meta_outputs=None):
    """`math.trunc` (size arithmetic in the FX graph: `int(x.shape[0] * 1.5)` with
    `dynamic=True` leaves `math.trunc` of a symbolic float; torch's sympy printer maps `int()` of
    a float to it): TorchAir lowers operator.add/mul/... but not this. Python's math.trunc when
    the value is a Python number, else GE `Cast` to int64 (GE Cast from float to int rounds toward
    zero, as math.trunc)."""
    if not isinstance(a, ta.graph.Tensor):
        return math.trunc(a)
    return ta.graph.Cast(a, dst_type=ta.graph.DataType.DT_INT64)


def _pair(values, default):
    values = list(values) if values else [default]
    return values * 2 if len(values) == 1 else values


@aten_converter(torch.ops.aten.im2col.default, when="missing",
                cases=[Support(F32(2, 3, 7, 6), [3, 2], [1, 2], [1, 1], [2, 1]),
                       Support(F32(1, 2, 5, 5), [2, 2], [1, 1], [0, 0], [1, 1]),
                       Support(F32(3, 6, 4), [3, 3], [1, 1], [1, 1], [1, 1])])
def im2col(ta: TorchAirApi, self, kernel_size, dilation, padding, stride, meta_outputs=None):
    """`aten.im2col` (`F.unfold`, patch extraction by unfolding): TorchAir's converter raises
    NotImplementedError. torch_npu's eager im2col runs GE `Im2col` on x in NCHW (Ascend/op-plugin
    op_plugin/ops/aclops/Im2colKernelNpu.cpp; its opapi path is aclnnIm2col, hicann ops-cv
    aclnnIm2col: y [N, C * prod(kernel_size), L]): attrs ksizes/strides/dilations [h, w],
    padding_mode "CALCULATED", pads [ph, ph, pw, pw]; a 3-D input is unsqueezed to a batch of
    one and squeezed back, as that kernel does. Lowered to the same op, its input and output
    given the NCHW layout."""
    utils, ge = ta.utils, ta.ge
    batched = self.rank == 4
    x = self if batched else ge.Unsqueeze(self, axes=[0])
    ph, pw = _pair(padding, 0)
    y = ge.Im2col(x, ksizes=_pair(kernel_size, 1), strides=_pair(stride, 1), dilations=_pair(dilation, 1),
                  padding_mode="CALCULATED", pads=[ph, ph, pw, pw])
    utils.specific_op_input_layout(y, indices=0, layout="NCHW")
    utils.specific_op_output_layout(y, indices=0, layout="NCHW")
    return y if batched else ge.Squeeze(y, axis=[0])

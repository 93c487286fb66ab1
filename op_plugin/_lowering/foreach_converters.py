"""op_plugin's GE converters for the `_foreach_*` ops TorchAir does not lower (`when="missing"`;
`registry`).

A compiled optimizer step with `foreach=True` (torch's default on devices it lists for foreach
kernels, which include the NPU's) traces `_foreach_*` ops: `torch.compile(opt.step)` for Adam/AdamW
reaches `_foreach_neg`, `_foreach_sqrt`, `_foreach_reciprocal`, `_foreach_add/mul/div.Tensor` (a
0-d step tensor) and `_foreach_clamp_*`, whose TorchAir converters raise NotImplementedError or do
not exist.

- `_foreach_neg`: the CANN list op torch_npu's eager kernel runs (aclnnForeachNeg, Ascend/op-plugin
  op_plugin/ops/opapi/ForeachNegKernelNpuOpApi.cpp), `ForeachNeg(x)`, for float32/float16 lists
  (its REG_OP's float types); other dtypes per tensor, as below. TorchAir's op set has no
  out-of-place ForeachSqrt/ForeachReciprocal builder (only the in-place ones), so those go per tensor.
- Otherwise, per tensor: aten defines `_foreach_op(xs, ...)[i]` as `op(xs[i], ...)`
  (aten/src/ATen/native/ForeachOpsKernels.cpp, the slow path every device falls back to), lowered
  with TorchAir's own converter of that aten op, element by element (`ta.lowering`: an aten op
  TorchAir does not lower is an error naming it).
"""
from __future__ import annotations

import torch

from .cases import F32, Support, T
from .registry import aten_converter
from .torchair_api import TorchAirApi

aten = torch.ops.aten
_LIST = [F32(2, 3), F32(4), F32(3, 1, 2)]
_OTHER = [F32(2, 3), F32(4), F32(3, 1, 2)]


def _cann_list_op(ge_type: str, op):
    def convert(ta: TorchAirApi, self, meta_outputs=None):
        data_type = ta.graph.DataType
        if self and all(t.dtype in (data_type.DT_FLOAT, data_type.DT_FLOAT16) for t in self):
            return getattr(ta.dynamic_ge, ge_type)(self)
        return _per_tensor(ta, op, meta_outputs, self)

    convert.__name__ = convert.__qualname__ = f"foreach_{ge_type[7:].lower()}"
    convert.__doc__ = f"`{ge_type}(x)` over a float32/float16 list (torch_npu's eager foreach kernel), else `{op}`."
    return convert


def _per_tensor(ta: TorchAirApi, op, meta_outputs, *per_tensor_args, **kwargs):
    """[op(args[0][i], args[1][i], ..., **kwargs) for each i], each with its own meta output."""
    convert = ta.lowering(op)
    return [convert(*args, meta_outputs=meta_outputs[i] if meta_outputs is not None else None, **kwargs)
            for i, args in enumerate(zip(*per_tensor_args, strict=True))]


def _repeat(value, count):
    return [value] * count


aten_converter(aten._foreach_neg.default, when="missing",
               cases=[Support([F32(2, 3), F32(4)]), Support([T([[1.0, -4.0]], dtype=torch.bfloat16)])])(
    _cann_list_op("ForeachNeg", aten.neg.default))


@aten_converter(aten._foreach_add.Tensor, when="missing", cases=[Support(_LIST, T(2.0, dtype=torch.float32))])
def foreach_add_tensor(ta: TorchAirApi, self, other, *, alpha=1, meta_outputs=None):
    """`_foreach_add.Tensor(xs, t, alpha)`: `add(x, t, alpha=alpha)` per tensor (t a 0-d tensor)."""
    return _per_tensor(ta, aten.add.Tensor, meta_outputs, self, _repeat(other, len(self)), alpha=alpha)


@aten_converter(aten._foreach_mul.Tensor, when="missing", cases=[Support(_LIST, T(2.5, dtype=torch.float32))])
def foreach_mul_tensor(ta: TorchAirApi, self, other, meta_outputs=None):
    """`_foreach_mul.Tensor(xs, t)`: `mul(x, t)` per tensor."""
    return _per_tensor(ta, aten.mul.Tensor, meta_outputs, self, _repeat(other, len(self)))


@aten_converter(aten._foreach_div.Tensor, when="missing", cases=[Support(_LIST, T(4.0, dtype=torch.float32))])
def foreach_div_tensor(ta: TorchAirApi, self, other, meta_outputs=None):
    """`_foreach_div.Tensor(xs, t)`: `div(x, t)` per tensor (Adam's `param / bias_correction`)."""
    return _per_tensor(ta, aten.div.Tensor, meta_outputs, self, _repeat(other, len(self)))


def _unary_per_tensor(op):
    def convert(ta: TorchAirApi, self, meta_outputs=None):
        return _per_tensor(ta, op, meta_outputs, self)

    convert.__name__ = convert.__qualname__ = f"foreach_{op._opname}"
    convert.__doc__ = f"`{op}` per tensor."
    return convert


for _name, _op, _range in (("_foreach_sign", aten.sign.default, (-2, 2)),
                           ("_foreach_sqrt", aten.sqrt.default, (0.5, 2)),
                           ("_foreach_reciprocal", aten.reciprocal.default, (0.5, 2)),
                           ("_foreach_rsqrt", aten.rsqrt.default, (0.5, 2)),
                           ("_foreach_clone", aten.clone.default, (-2, 2))):
    aten_converter(getattr(aten, _name).default, when="missing",
                   cases=[Support([F32(2, 3, value_range=_range), F32(4, value_range=_range)])])(_unary_per_tensor(_op))


@aten_converter(aten._foreach_clamp_min.Scalar, when="missing", cases=[Support(_LIST, 0.1)])
@aten_converter(aten._foreach_clamp_max.Scalar, when="missing", cases=[Support(_LIST, -0.1)])
def foreach_clamp_scalar(ta: TorchAirApi, self, scalar, meta_outputs=None):
    """`_foreach_clamp_min/max.Scalar(xs, s)`: `clamp(x, min=s)` / `clamp(x, max=s)` per tensor
    (TorchAir lowers aten.clamp, not clamp_max)."""
    bounds = (scalar, None) if ta.op is aten._foreach_clamp_min.Scalar else (None, scalar)
    return _per_tensor(ta, aten.clamp.default, meta_outputs, self, *(_repeat(b, len(self)) for b in bounds))


@aten_converter(aten._foreach_clamp_min.ScalarList, when="missing", cases=[Support(_LIST, [0.1, -0.2, 0.3])])
@aten_converter(aten._foreach_clamp_max.ScalarList, when="missing", cases=[Support(_LIST, [0.1, -0.2, 0.3])])
def foreach_clamp_scalar_list(ta: TorchAirApi, self, scalars, meta_outputs=None):
    """`_foreach_clamp_min/max.ScalarList(xs, ss)`: `clamp(x_i, min=s_i)` / `clamp(x_i, max=s_i)` per tensor."""
    nones = _repeat(None, len(self))
    bounds = (list(scalars), nones) if ta.op is aten._foreach_clamp_min.ScalarList else (nones, list(scalars))
    return _per_tensor(ta, aten.clamp.default, meta_outputs, self, *bounds)


@aten_converter(aten._foreach_clamp_min.List, when="missing", cases=[Support(_LIST, _OTHER)])
@aten_converter(aten._foreach_clamp_max.List, when="missing", cases=[Support(_LIST, _OTHER)])
def foreach_clamp_list(ta: TorchAirApi, self, other, meta_outputs=None):
    """`_foreach_clamp_min/max.List(xs, ys)`: `clamp(x_i, min=y_i)` / `clamp(x_i, max=y_i)` (aten.clamp.Tensor)
    per tensor."""
    nones = _repeat(None, len(self))
    bounds = (list(other), nones) if ta.op is aten._foreach_clamp_min.List else (nones, list(other))
    return _per_tensor(ta, aten.clamp.Tensor, meta_outputs, self, *bounds)


@aten_converter(aten._foreach_lerp.ScalarList, when="missing", cases=[Support(_LIST, _OTHER, [0.1, 0.5, 0.9])])
def foreach_lerp_scalar_list(ta: TorchAirApi, self, tensors1, weights, meta_outputs=None):
    """`_foreach_lerp.ScalarList(xs, ends, ws)`: `lerp(x_i, end_i, w_i)` (aten.lerp.Scalar) per tensor."""
    return _per_tensor(ta, aten.lerp.Scalar, meta_outputs, self, list(tensors1), list(weights))


@aten_converter(aten._foreach_copy.default, when="missing", cases=[Support(_LIST, _OTHER)])
def foreach_copy(ta: TorchAirApi, self, src, non_blocking=False, meta_outputs=None):
    """`_foreach_copy(xs, srcs)` (functional: the copies): `copy(x_i, src_i)` per tensor."""
    return _per_tensor(ta, aten.copy.default, meta_outputs, self, list(src), non_blocking=non_blocking)

"""Numeric corrections: where TorchAir's lowering of an aten op computes something else than
torch_npu's eager kernel, npugraph lowers to the GE op that computes what eager computes.

Each correction replaces TorchAir's converter of the op (on the host's TorchAir, undoably) and
keeps TorchAir's converter for the cases it gets right. `keep_torchair_lowering()` (the npugraph
option `torchair_gelu=True`) makes the corrected converters call TorchAir's verbatim while a
graph is compiled. docs/npu-faithful-lowering.md lists the corrections with their sources.

- `aten.gelu(approximate="none")`: TorchAir emits GE `Gelu`, which CANN defines as the tanh
  approximation (hicann ops-nn activation/gelu); torch_npu's eager `gelu` calls `aclnnGeluV2`
  with the approximate mode (Ascend/op-plugin op_plugin/ops/opapi/GeluOutKernelNpuOpApi.cpp), i.e.
  the exact erf form for "none". Corrected: `GeluV2(x, approximate="none")` (REG_OP GeluV2:
  input x, output y, attr approximate String "none").
- `aten.gelu_backward(approximate="none")`: TorchAir emits `GeluGrad` (the derivative of the tanh
  form); eager calls `aclnnGeluBackwardV2` with the approximate string
  (GeluBackwardKernelNpuOpApi.cpp). Corrected: `GeluGradV2(dy, x, approximate="none")`.
  `approximate="tanh"` keeps TorchAir's lowering for both (Gelu/GeluGrad are the tanh form).
- `aten._native_batch_norm_legit_functional` (training batch norm after functionalization): aten
  returns (out, save_mean, save_invstd, running_mean_out, running_var_out); TorchAir's converter
  returns BatchNormV3's outputs in GE order (y, running_mean, running_var, save_mean, save_rstd),
  so the backward would read the updated running stats as the batch statistics and the buffers
  would be set to the batch statistics (gradients off by up to 0.1 on a small CNN). Corrected:
  the same GE graph, its outputs handed back in aten's order. Not a numeric-form choice, so
  `torchair_gelu` does not keep it. Output 2 stays what BatchNormV3 writes in `save_rstd` (the
  batch variance off arch35, as TorchAir's backward converter reads it), not eager's invstd.
"""
from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from typing import Any

import torch

from .._base.handles import HandleGroup
from ._converter_slots import replace_converter, torchair_converter
from ._converter_slots import raw_ge_ops

_keep_torchair = contextvars.ContextVar("op_plugin_keep_torchair_lowering", default=False)


@contextlib.contextmanager
def keep_torchair_lowering(keep: bool = True) -> Iterator[None]:
    """While active, the corrected converters emit exactly what TorchAir's own converters emit."""
    token = _keep_torchair.set(keep)
    try:
        yield
    finally:
        _keep_torchair.reset(token)


def _torchair_s(op, original):
    """TorchAir's converter of `op` as it was before the correction (an error if it had none)."""
    if original is None:
        raise NotImplementedError(f"this TorchAir has no converter for {op} to keep")
    return original


def _gelu_converter(torchair: Any):
    op = torch.ops.aten.gelu.default
    original = torchair_converter(op)

    def convert_gelu(self, *, approximate: str = "none", meta_outputs=None):
        if _keep_torchair.get() or approximate != "none":
            return _torchair_s(op, original)(self, approximate=approximate, meta_outputs=meta_outputs)
        return raw_ge_ops(torchair).GeluV2(self, approximate="none")

    return convert_gelu


def _gelu_backward_converter(torchair: Any):
    op = torch.ops.aten.gelu_backward.default
    original = torchair_converter(op)

    def convert_gelu_backward(grad_output, self, *, approximate: str = "none", meta_outputs=None):
        if _keep_torchair.get() or approximate != "none":
            return _torchair_s(op, original)(grad_output, self, approximate=approximate, meta_outputs=meta_outputs)
        return raw_ge_ops(torchair).GeluGradV2(grad_output, self, approximate="none")

    return convert_gelu_backward


def _batch_norm_functional_converter(torchair: Any):
    del torchair
    original = torchair_converter(torch.ops.aten._native_batch_norm_legit_functional.default)

    def convert_batch_norm_functional(*args, **kwargs):
        y, running_mean, running_var, save_mean, save_rstd = original(*args, **kwargs)
        return y, save_mean, save_rstd, running_mean, running_var   # aten's order

    return convert_batch_norm_functional


# op -> factory of the corrected converter (given the host's TorchAir).
CORRECTIONS = {
    torch.ops.aten.gelu.default: _gelu_converter,
    torch.ops.aten.gelu_backward.default: _gelu_backward_converter,
    torch.ops.aten._native_batch_norm_legit_functional.default: _batch_norm_functional_converter,
}


def install_numeric_corrections(torchair: Any) -> HandleGroup:
    """Replace TorchAir's converters of the ops in CORRECTIONS; destroying the group restores them."""
    group = HandleGroup("numeric corrections")
    try:
        for op, factory in CORRECTIONS.items():
            group.add(replace_converter(torchair, op, factory(torchair), f"numeric correction of {op}"))
    except Exception:
        group.destroy()
        raise
    return group

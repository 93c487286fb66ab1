"""Numeric corrections (`when="corrects"`): where TorchAir's lowering of an aten op computes
something else than torch_npu's eager kernel, npugraph lowers to the GE op that computes what
eager computes.

Each correction replaces TorchAir's converter of the op (on the host's TorchAir, undoably,
`registry`) and keeps TorchAir's converter (`ta.original`) for the cases it gets right.
`keep_torchair_lowering()` (the npugraph option `torchair_gelu=True`) makes the gelu corrections
call TorchAir's verbatim while a graph is compiled. docs/npu-faithful-lowering.md lists the
corrections with their sources.
"""
from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator

import torch

from .cases import F32, Support
from .registry import aten_converter
from .torchair_api import TorchAirApi

_keep_torchair = contextvars.ContextVar("op_plugin_keep_torchair_lowering", default=False)


@contextlib.contextmanager
def keep_torchair_lowering(keep: bool = True) -> Iterator[None]:
    """While active, the corrected converters emit exactly what TorchAir's own converters emit."""
    token = _keep_torchair.set(keep)
    try:
        yield
    finally:
        _keep_torchair.reset(token)


@aten_converter(torch.ops.aten.gelu.default, when="corrects",
                cases=[Support(F32(4, 8, value_range=(-6, 6))), Support(F32(2, 3, 5)),
                       Support(F32(4, 8), approximate="tanh")])
def gelu(ta: TorchAirApi, self, *, approximate: str = "none", meta_outputs=None):
    """`aten.gelu(approximate="none")`: TorchAir emits GE `Gelu`, which CANN defines as the tanh
    approximation (hicann ops-nn activation/gelu); torch_npu's eager `gelu` calls `aclnnGeluV2`
    with the approximate mode (Ascend/op-plugin op_plugin/ops/opapi/GeluOutKernelNpuOpApi.cpp),
    i.e. the exact erf form for "none". Corrected: `GeluV2(x, approximate="none")` (REG_OP GeluV2:
    input x, output y, attr approximate String "none"). `approximate="tanh"` keeps TorchAir's
    lowering (Gelu is the tanh form), and so does everything under `keep_torchair_lowering()`."""
    if _keep_torchair.get() or approximate != "none":
        return ta.original(self, approximate=approximate, meta_outputs=meta_outputs)
    return ta.ge.GeluV2(self, approximate="none")


@aten_converter(torch.ops.aten.gelu_backward.default, when="corrects",
                cases=[Support(F32(4, 8), F32(4, 8, value_range=(-6, 6))),
                       Support(F32(4, 8), F32(4, 8), approximate="tanh")])
def gelu_backward(ta: TorchAirApi, grad_output, self, *, approximate: str = "none", meta_outputs=None):
    """`aten.gelu_backward(approximate="none")`: TorchAir emits `GeluGrad` (the derivative of the
    tanh form); eager calls `aclnnGeluBackwardV2` with the approximate string
    (GeluBackwardKernelNpuOpApi.cpp). Corrected: `GeluGradV2(dy, x, approximate="none")`.
    `approximate="tanh"` keeps TorchAir's lowering (GeluGrad is the tanh form's derivative), and
    so does everything under `keep_torchair_lowering()`."""
    if _keep_torchair.get() or approximate != "none":
        return ta.original(grad_output, self, approximate=approximate, meta_outputs=meta_outputs)
    return ta.ge.GeluGradV2(grad_output, self, approximate="none")


# Output 2 departs from eager in every case (the docstring): op-plugin declared-cases lists the
# case as a known failure, as TorchAir's own cases of this op.
@aten_converter(torch.ops.aten._native_batch_norm_legit_functional.default, when="corrects",
                cases=[Support(F32(4, 3, 5), F32(3), F32(3), F32(3), F32(3, value_range=(0.5, 2)), True, 0.1, 1e-5)])
def batch_norm_functional(ta: TorchAirApi, *args, **kwargs):
    """`aten._native_batch_norm_legit_functional` (training batch norm after functionalization):
    aten returns (out, save_mean, save_invstd, running_mean_out, running_var_out); TorchAir's
    converter returns BatchNormV3's outputs in GE order (y, running_mean, running_var, save_mean,
    save_rstd), so the backward would read the updated running stats as the batch statistics and
    the buffers would be set to the batch statistics (gradients off by up to 0.1 on a small CNN).
    Corrected: the same GE graph, its outputs handed back in aten's order. Not a numeric-form
    choice, so `torchair_gelu` does not keep it. Output 2 stays what BatchNormV3 writes in
    `save_rstd` (the batch variance off arch35, as TorchAir's backward converter reads it), not
    eager's invstd."""
    y, running_mean, running_var, save_mean, save_rstd = ta.original(*args, **kwargs)
    return y, save_mean, save_rstd, running_mean, running_var   # aten's order



# npu_rotary_mul's rotary_mode as RotaryPositionEmbedding's mode attr (TorchAir's own table, used on arch35)
_ROTARY_MODES = {"half": 0, "interleave": 1, "quarter": 2, "interleave-half": 3}


def _rotary_mode(op: str, rotary_mode: str) -> int:
    if rotary_mode not in _ROTARY_MODES:
        raise NotImplementedError(f"npu::{op}: rotary_mode {rotary_mode!r} is not one of {list(_ROTARY_MODES)}")
    return _ROTARY_MODES[rotary_mode]


_ROPE_CASES = [Support(F32(2, 3, 4, 16), F32(1, 3, 1, 16), F32(1, 3, 1, 16), mode)
               for mode in ("interleave", "quarter", "interleave-half")]


@aten_converter("npu::npu_rotary_mul", when="corrects",
                cases=[*_ROPE_CASES, Support(F32(2, 3, 4, 16), F32(1, 3, 1, 16), F32(1, 3, 1, 16))])
def npu_rotary_mul(ta: TorchAirApi, self, r1, r2, rotary_mode="half", rotate=None, meta_outputs=None):
    """`npu.npu_rotary_mul` with rotary_mode "interleave", "quarter" or "interleave-half": off Ascend
    950 (arch35) and without `rotate`, TorchAir's converter (custom/npu_rotary_mul.py) lowers every mode
    to GE `RotaryMul`, which has no mode and computes the "half" rotation: graph mode silently returns
    the half result. torch_npu's eager kernel runs aclnnRotaryPositionEmbedding with the mode
    (Ascend/op-plugin op_plugin/ops/opapi/RotaryMulKernelNpuOpApi.cpp: `get_rotary_mode(rotary_mode)`,
    r1/r2 cast to self's dtype when they differ), the CANN op GE calls `RotaryPositionEmbedding` (hicann
    ops-transformer posembedding/rotary_position_embedding: attr mode 0 half, 1 interleave, 2 quarter,
    3 interleave-half), which TorchAir itself emits on arch35 and with `rotate`. Corrected: those modes
    lower to `RotaryPositionEmbedding(x, r1, r2, mode)`, r1/r2 cast to x's dtype as eager casts them;
    "half" without `rotate` off arch35 keeps TorchAir's RotaryMul (the same rotation), and arch35 or a
    `rotate` matrix keep TorchAir's lowering (which passes the mode)."""
    if rotary_mode == "half" or rotate is not None or ta.is_arch35():
        return ta.original(self, r1, r2, rotary_mode, rotate, meta_outputs=meta_outputs)
    mode = _rotary_mode("npu_rotary_mul", rotary_mode)
    cos, sin = ta.dtype_promote(r1, r2, target_dtype=self.dtype)
    return ta.ge.RotaryPositionEmbedding(self, cos, sin, mode=mode)


@aten_converter("npu::npu_rotary_mul_backward", when="corrects",
                cases=[Support(F32(2, 3, 4, 16), F32(2, 3, 4, 16), F32(1, 3, 1, 16), F32(1, 3, 1, 16), mode)
                       for mode in ("interleave", "quarter", "interleave-half")])
def npu_rotary_mul_backward(ta: TorchAirApi, grad, self, r1, r2, rotary_mode="half", *, meta_outputs=None,
                            **kwargs):
    """`npu.npu_rotary_mul_backward` (autograd's backward of npu_rotary_mul) with rotary_mode other than
    "half": off Ascend 950 TorchAir's converter (custom/npu_rotary_mul_backward.py) emits `RotaryMulGrad`,
    which has no mode (the half rotation's gradient), for every mode; torch_npu's eager backward runs
    aclnnRotaryPositionEmbeddingGrad with the mode. Corrected: those modes lower to
    `RotaryPositionEmbeddingGrad(dy=grad, cos=r1, sin=r2, x=self, mode)` -> (dx, dr1, dr2), what TorchAir
    emits on arch35; "half" (and arch35) keep TorchAir's lowering."""
    if rotary_mode == "half" or ta.is_arch35():
        return ta.original(grad, self, r1, r2, rotary_mode, meta_outputs=meta_outputs, **kwargs)
    mode = _rotary_mode("npu_rotary_mul_backward", rotary_mode)
    dx, dr1, dr2 = ta.ge.RotaryPositionEmbeddingGrad(grad, r1, r2, self, mode=mode)
    return dx, dr1, dr2

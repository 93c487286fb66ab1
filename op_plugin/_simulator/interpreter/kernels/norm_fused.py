"""Small fused GE ops of torch_npu's lowering (CANN ops-nn docs): AddRmsNormCast, GroupNormSilu,
MaskedSoftmaxWithRelPosBias, and Cmo (the cache prefetch npu_prefetch lowers to).

* AddRmsNormCast (ops-nn ``norm/add_rms_norm_cast``, aclnnAddRmsNormCast): AddRmsNorm's outputs, with
  y1 = float32(y2) the widening of the rounded y2 (the doc's ``y1Out = float(y2Out)``).
* GroupNormSilu (ops-nn ``norm/group_norm_silu``): y = silu(group_norm(x) · gamma + beta) computed in
  float32 and rounded once to x's dtype; mean and rstd = 1 / sqrt(population variance + eps) of shape
  (N, num_groups) in gamma's dtype (x's without gamma and beta), as the wheel's Meta gives them. TorchAir's prototype
  names the third output ``variance``; CANN's current prototype and torch_npu's docs call it rstdOut.
* MaskedSoftmaxWithRelPosBias (ops-nn ``norm/masked_softmax_with_rel_pos_bias`` README): y = softmax(scale_value
  · x + atten_mask + relative_pos_bias) over the last dim, in float32, rounded once; x (B*W, N, S1, S2) or (B, W,
  N, S1, S2), atten_mask (W, S1, S2) in any of the README's 3/4/5-D forms, relative_pos_bias (N, S1, S2) likewise.
  inner_precision_mode is an NPU precision choice the README does not describe: the CPU computes in float32.
* Cmo: a prefetch of ``src`` into the NPU's L2 cache (type 6); it has no outputs and changes no value, so
  the CPU does nothing but check its attrs.
"""
from __future__ import annotations

import torch

from ..registry import ge_kernel, refuse
from .norm import add_rms_norm

_HALF = (torch.float16, torch.bfloat16)
_FLOATS = (torch.float16, torch.bfloat16, torch.float32)


@ge_kernel("AddRmsNormCast", accepts={"x1": _HALF, "x2": _HALF, "gamma": _HALF})
def add_rms_norm_cast(x1, x2, gamma, *, epsilon):
    """AddRmsNorm, plus y1 = float32(y2)."""
    if x2.shape != x1.shape:
        refuse(f"x2 {list(x2.shape)} must have x1's shape {list(x1.shape)}")
    y, rstd, x = add_rms_norm(x1, x2, gamma, epsilon=epsilon)
    return y.float(), y, rstd, x


@ge_kernel("GroupNormSilu", accepts={"x": _FLOATS, "gamma": _FLOATS, "beta": _FLOATS})
def group_norm_silu(x, gamma, beta, *, num_groups, eps):
    """x read as (N, C, *), statistics per sample and group over float32 values."""
    if x.dim() < 2:
        refuse(f"x must be (N, C, *), got shape {list(x.shape)}")
    n, c = x.shape[0], x.shape[1]
    if num_groups <= 0 or c % num_groups:
        refuse(f"num_groups {num_groups} must divide the {c} channels")
    for name, tensor in (("gamma", gamma), ("beta", beta)):
        if tensor is not None and list(tensor.shape) != [c]:
            refuse(f"{name} must have shape [{c}], got {list(tensor.shape)}")
    grouped = x.float().reshape(n, num_groups, -1)
    mean = grouped.mean(dim=-1, keepdim=True)
    centred = grouped - mean
    rstd = 1.0 / torch.sqrt((centred * centred).mean(dim=-1, keepdim=True) + eps)
    channel = [1, c] + [1] * (x.dim() - 2)
    y = (centred * rstd).reshape(x.shape)
    if gamma is not None:
        y = y * gamma.float().reshape(channel)
    if beta is not None:
        y = y + beta.float().reshape(channel)
    y = y * torch.sigmoid(y)
    stats_dtype = gamma.dtype if gamma is not None and beta is not None else x.dtype  # the wheel's Meta
    return y.to(x.dtype), mean.reshape(n, num_groups).to(stats_dtype), rstd.reshape(n, num_groups).to(stats_dtype)


def windows_softmax(x, atten_mask, relative_pos_bias, scale_value):
    """The README's formula over x viewed as (B, W, N, S1, S2); None when a shape is not one the README lists."""
    *_, n, s1, s2 = x.shape
    if x.dim() not in (4, 5) or relative_pos_bias.numel() != n * s1 * s2:
        return None
    windows = 1 if atten_mask is None else atten_mask.numel() // (s1 * s2)
    if atten_mask is not None and (atten_mask.numel() != windows * s1 * s2 or x.numel() % (windows * n * s1 * s2)):
        return None
    wide = x.float().reshape(-1, windows, n, s1, s2) * scale_value
    if atten_mask is not None:
        wide = wide + atten_mask.float().reshape(1, windows, 1, s1, s2)
    wide = wide + relative_pos_bias.float().reshape(1, 1, n, s1, s2)
    return torch.softmax(wide, dim=-1).reshape(x.shape).to(x.dtype)


@ge_kernel("MaskedSoftmaxWithRelPosBias", accepts={"x": _FLOATS, "atten_mask": _FLOATS,
                                                   "relative_pos_bias": _FLOATS})
def masked_softmax_with_rel_pos_bias(x, atten_mask, relative_pos_bias, *, scale_value, inner_precision_mode):
    y = windows_softmax(x, atten_mask, relative_pos_bias, scale_value)
    if y is None:
        refuse(f"x {list(x.shape)}, atten_mask {None if atten_mask is None else list(atten_mask.shape)}, "
               f"relative_pos_bias {list(relative_pos_bias.shape)} are not the README's (B*W or B, W, N, S1, S2), "
               "(W, S1, S2), (N, S1, S2) forms")
    return y


@ge_kernel("Cmo")
def cmo(src, *, max_size, type, offset):  # noqa: A002  (the prototype's attr name)
    """A cache prefetch: no outputs, no effect on any value."""
    if max_size <= 0 or offset < 0:
        refuse(f"max_size {max_size} must be > 0 and offset {offset} >= 0")
    if type != 6:
        refuse(f"type {type}: only 6 (prefetch, what npu_prefetch emits) is known; CANN documents no other here")
    return ()

"""RMS normalisation GE ops (hicann ops-nn ``norm/``), forward and backward: RmsNorm, AddRmsNorm (what the
shipped YAML op npu_custom_add_rms_norm maps onto; TorchAir's converter is ``custom/npu_add_rms_norm.py``),
AddRmsNormCast, RmsNormGrad and RmsNormGradQuant. Statistics of 16-bit float inputs are computed in float32.

* AddRmsNorm: rounded as the A2 kernel rounds (its docstring): ``x * rstd`` goes to the input dtype before gamma.
* AddRmsNormCast (ops-nn ``norm/add_rms_norm_cast``, aclnnAddRmsNormCast): AddRmsNorm's outputs, with
  y1 = float32(y2) the widening of the rounded y2 (the doc's ``y1Out = float(y2Out)``, the golden's
  ``y.type(torch.float32)``, the A2 float16 kernels; the A2 bfloat16 single-row kernel writes the float32
  product before its rounding instead).

RmsNormGrad (CANN ops-nn ``norm/rms_norm_grad``): the gradient of RmsNorm, what TorchAir lowers
torch_npu's npu_rms_norm_backward to; and RmsNormGradQuant (``norm/rms_norm_grad_quant``), the same
gradient with dx quantised, what TorchAir lowers ``_npu_rms_norm_backward_quant`` to.

From CANN's definition: with ``xr = x * rstd`` (rstd the float32 forward output, with size-1 normalized
dims) and ``g = dy * gamma``, ``dx = rstd * (g - xr * mean(g * xr))`` over the normalized dims (the last
``gamma.dim()``), ``dgamma = sum(dy * xr)`` over the others, in float32; dx in x's dtype, dgamma float32.

RmsNormGradQuant (aclnnRmsNormGradQuant.md): ``dx_quant = round(dx / scale_x + offset_x)`` (div_mode) or
``round(dx * scale_x + offset_x)``, from the float32 dx (arch35 ``rms_norm_grad_quant_dx_full_load.h`` keeps
it in float32 registers), rounded half to even (its CAST_RINT float32 -> int32) and saturated to int8: its
int8 casts are NO_SAT, whose out-of-range result CANN does not document, so the saturation is torch_npu's
own test golden's (npu_rms_norm_backward then npu_quantize); quant_mode "static" only (the only mode CANN
documents); a hifloat8 dx (dst_type DT_HIFLOAT8) has no CPU dtype: refused.
"""
from __future__ import annotations

import torch
from ...registry import ge_kernel, refuse
from ..common import opmath
from ..common import attr_dtype


# ---- rms norm -------------------------------------------------------------------------------------

_NORM_FLOATS = (torch.float16, torch.bfloat16, torch.float32)


@ge_kernel("RmsNorm", accepts={"x": _NORM_FLOATS, "gamma": _NORM_FLOATS})
def rms_norm(x, gamma, *, epsilon):
    """y = x * rstd * gamma, rstd = rsqrt(mean(x^2) + epsilon) over gamma's trailing dims of x (kept as
    size-1 dims; a 0-d gamma normalizes each element by itself); rstd is float32 whatever x is (so the
    output dtypes are explicit, not the decorator's widening). torch_npu's npu_rms_norm runs this kernel."""
    if gamma.dim() > x.dim() or tuple(x.shape[x.dim() - gamma.dim():]) != tuple(gamma.shape):
        refuse(f"gamma of shape {tuple(gamma.shape)} is not the trailing shape of x {tuple(x.shape)}")
    dims = list(range(x.dim() - gamma.dim(), x.dim()))
    wide = opmath(x).float()
    square = wide.pow(2)
    rstd = torch.rsqrt((square.mean(dim=dims, keepdim=True) if dims else square) + epsilon)
    return (wide * rstd * opmath(gamma).float()).to(x.dtype), rstd.float()


@ge_kernel("AddRmsNorm", accepts={"x1": _NORM_FLOATS, "x2": _NORM_FLOATS, "gamma": _NORM_FLOATS})
def add_rms_norm(x1, x2, gamma, *, epsilon):
    """y = rmsnorm(x1 + x2) * gamma, rstd (float32), x = x1 + x2 (in the input dtype); x1 and x2 of one
    shape (CANN does not broadcast them).

    Rounded as CANN's Ascend910B (A2) kernel rounds, the SoC the simulator models (ops-nn
    norm/add_rms_norm/op_kernel/add_rms_norm_{single_n,multi_n,merge_n,split_d}.h and the A2 branch of its
    golden, tests/assets/golden.py ``add_rms_golden_v1``): x = x1 + x2 rounded to the input dtype, rstd in
    float32, then for float16/bfloat16 ``x * rstd`` is rounded to the input dtype before it is multiplied by
    gamma (float16: a float16 multiply; bfloat16: in float32), and the product rounded again. RmsNorm's A2
    kernel keeps ``x * rstd * gamma`` in float32 (one rounding); the Ascend 950 kernels (arch35, the golden's
    ``add_rms_golden_v2``) do so for AddRmsNorm too: 1 ulp apart on about a quarter of the elements."""
    if x2.shape != x1.shape:
        refuse(f"x2 {list(x2.shape)} must have x1's shape {list(x1.shape)}")
    if gamma.dim() > x1.dim() or tuple(x1.shape[x1.dim() - gamma.dim():]) != tuple(gamma.shape):
        refuse(f"gamma of shape {tuple(gamma.shape)} is not the trailing shape of x {tuple(x1.shape)}")
    x = (opmath(x1).float() + opmath(x2).float()).to(x1.dtype)
    dims = list(range(x.dim() - gamma.dim(), x.dim()))
    wide = opmath(x).float()
    square = wide.pow(2)
    rstd = torch.rsqrt((square.mean(dim=dims, keepdim=True) if dims else square) + epsilon)
    normed = wide * rstd
    if x.dtype in (torch.float16, torch.bfloat16):
        normed = normed.to(x.dtype).float()
    return (normed * opmath(gamma).float()).to(x.dtype), rstd.float(), x

_HALF = (torch.float16, torch.bfloat16)


@ge_kernel("AddRmsNormCast", accepts={"x1": _HALF, "x2": _HALF, "gamma": _HALF})
def add_rms_norm_cast(x1, x2, gamma, *, epsilon):
    """AddRmsNorm, plus y1 = float32(y2)."""
    if x2.shape != x1.shape:
        refuse(f"x2 {list(x2.shape)} must have x1's shape {list(x1.shape)}")
    y, rstd, x = add_rms_norm(x1, x2, gamma, epsilon=epsilon)
    return y.float(), y, rstd, x

_FLOATS = (torch.float16, torch.float32, torch.bfloat16)
_INT8_RANGE = (-128, 127)


def _grad_f32(dy, x, rstd, gamma):
    """(dx, dgamma) in float32."""
    k = gamma.dim()
    if k > x.dim() or tuple(x.shape[x.dim() - k:]) != tuple(gamma.shape):
        refuse(f"gamma {tuple(gamma.shape)} is not the trailing shape of x {tuple(x.shape)}")
    norm_dims = tuple(range(x.dim() - k, x.dim()))
    batch_dims = tuple(range(x.dim() - k))
    try:
        xr = opmath(x).float() * rstd
    except RuntimeError:
        refuse(f"rstd {tuple(rstd.shape)} does not broadcast against x {tuple(x.shape)}")
    grad = opmath(dy).float()
    g = grad * opmath(gamma).float()
    dx = rstd * (g - xr * ((g * xr).mean(dim=norm_dims, keepdim=True) if norm_dims else g * xr))
    dgamma = grad * xr
    if batch_dims:
        dgamma = dgamma.sum(dim=batch_dims)
    return dx, dgamma


@ge_kernel("RmsNormGrad", one_dtype=("dy", "x"), accepts={"dy": _FLOATS, "x": _FLOATS, "gamma": _FLOATS,
                                                          "rstd": (torch.float32,)})
def rms_norm_grad(dy, x, rstd, gamma):
    """rstd as RmsNorm gives it (size-1 normalized dims) or with those dims dropped, x.shape[:n]; torch_npu's
    npu_rms_norm_backward (and npu_rms_norm's autograd, aclnnRmsNormGrad) runs this kernel."""
    if dy.shape != x.shape:
        refuse(f"dy {tuple(dy.shape)} must have x's shape {tuple(x.shape)}")
    if gamma.dim() > x.dim() or tuple(x.shape[x.dim() - gamma.dim():]) != tuple(gamma.shape):
        refuse(f"gamma {tuple(gamma.shape)} is not the trailing shape of x {tuple(x.shape)}")
    want = tuple(x.shape[:x.dim() - gamma.dim()]) + (1,) * gamma.dim()
    if rstd.numel() != max(1, torch.Size(want).numel()) or rstd.dim() > x.dim():
        refuse(f"rstd of shape {tuple(rstd.shape)} is not RmsNorm's rstd {want}")
    dx, dgamma = _grad_f32(dy, x, rstd.reshape(want), gamma)
    return dx.to(x.dtype), dgamma


def quantised_grad(dy, x, rstd, gamma, scale_x, offset_x, div_mode):
    """RmsNormGradQuant's (int8 dx, float32 dgamma); rstd as x.shape[:n] (CANN's layout) or with the
    normalized dims kept as size 1 (npu_rms_norm's)."""
    if x.shape != dy.shape:
        refuse(f"x {tuple(x.shape)} and dy {tuple(dy.shape)} must have one shape")
    for name, tensor in (("scale_x", scale_x), ("offset_x", offset_x)):
        if tensor is not None and tensor.numel() != 1:
            refuse(f"{name} has shape {tuple(tensor.shape)}; CANN takes one element ([1])")
    lead = x.dim() - gamma.dim()
    if lead >= 0 and tuple(rstd.shape) == tuple(x.shape[:lead]):
        rstd = rstd.reshape(*rstd.shape, *([1] * gamma.dim()))
    dx, dgamma = _grad_f32(dy, x, rstd, gamma)
    scale = opmath(scale_x).float().reshape(())
    scaled = dx / scale if div_mode else dx * scale
    if offset_x is not None:
        scaled = scaled + offset_x.float().reshape(())
    if bool(torch.isnan(scaled).any()):
        refuse("dx / scale_x is NaN somewhere (a zero scale_x with a zero gradient): its int8 value is not "
               "defined by CANN")
    return torch.round(scaled).clamp(*_INT8_RANGE).to(torch.int8), dgamma


@ge_kernel("RmsNormGradQuant", one_dtype=("dy", "x"),
           accepts={"dy": _FLOATS, "x": _FLOATS, "gamma": _FLOATS, "rstd": (torch.float32,), "scale_x": _FLOATS,
                    "offset_x": (torch.int32,)})
def rms_norm_grad_quant(dy, x, rstd, gamma, scale_x, offset_x, *, div_mode, quant_mode, dst_type):
    if quant_mode != "static":
        refuse(f"quant_mode={quant_mode!r}: CANN documents only \"static\"")
    out_dtype = attr_dtype("dst_type", dst_type)
    if out_dtype != torch.int8:
        refuse(f"dst_type {out_dtype}: dx_out is int8 or hifloat8 (CANN's prototype)")
    return quantised_grad(dy, x, rstd, gamma, scale_x, offset_x, div_mode)

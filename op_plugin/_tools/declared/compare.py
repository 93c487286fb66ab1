"""How a declared case's compiled result is compared with eager: structure, dtype and shape, then values.

The tolerance is per dtype (`TOLERANCES`); integers and bool must be equal; NaN matches NaN and an
inf the same inf. A mismatch sets the result's class (`shape-dtype` or `numeric`, with the largest
absolute error and the tolerance it broke) and a one-line reason.
"""
from __future__ import annotations

import math

import torch

# TorchAir's check is allclose(rtol=1e-3, atol=1e-5) for every float dtype; 16-bit floats get
# about one unit in the last place more, since CANN rounds once where eager CPU may round twice.
# Same bytes, two names: TorchAir's graph returns an MX op's float8_e8m0 block scale as the GE dtype
# (torch.float8_e8m0fnu, its _ge_dtype_to_torch), torch_npu's eager op as uint8 storage (its Meta; the op docs:
# "mxscale: float8_e8m0fnu, returned as uint8"). Such a pair is compared byte for byte.
SAME_STORAGE = {(torch.float8_e8m0fnu, torch.uint8)}

TOLERANCES = {
    torch.float64: (1e-3, 1e-5), torch.float32: (1e-3, 1e-5), torch.complex64: (1e-3, 1e-5),
    torch.complex128: (1e-3, 1e-5), torch.float16: (2e-3, 1e-3), torch.bfloat16: (1.6e-2, 1e-2),
}


def compare(result, compiled, eager, values: bool = True) -> None:
    """Compare (output, args, kwargs) tuples leaf by leaf; values=False checks all but the values."""
    names = ("output", "args", "kwargs")  # a caller may pass the output alone (random ops): zip stops there
    for name, got, want in zip(names, compiled, eager, strict=False):
        got_leaves, got_spec = torch.utils._pytree.tree_flatten(got)
        want_leaves, want_spec = torch.utils._pytree.tree_flatten(want)
        if got_spec != want_spec:
            result.cls, result.reason = "shape-dtype", f"{name}: structure {got_spec} != eager {want_spec}"
            return
        for index, (g, w) in enumerate(zip(got_leaves, want_leaves, strict=True)):
            where = f"{name} {index}"
            if isinstance(w, torch.Tensor) != isinstance(g, torch.Tensor):
                result.cls, result.reason = "shape-dtype", f"{where}: {type(g).__name__} != eager {type(w).__name__}"
                return
            if not isinstance(w, torch.Tensor):
                if g != w and not (isinstance(w, float) and isinstance(g, float) and math.isnan(w) and math.isnan(g)):
                    result.cls, result.reason = "numeric", f"{where}: {g!r} != eager {w!r}"
                    return
                continue
            if (g.dtype, w.dtype) in SAME_STORAGE and g.shape == w.shape:
                g = g.view(w.dtype)
            if g.dtype != w.dtype or g.shape != w.shape:
                result.cls = "shape-dtype"
                result.reason = f"{where}: {g.dtype}{list(g.shape)} != eager {w.dtype}{list(w.shape)}"
                return
            mismatch = tensor_mismatch(g, w) if values else None
            if mismatch is not None:
                result.cls, (result.max_abs_err, result.tolerance) = "numeric", mismatch
                result.reason = (f"{where} ({w.dtype}): max abs err {mismatch[0]:.3g} "
                                 f"(rtol {mismatch[1]['rtol']}, atol {mismatch[1]['atol']})")
                return


def tensor_mismatch(got: torch.Tensor, want: torch.Tensor):
    """None when close, else (max abs err, tolerance); NaN matches NaN, inf matches the same inf."""
    rtol, atol = TOLERANCES.get(want.dtype, (0.0, 0.0))
    tolerance = {"rtol": rtol, "atol": atol}
    if want.is_complex():
        got, want = torch.view_as_real(got), torch.view_as_real(want)
    if not want.is_floating_point():
        if torch.equal(got, want):
            return None
        diff = (got.to(torch.float64) - want.to(torch.float64)).abs()
        return float(diff.max()), tolerance
    g, w = got.to(torch.float64), want.to(torch.float64)
    if torch.isclose(g, w, rtol=rtol, atol=atol, equal_nan=True).all():
        return None
    both = torch.isfinite(g) & torch.isfinite(w)
    err = float((g - w).abs()[both].max()) if both.any() else 0.0
    if not torch.equal(torch.isfinite(g), torch.isfinite(w)) or not torch.equal(torch.isnan(g), torch.isnan(w)):
        err = float("inf")  # a NaN or inf where eager has a finite value (or another non-finite)
    return err, tolerance

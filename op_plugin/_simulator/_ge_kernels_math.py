"""CPU kernels for further built-in GE element-wise ops that TorchAir's aten converters emit.

Kept apart from ``_ge_kernels`` so that file stays small; same conventions (CANN prototype order,
attrs by GE name, no type promotion).
"""

from __future__ import annotations

import torch

from ._ge_registry import builtin_kernel

_LOW_PRECISION = (torch.float16, torch.bfloat16)


@builtin_kernel("Sxpy")
def _sxpy(inputs, attrs, node):
    """y = x1 - alpha * x2 (alpha defaults to 1).

    The semantics come from TorchAir's only user, ``aten.rsub.Scalar(self, other, alpha)`` =
    other - alpha * self, lowered as ``Sxpy(other, self, alpha)`` (ge_converter/aten/rsub.py).
    16-bit floats are computed in float32 and rounded once.
    """
    x1, x2 = inputs[0], inputs[1]
    alpha = inputs[2] if len(inputs) > 2 else None
    dtypes = {t.dtype for t in (x1, x2, alpha) if t is not None}
    if len(dtypes) > 1:
        raise TypeError(f"Sxpy needs inputs of one dtype (TorchAir promotes them first), got {sorted(map(str, dtypes))}")
    wide = (lambda t: t.float()) if x1.dtype in _LOW_PRECISION else (lambda t: t)
    result = wide(x1) - (wide(x2) if alpha is None else wide(alpha) * wide(x2))
    return [result.to(x1.dtype)]

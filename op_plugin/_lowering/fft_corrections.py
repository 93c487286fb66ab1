"""Correction (`when="corrects"`; `registry`) of TorchAir's `aten._fft_c2c` converter, the complex-to-complex
FFT behind `torch.fft.fft` / `ifft` / `fft2` / `ifft2` / `fftn` / `ifftn` on complex input.

TorchAir's converter (ge_converter/aten/_fft_c2c.py) has three faults, the same on every host:

- it never reads `forward`: an inverse transform (`torch.fft.ifft`) is lowered as a forward `FFT`;
- it permutes the (..., 2) real view of the input with an order of the complex tensor's rank, which
  GE's Permute refuses (the order must name every dim), so no `_fft_c2c` graph runs at all;
- it multiplies `Gather(Shape(x))` by the Python int 1 (an int64 Const) for the normalisation, and
  raises NotImplementedError for more than two dims (`fftn` over three).

Corrected: the transformed dims moved last with `Transpose` (complex is one of its BasicType dtypes),
then per pair of dims `FFT2D` / `IFFT2D` and per single dim `FFT` / `IFFT` (REG_OP FFT, IFFT, FFT2D,
IFFT2D: the innermost one or two dims; IFFT and IFFT2D "compatible with TensorFlow", i.e. scaled by
1/n), each group's dims moved back. A DFT over several dims is the product of the 1-D ones, so the
grouping does not change the result. aten's `normalization` (0 none, 1 by 1/sqrt(n), 2 by 1/n, n the
product of the transformed sizes; torch/_refs/fft.py `_apply_norm`) is applied as one complex `Mul` by
a real factor: forward transforms are unscaled, so the factor is 1, 1/sqrt(n) or 1/n; inverse ones come
back scaled by 1/n from IFFT, so the factor is n, sqrt(n) or 1.
"""
from __future__ import annotations

import math

import torch

from .cases import Support, TypedTensor
from .registry import aten_converter
from .torchair_api import TorchAirApi

_NONE, _BY_ROOT_N, _BY_N = 0, 1, 2


def _c64(*dims):
    return TypedTensor(*dims, dtype=torch.complex64)


_FFT_CASES = [Support(_c64(3, 8), [1], 0, False), Support(_c64(3, 8), [1], 2, False),
              Support(_c64(6, 4), [0], 1, True), Support(_c64(2, 4, 6), [1, 2], 1, False),
              Support(_c64(2, 4, 6), [0, 1, 2], 2, False), Support(_c64(2, 4, 6), [0, 2], 2, True)]


@aten_converter(torch.ops.aten._fft_c2c.default, when="corrects", cases=_FFT_CASES)
def fft_c2c(ta: TorchAirApi, self, dim, normalization: int, forward: bool, meta_outputs=None):
    """`aten._fft_c2c(x, dim, normalization, forward)`: the DFT of complex x over `dim` (inverse when
    `forward` is False), scaled as `normalization` says (module docstring)."""
    graph = ta.graph
    if isinstance(dim, graph.Tensor) or any(not isinstance(d, int) for d in dim):
        raise NotImplementedError("aten._fft_c2c: a symbolic `dim` list cannot be lowered (the transformed dims "
                                  "pick the Transpose orders)")
    if normalization not in (_NONE, _BY_ROOT_N, _BY_N):
        raise NotImplementedError(f"aten._fft_c2c: normalization {normalization} is not 0, 1 or 2")
    rank = self.rank
    dims = sorted({d % rank for d in dim}) if rank else []
    if not dims:
        return ta.ge.Identity(self)
    result = self
    for start in range(0, len(dims), 2):
        result = _transform(ta, result, dims[start:start + 2], rank, forward)
    return _normalize(ta, result, self, dims, normalization, forward)


def _transform(ta: TorchAirApi, x, group: list[int], rank: int, forward: bool):
    """The 1-D or 2-D transform of `x` over the dims of `group`, moved last and back."""
    ge, const, int64 = ta.ge, ta.graph.Const, ta.graph.DataType.DT_INT64
    order = [d for d in range(rank) if d not in group] + group
    moved = x if order == list(range(rank)) else ge.Transpose(x, const(order, dtype=int64))
    if len(group) == 2:
        done = ge.FFT2D(moved) if forward else ge.IFFT2D(moved)
    else:
        done = ge.FFT(moved) if forward else ge.IFFT(moved)
    if order == list(range(rank)):
        return done
    back = [order.index(d) for d in range(rank)]
    return ge.Transpose(done, const(back, dtype=int64))


def _normalize(ta: TorchAirApi, result, source, dims: list[int], normalization: int, forward: bool):
    """`result` times the real factor that turns its scaling into aten's (module docstring)."""
    ge, graph = ta.ge, ta.graph
    data_type = graph.DataType
    power = {_NONE: 0.0, _BY_ROOT_N: 0.5, _BY_N: 1.0}[normalization]
    exponent = -power if forward else 1.0 - power  # IFFT already divided by n
    if exponent == 0.0:
        return result
    complex_dtype = source.dtype
    part = data_type.DT_DOUBLE if complex_dtype == data_type.DT_COMPLEX128 else data_type.DT_FLOAT
    sizes = [source.symsize[d] for d in dims] if source.symsize is not None else None
    if sizes is not None and all(isinstance(s, int) for s in sizes):
        factor = graph.Const(float(math.prod(sizes)) ** exponent, dtype=part)
    else:  # symbolic sizes: n from Shape(x), in the parts' float dtype
        shape = ge.Shape(source, dtype=data_type.DT_INT64)
        picked = ge.Gather(shape, graph.Const(dims, dtype=data_type.DT_INT64))
        n = graph.Cast(ge.ReduceProd(picked, graph.Const([0], dtype=data_type.DT_INT64), keep_dims=False),
                    dst_type=part)
        factor = ge.Pow(n, graph.Const(exponent, dtype=part))
    return ge.Mul(result, graph.Cast(factor, dst_type=complex_dtype))

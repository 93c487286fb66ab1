"""op_plugin's GE converters for the aten ops that build complex tensors and TorchAir does not lower
(`when="missing"`; `registry`), and a correction of its `view_as_real`.

DeepSeek-V2's rotary embedding (transformers `DeepseekV2RotaryEmbedding`) builds its frequencies as
`torch.polar(torch.ones_like(freqs), freqs)` and rotates with `view_as_complex(x) * freqs_cis`
followed by `view_as_real`; TorchAir lowers the last three (`GatherV2` + `Complex`, a complex `Mul`,
`Real` / `Imag` + `Pack`) but raises NotImplementedError for `aten.polar` and `aten.complex`. Both
lower to CANN's `Complex(real, imag, Tout)` (REG_OP Complex: real and imag float32 or float64, output
complex64 or complex128 as the attr `Tout` says), the op TorchAir's own `view_as_complex` converter
uses. `aten.view_as_real` of complex128 is corrected (`when="corrects"`): TorchAir leaves `Real` /
`Imag` at their default `Tout`, float32.
"""
from __future__ import annotations

import torch

from .cases import F32, Support, T
from .registry import aten_converter
from .torchair_api import TorchAirApi

aten = torch.ops.aten


def _complex(ta: TorchAirApi, real, imag, meta_outputs):
    """`Complex(real, imag)` with both parts in the float dtype of the node's complex dtype."""
    data_type = ta.graph.DataType
    out = meta_outputs.dtype  # a GE DataType
    part = data_type.DT_DOUBLE if out == data_type.DT_COMPLEX128 else data_type.DT_FLOAT
    real, imag = ta.dtype_promote(real, imag, target_dtype=part)
    return ta.ge.Complex(real, imag, Tout=out)


@aten_converter(aten.polar.default, when="missing",
                cases=[Support(F32(3, 4, value_range=(0, 2)), F32(3, 4, value_range=(-4, 4))),
                       Support(F32(5, 1), F32(5, 8)),
                       Support(T([1.0, 2.0], dtype=torch.float64), T([0.5, -3.0], dtype=torch.float64))])
def polar(ta: TorchAirApi, abs, angle, meta_outputs=None):  # aten's names
    """`aten.polar` (`torch.polar(abs, angle)`: DeepSeek-V2's rotary frequencies): torch defines it as
    abs * cos(angle) + i * abs * sin(angle) (torch.polar docs; ATen's polar kernel computes exactly
    that), float32 -> complex64, float64 -> complex128. Lowered to `Complex(Mul(abs, Cos(angle)),
    Mul(abs, Sin(angle)), Tout)`, abs and angle broadcast by the Muls as aten broadcasts them."""
    ge = ta.ge
    return _complex(ta, ge.Mul(abs, ge.Cos(angle)), ge.Mul(abs, ge.Sin(angle)), meta_outputs)


@aten_converter(aten.complex.default, when="missing",
                cases=[Support(F32(3, 4), F32(3, 4)), Support(F32(2, 1), F32(3))])
def complex_(ta: TorchAirApi, real, imag, meta_outputs=None):
    """`aten.complex` (`torch.complex(real, imag)`): real + i * imag, broadcast (torch.complex docs).
    `Complex(real, imag, Tout)`, the op TorchAir's `view_as_complex` converter uses; the parts broadcast
    as CANN's Complex broadcasts them (hicann ops-math math/complex/docs/aclnnComplex.md: real and imag
    of shapes that broadcast, out of the broadcast shape)."""
    return _complex(ta, real, imag, meta_outputs)


@aten_converter(aten.view_as_real.default, when="corrects",
                cases=[Support(T([[1.0, -2.0], [0.5, 3.0]], dtype=torch.complex128))])
def view_as_real(ta: TorchAirApi, self, meta_outputs=None):
    """`aten.view_as_real` of a complex128 tensor: TorchAir's converter builds `Pack([Real(x), Imag(x)],
    axis=-1)` without the `Tout` attr, whose REG_OP default is DT_FLOAT (REG_OP Real/Imag: `.ATTR(Tout,
    Type, DT_FLOAT)`), so a complex128 tensor comes back as float32 where aten gives float64 (the node's
    dtype). Corrected: `Tout` set to the node's dtype; complex64 keeps TorchAir's lowering (Tout's default
    is its float32)."""
    part = meta_outputs.dtype
    if part != ta.graph.DataType.DT_DOUBLE:
        return ta.original(self, meta_outputs=meta_outputs)
    ge = ta.ge
    return ge.Pack([ge.Real(self, Tout=part), ge.Imag(self, Tout=part)], N=2, axis=-1)

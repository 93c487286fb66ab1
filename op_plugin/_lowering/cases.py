"""Declared cases of op_plugin's own converters, in TorchAir's form.

TorchAir declares test cases beside its converters: `@declare_supported([Support(F32(2, 3),
F32(3)), ...])` (`torchair/_ge_concrete_graph/supported_declaration.py`): each `Support` holds the
call's arguments, a tensor given by its dims and dtype (`F32(2, 3)`, optionally a `value_range`)
or by its value (`T([0, 2], dtype=torch.int64)`). op_plugin's converters declare theirs the same
way (`@aten_converter(..., cases=[Support(...)])`) with these stand-ins, which have TorchAir's
attributes but need no TorchAir: the converters are declared at `import op_plugin`, which never
imports TorchAir on a CPU host. `op-plugin declared-cases` runs both kinds alike.
"""
from __future__ import annotations

import torch


class TypedTensor:
    """A case's tensor: random `dims` of `dtype` (uniform in `value_range` if given), or `value`."""

    def __init__(self, *dims, dtype: torch.dtype, value=None, value_range=None):
        if value_range is not None and len(value_range) != 2:
            raise ValueError("value_range is (low, high)")
        self.dims, self.dtype, self.value, self.value_range = dims, dtype, value, value_range

    def __repr__(self) -> str:
        if self.value is not None:
            return f"tensor({self.value}, dtype={self.dtype})"
        if self.value_range is not None:
            return f"tensor({self.dims}, dtype={self.dtype}, value_range={self.value_range})"
        return f"Tensor({self.dims}, {self.dtype})"


def _typed(dtype: torch.dtype) -> type:
    class Typed(TypedTensor):
        def __init__(self, *dims, value_range=None):
            super().__init__(*dims, dtype=dtype, value_range=value_range)

    return Typed


F32, F16, BF16 = _typed(torch.float32), _typed(torch.float16), _typed(torch.bfloat16)
I32, I64, BOOL = _typed(torch.int32), _typed(torch.int64), _typed(torch.bool)


class T(TypedTensor):
    """A tensor of this value: `T([0, 2], dtype=torch.int64)`."""

    def __init__(self, value, *, dtype: torch.dtype):
        super().__init__(dtype=dtype, value=value)


class Support:
    """One case: the converter's op called with these arguments (tensors as `TypedTensor`s)."""

    def __init__(self, *args, **kwargs):
        if any(isinstance(a, torch.Tensor) for a in (*args, *kwargs.values())):
            raise TypeError("a case gives its tensors as F32(...)/T(...), not as torch tensors")
        self.args, self.kwargs = args, kwargs

    def __repr__(self) -> str:
        return f"Support({', '.join([repr(a) for a in self.args] + [f'{k}={v!r}' for k, v in self.kwargs.items()])})"

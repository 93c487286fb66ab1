"""Dtype names as written in YAML, and the dtype a schema's ScalarType default names."""
from __future__ import annotations

import torch

DTYPES: dict[str, torch.dtype] = {
    "float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32,
    "float64": torch.float64, "int8": torch.int8, "int16": torch.int16, "int32": torch.int32,
    "int64": torch.int64, "uint8": torch.uint8, "bool": torch.bool,
}
DTYPE_NAMES: dict[torch.dtype, str] = {v: k for k, v in DTYPES.items()}
FLOATING = frozenset({torch.float16, torch.bfloat16, torch.float32, torch.float64})


def dtype_name(dtype: torch.dtype) -> str:
    return DTYPE_NAMES.get(dtype, str(dtype).replace("torch.", ""))


def is_dtype_name(value: object) -> bool:
    """`value` is one of the YAML dtype names (and not, say, a list someone wrote by mistake)."""
    return isinstance(value, str) and value in DTYPES


_SCHEMA_SCALAR_TYPES: dict[int, torch.dtype] = {}


def schema_default_dtype(number: int) -> torch.dtype:
    """The dtype a `ScalarType x=int8` default names: torch's schema parser stores it as c10's
    ScalarType enum number (int8 -> 1), which is neither a torch.dtype nor GE's numbering."""
    if not _SCHEMA_SCALAR_TYPES:  # asked of torch's own parser, not a copied enum table
        for name, dtype in DTYPES.items():
            parsed = torch._C.parse_schema(f"f(ScalarType d={name}) -> ()")
            _SCHEMA_SCALAR_TYPES[parsed.arguments[0].default_value] = dtype
    try:
        return _SCHEMA_SCALAR_TYPES[int(number)]
    except KeyError:
        raise ValueError(f"ScalarType default {number} is not one of the YAML dtypes {sorted(DTYPES)}") from None

"""Dtype names as written in YAML, and GE's own dtype numbering."""
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

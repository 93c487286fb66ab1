"""Dtype-aware tolerances for comparing a compiled (or simulated) result with eager.

One table for the tests, `op-plugin test` and `op-plugin compare` (re-exported as
`op_plugin.testing.tolerances`).
"""
from __future__ import annotations

import torch

_TABLE = {
    torch.float16: dict(atol=1e-3, rtol=1e-3),
    torch.bfloat16: dict(atol=1.6e-2, rtol=1.6e-2),
    torch.float32: dict(atol=1e-5, rtol=1.3e-6),
    torch.float64: dict(atol=1e-7, rtol=1e-7),
}


def tolerances(dtype: torch.dtype) -> dict:
    """assert_close tolerances for comparing a compiled (or simulated) result with eager.

    float32: atol 1e-5, rtol 1.3e-6 (torch's defaults); float16: 1e-3; bfloat16: 1.6e-2;
    integer and bool results must be exact.
    """
    return dict(_TABLE.get(dtype, dict(atol=0, rtol=0)))

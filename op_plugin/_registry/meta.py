"""The Meta (fake) function generated from a YAML `outputs:` rule.

Sizes come from the `size:` expressions, evaluated on fake tensors, so SymInts flow through
untouched and dynamic shapes stay dynamic.
"""
from __future__ import annotations

from typing import Any

import torch

from .._spec.model import OpSpec


def generated_meta(spec: OpSpec, bound: dict[str, Any]) -> Any:
    assert spec.outputs is not None
    device = _first_tensor(spec, bound).device
    results = []
    for out in spec.outputs:
        if out.same_as is not None:
            results.append(bound[out.same_as])
            continue
        if out.dtype_from_arg is not None:
            source = bound[out.dtype_from_arg]
            dtype = (source[0] if isinstance(source, (list, tuple)) else source).dtype
        else:
            dtype = out.dtype
        results.append(torch.empty(out.size.evaluate(bound), dtype=dtype, device=device))
    if len(results) == 1:
        return results[0]
    return tuple(results)


def _first_tensor(spec: OpSpec, bound: dict[str, Any]) -> torch.Tensor:
    for arg in spec.schema.tensor_args:
        value = bound.get(arg.name)
        if isinstance(value, torch.Tensor):
            return value
        if isinstance(value, (list, tuple)) and value:
            return value[0]
    raise RuntimeError(f"{spec.qualname}: no tensor argument to take the output device from")

"""Binding the (args, kwargs) the dispatcher hands a kernel to the op's argument names."""
from __future__ import annotations

from typing import Any

import torch

from ._dtypes import dtype_name
from ._errors import OpPluginError
from ._spec import OpSpec


def bind(spec: OpSpec, args: tuple, kwargs: dict) -> tuple[tuple, dict, dict[str, Any]]:
    """Fill defaults the dispatcher dropped; return (args, kwargs, name -> value)."""
    args, kwargs = torch._library.utils.fill_defaults(spec.schema.torch_schema, args, kwargs)
    bound = dict(zip((a.name for a in spec.schema.args if not a.kwarg_only), args))
    bound.update(kwargs)
    return args, kwargs, bound


def check_dtypes(spec: OpSpec, bound: dict[str, Any]) -> None:
    """Enforce the YAML `dtypes:` rule with a message that says what is accepted."""
    for name, allowed in spec.dtypes:
        value = bound.get(name)
        tensors = value if isinstance(value, (list, tuple)) else [value]
        for i, tensor in enumerate(tensors):
            if isinstance(tensor, torch.Tensor) and tensor.dtype not in allowed:
                which = f"{name}[{i}]" if isinstance(value, (list, tuple)) else name
                accepted = ", ".join(sorted(dtype_name(d) for d in allowed))
                raise OpPluginError(f"{spec.qualname}: argument '{which}' has dtype {dtype_name(tensor.dtype)}; "
                                    f"accepted: {accepted} (field 'dtypes' at {spec.location.file}:{spec.location.line})")

"""Binding the (args, kwargs) the dispatcher hands a kernel to the op's argument names."""
from __future__ import annotations

from typing import Any

import torch

from .._base.errors import OpPluginError
from .._spec.dtypes import dtype_name
from .._spec.model import OpSpec


def bind(spec: OpSpec, args: tuple, kwargs: dict) -> tuple[tuple, dict, dict[str, Any]]:
    """Fill defaults the caller dropped; return (args, kwargs, name -> value).

    Positional arguments may also arrive by name (TorchAir's auto_functionalized converter passes
    everything as keywords), so each argument is taken from its position, else its name, else
    its default.
    """
    bound: dict[str, Any] = {}
    for i, arg in enumerate(spec.schema.torch_schema.arguments):
        if not arg.kwarg_only and i < len(args):
            bound[arg.name] = args[i]
        elif arg.name in kwargs:
            bound[arg.name] = kwargs[arg.name]
        else:
            bound[arg.name] = arg.default_value
    positional = tuple(bound[a.name] for a in spec.schema.args if not a.kwarg_only)
    keyword = {a.name: bound[a.name] for a in spec.schema.args if a.kwarg_only}
    return positional, keyword, bound


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
                                    f"accepted: {accepted} ({spec.field('dtypes')})")

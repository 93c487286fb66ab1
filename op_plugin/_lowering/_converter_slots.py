"""Replacing TorchAir's converter of one aten op, undoably, and asking what TorchAir's converter is.

TorchAir keeps an op's converter as `op._ge_converter` (a `functools.wraps` wrapper around the
converter function, which therefore is `wrapper.__wrapped__`). `replace_converter` registers ours
through TorchAir's own `register_fx_node_ge_converter` and returns a handle that puts TorchAir's
back (only if ours is still the one in place). `is_not_implemented_stub` tells a converter that
exists from one that only raises NotImplementedError (TorchAir generates such stubs for most aten
ops it does not lower); `torchair_lowers` combines the two. `raw_ge_ops` and `ge_graph` are the
TorchAir modules of GE op builders and graph values that op_plugin's converters build with.
"""
from __future__ import annotations

import ast
import importlib
import inspect
import textwrap
from collections.abc import Callable
from typing import Any

from .._base.handles import RegistrationHandle

_MISSING = object()


def torchair_converter(op: Any) -> Callable | None:
    """TorchAir's converter function of `op` (unwrapped), or None if it has none."""
    wrapper = op.__dict__.get("_ge_converter")
    if wrapper is None:
        return None
    return getattr(wrapper, "__wrapped__", wrapper)


def is_not_implemented_stub(fn: Callable | None) -> bool:
    """True if `fn`'s body is (a docstring and) only `raise NotImplementedError(...)`."""
    if fn is None:
        return False
    try:
        source = textwrap.dedent(inspect.getsource(fn))
    except (OSError, TypeError):
        return False
    tree = ast.parse(source)
    func = tree.body[0]
    if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    body = list(func.body)
    if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant):
        body = body[1:]  # the docstring
    if len(body) != 1 or not isinstance(body[0], ast.Raise) or body[0].exc is None:
        return False
    exc = body[0].exc
    name = exc.func if isinstance(exc, ast.Call) else exc
    return isinstance(name, ast.Name) and name.id == "NotImplementedError"


def replace_converter(torchair: Any, op: Any, fn: Callable, description: str) -> RegistrationHandle:
    """Register `fn` as `op`'s converter on `torchair`; the handle restores what was there before."""
    previous = op.__dict__.get("_ge_converter", _MISSING)
    torchair.register_fx_node_ge_converter(op)(fn)
    ours = op.__dict__.get("_ge_converter")

    def restore():
        if op.__dict__.get("_ge_converter") is not ours:
            return  # a later registration replaced ours: leave it
        if previous is _MISSING:
            op.__dict__.pop("_ge_converter", None)
        else:
            op._ge_converter = previous

    return RegistrationHandle(restore, description)


def raw_ge_ops(torchair: Any) -> Any:
    """TorchAir's GE op builders generated from CANN's REG_OP prototypes (imported when first lowering)."""
    return importlib.import_module(f"{torchair.__name__}._ge_concrete_graph.auto_generated_ge_raw_ops")


def ge_graph(torchair: Any) -> Any:
    """TorchAir's GE graph module (Tensor, Const, Cast, DataType) that converters build with."""
    return importlib.import_module(f"{torchair.__name__}.ge._ge_graph")


def torchair_lowers(op: Any) -> bool:
    """TorchAir has a converter for `op` that does more than raise NotImplementedError."""
    fn = torchair_converter(op)
    return fn is not None and not is_not_implemented_stub(fn)

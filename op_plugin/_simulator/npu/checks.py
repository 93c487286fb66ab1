"""Argument checks shared by the npu ops' CPU reference kernels, and the wrapper ops.py puts around
every kernel so that no error leaves one without the op's name.

Why shared: the families' kernels compute with torch, which broadcasts and reshapes where CANN's
kernels refuse; a mismatch between arguments would otherwise give a result of another shape than the
op's Meta (and an NPU) gives, silently, or an error from deep inside torch naming neither op nor argument."""
from __future__ import annotations

import functools

import torch

from ..interpreter.errors import KernelError


def same_shape(op: str, **tensors: torch.Tensor) -> None:
    """Refuse unless every given tensor (None skipped) has the first one's shape (no broadcasting)."""
    named = [(name, t) for name, t in tensors.items() if t is not None]
    first_name, first = named[0]
    for name, tensor in named[1:]:
        if tuple(tensor.shape) != tuple(first.shape):
            raise ValueError(f"npu::{op}: {name} has shape {tuple(tensor.shape)}, {first_name} {tuple(first.shape)}; "
                             "they must be equal (CANN does not broadcast them)")


def rank(op: str, name: str, tensor: torch.Tensor, *ranks: int) -> None:
    if tensor.dim() not in ranks:
        raise ValueError(f"npu::{op}: {name} must be {' or '.join(map(str, ranks))}-D, got shape {tuple(tensor.shape)}")


def writable(op: str, **tensors: torch.Tensor) -> None:
    """Refuse an in-place target whose elements share memory (an expanded, stride-0 view): a write to one
    element would land in others, so the result would depend on the write order."""
    for name, tensor in tensors.items():
        if tensor is not None and torch._debug_has_internal_overlap(tensor) == 1:  # 1: overlap for sure
            raise ValueError(f"npu::{op}: {name} is written in place but its elements share memory (an expanded "
                             "or stride-0 view); pass a tensor with its own storage (.clone())")


def _describe(args, kwargs) -> str:
    def one(value):
        if isinstance(value, torch.Tensor):
            return f"{value.dtype} {tuple(value.shape)}"
        if isinstance(value, (list, tuple)) and value and all(isinstance(v, torch.Tensor) for v in value):
            return "[" + ", ".join(one(v) for v in value) + "]"
        return repr(value) if not isinstance(value, (list, tuple)) or len(value) < 9 else f"{type(value).__name__}"
    parts = [one(a) for a in args] + [f"{k}={one(v)}" for k, v in kwargs.items()]
    return ", ".join(parts)


def naming_errors(name: str, kernel):
    """`kernel` with every error that does not name the op re-raised (same type where it allows) as
    "npu::<op>: <error> (arguments: dtypes and shapes)": an argument check the kernel lacks still
    ends in an error that says which op refused which call."""
    base = name.split(".")[0]

    @functools.wraps(kernel)
    def checked(*args, **kwargs):
        try:
            return kernel(*args, **kwargs)
        except Exception as error:
            text = str(error)
            if base in text:
                raise
            message = (f"npu::{name}: {type(error).__name__}: {text.splitlines()[0] if text else ''} "
                       f"(the CPU reference kernel refused these arguments: {_describe(args, kwargs)}; "
                       "check them against the op's documented shapes and dtypes)")
            try:
                renamed = type(error)(message)
            except Exception:  # an exception type that takes other arguments
                renamed = RuntimeError(message)
            raise renamed from error
    return checked


def named_refusals(op: str):
    """Decorator: an adapter over a GE kernel re-raises that kernel's refusal (KernelError, which the
    executor names by node) naming the npu op: a case the simulator does not emulate (its message says
    what is not "simulated") as NotImplementedError, any other refusal (an input CANN rejects) as ValueError."""
    def wrap(fn):
        @functools.wraps(fn)
        def kernel(*args, **kwargs):
            try:
                return fn(*args, **kwargs)
            except KernelError as error:
                kind = NotImplementedError if "simulated" in str(error) else ValueError
                raise kind(f"npu::{op}: {error}") from None
        return kernel
    return wrap

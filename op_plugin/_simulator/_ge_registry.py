"""The GE executor's kernel table: op type -> CPU implementation.

A kernel is ``fn(inputs, attrs, node) -> list[torch.Tensor]``:

* ``inputs``: the node's data inputs in GE order, ``None`` for an optional input left unfed;
* ``attrs``: the node's attributes decoded to Python values (``_ge_types.decode_attr``);
* ``node``: the ``OpDef`` itself, for anything else (names, descs);
* returns one tensor per output of the node, in order.

Built-in GE ops are registered by ``_ge_kernels``; custom op types (the YAML ops) are added
with ``register_ge_kernel``, which returns a handle whose ``remove()`` undoes it.
"""

from __future__ import annotations

import threading
from typing import Callable

GeKernel = Callable[[list, dict, object], list]

_lock = threading.Lock()
# op type -> stack of (registration, kernel); the last entry is the active one.
_kernels: dict[str, list] = {}


class KernelRegistration:
    """Handle returned by ``register_ge_kernel``; ``remove()`` restores what was there before."""

    def __init__(self, op_type: str, kernel: GeKernel, builtin: bool):
        self.op_type = op_type
        self.kernel = kernel
        self.builtin = builtin

    def remove(self) -> None:
        with _lock:
            stack = _kernels.get(self.op_type, [])
            stack[:] = [entry for entry in stack if entry[0] is not self]
            if not stack:
                _kernels.pop(self.op_type, None)

    def __repr__(self):
        return f"<GE kernel registration {self.op_type}: {getattr(self.kernel, '__name__', self.kernel)}>"


def register_ge_kernel(op_type: str, kernel: GeKernel, *, replace: bool = False) -> KernelRegistration:
    """Make the GE executor run ``kernel`` for nodes of ``op_type``.

    A type that already has a kernel (built-in or registered) is an error unless
    ``replace=True``; the returned handle's ``remove()`` brings the previous kernel back.
    """
    if not isinstance(op_type, str) or not op_type:
        raise ValueError(f"GE op type must be a non-empty string, got {op_type!r}")
    if not callable(kernel):
        raise TypeError(f"GE kernel for {op_type} must be callable, got {type(kernel).__name__}")
    registration = KernelRegistration(op_type, kernel, builtin=False)
    with _lock:
        stack = _kernels.setdefault(op_type, [])
        if stack and not replace:
            current = stack[-1][0]
            origin = "a built-in kernel" if current.builtin else f"a kernel ({current!r})"
            raise ValueError(
                f"GE op type {op_type!r} already has {origin}; pass replace=True to override it "
                "(the returned handle's remove() restores it)"
            )
        stack.append((registration, kernel))
    return registration


def builtin_kernel(*op_types: str):
    """Decorator used by ``_ge_kernels`` for the built-in GE ops."""

    def decorate(kernel: GeKernel) -> GeKernel:
        with _lock:
            for op_type in op_types:
                stack = _kernels.setdefault(op_type, [])
                stack.insert(0, (KernelRegistration(op_type, kernel, builtin=True), kernel))
        return kernel

    return decorate


def lookup_kernel(op_type: str) -> GeKernel | None:
    with _lock:
        stack = _kernels.get(op_type)
        return stack[-1][1] if stack else None


def supported_op_types() -> list[str]:
    with _lock:
        return sorted(_kernels)


def builtin_op_types() -> list[str]:
    with _lock:
        return sorted(op for op, stack in _kernels.items() if any(reg.builtin for reg, _ in stack))

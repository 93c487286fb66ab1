"""The GE interpreter's kernel table: op type -> the CPU function that computes it.

A kernel is written against its op's `REG_OP` prototype, as ONNX's reference evaluator binds
`OpRun._run` to the op schema::

    @ge_kernel("LayerNormV4", widen=True)
    def layer_norm_v4(x, normalized_shape, gamma, beta, *, epsilon):
        ...
        return y, mean, rstd

* positional parameters are the prototype's inputs, by name and in order: a dynamic input arrives
  as a list, an optional input left unfed as None;
* keyword-only parameters are its attrs, without defaults: the value on the node, else CANN's
  default from the prototype (`op_plugin._ge.reg_op`), never a copy written by hand. An attr that
  cannot change the numbers on the CPU (a layout hint) is named in `layout_only` with the reason
  instead; a keyword parameter `node` receives the `OpDef` (for input layouts);
* it returns one tensor, or a tuple with one tensor per output.

A kernel whose choices depend only on its attrs and its inputs' dtypes and shapes makes them once
per input signature with `prepared=True` (`prepared`): the decorated function is its prepare phase.

Binding happens once per node, when a plan is built (`binding.bind`), so a call costs nothing extra.
`tests/simulator/kernels/test_signatures.py` checks every kernel's signature against its prototype.

Cross-cutting dtype rules are declared, not hand-written in every kernel (as torch._refs'
`elementwise_type_promotion_wrapper`): `one_dtype` (named inputs share a dtype: GE does not
promote), `accepts` (input name -> dtypes the prototype takes), `widen` (16-bit float inputs are
computed in float32 and float outputs cast back to the first input's dtype, as the NPU kernels do).

Layout, declared for the executor's sake (`executor/strided.py`): `strided_inputs` names the inputs a
built-in kernel may be handed as a strided view (a transpose not copied) because it computes the same
bits on it as on a dense copy and still returns dense outputs; `strided_view` is a kernel's form returning
such a view instead of a dense copy (Transpose's `permute` without `contiguous`). A user's kernel has
neither: it always gets dense tensors, as on an NPU.

Custom op types (the YAML ops) are added with `register_ge_kernel`, whose handle's `destroy()`
undoes it; their kernels may take `**named` inputs and attrs instead of a fixed signature.
"""
from __future__ import annotations

import inspect
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

import torch

from ..._base.handles import RegistrationHandle
from ..._ge.ir import IrPrototype
from .errors import KernelError, refuse  # noqa: F401  (kernels import them from here)
from .prepared import InputSpec, prepared_kernel  # noqa: F401  (idem)


@dataclass(frozen=True)
class DtypeRules:
    one_dtype: tuple[str, ...] = ()
    accepts: tuple[tuple[str, tuple[torch.dtype, ...]], ...] = ()
    widen: bool = False

    def __bool__(self):
        return bool(self.one_dtype or self.accepts or self.widen)


@dataclass(frozen=True, eq=False)
class KernelEntry:
    """One kernel registered for one GE op type."""

    op_type: str
    fn: Callable
    builtin: bool
    prototype: IrPrototype | None = None  # given for custom types; else CANN's built-in one
    layout_only: tuple[tuple[str, str], ...] = ()  # (attr, why it cannot change the CPU result)
    rules: DtypeRules = field(default_factory=DtypeRules)
    strided_inputs: tuple[str, ...] = ()  # inputs it computes the same bits on as strided views (module doc)
    strided_view: Callable | None = None  # its form returning a strided view instead of a dense copy

    def __repr__(self):
        origin = "built-in kernel" if self.builtin else "kernel"
        return f"<GE {origin} {self.op_type}: {getattr(self.fn, '__name__', self.fn)}>"


_lock = threading.Lock()
# op type -> stack of entries; the last one is active, removing it brings the previous one back.
_kernels: dict[str, list[KernelEntry]] = {}


def _check_callable(op_type, fn):
    if not isinstance(op_type, str) or not op_type:
        raise ValueError(f"GE op type must be a non-empty string, got {op_type!r}")
    if not callable(fn):
        raise TypeError(f"GE kernel for {op_type} must be callable, got {type(fn).__name__}")
    inspect.signature(fn)  # a callable without a signature cannot be bound


def register_ge_kernel(op_type: str, kernel: Callable, *, replace: bool = False,
                       prototype: IrPrototype | None = None) -> RegistrationHandle:
    """Make the GE interpreter run `kernel` for nodes of `op_type`.

    `kernel` is bound like a built-in one (see the module doc) against `prototype`, or against
    CANN's prototype of `op_type`; with neither, its positional parameters take the node's inputs in
    order. A type that already has a kernel is an error unless `replace=True`; the returned handle's
    `destroy()` brings the previous kernel back.
    """
    _check_callable(op_type, kernel)
    if prototype is not None and not isinstance(prototype, IrPrototype):
        raise TypeError(f"prototype for {op_type} must be an IrPrototype, got {type(prototype).__name__}")
    entry = KernelEntry(op_type, kernel, builtin=False, prototype=prototype)
    with _lock:
        stack = _kernels.setdefault(op_type, [])
        if stack and not replace:
            current = stack[-1]
            origin = "a built-in kernel" if current.builtin else f"a kernel ({current!r})"
            raise ValueError(f"GE op type {op_type!r} already has {origin}; pass replace=True to override it "
                             "(the returned handle's destroy() restores it)")
        stack.append(entry)
    return RegistrationHandle(lambda: _remove(entry), repr(entry))


def _remove(entry: KernelEntry) -> None:
    with _lock:
        stack = _kernels.get(entry.op_type, [])
        stack[:] = [e for e in stack if e is not entry]
        if not stack:
            _kernels.pop(entry.op_type, None)


def _add_builtin(entry: KernelEntry) -> None:
    with _lock:
        stack = _kernels.setdefault(entry.op_type, [])
        if any(e.builtin for e in stack):
            raise ValueError(f"GE op type {entry.op_type!r} has two built-in kernels: {stack[0]!r} and {entry!r}")
        stack.insert(0, entry)


def ge_kernel(*op_types: str, layout_only: Mapping[str, str] | None = None, one_dtype: Iterable[str] = (),
              accepts: Mapping[str, Iterable[torch.dtype]] | None = None, widen: bool = False,
              prototype: IrPrototype | None = None, prepared: bool = False, strided_inputs: Iterable[str] = (),
              strided_view: Callable | None = None):
    """Register the decorated function as the built-in kernel of each of `op_types` (see the module doc).

    prototype: only for a type CANN's prototype table does not name (say where it comes from).
    prepared: the function is the kernel's prepare phase (`prepared`): it takes an InputSpec per
    input and returns the call; the decorator returns (and registers) the kernel that prepares and calls.
    strided_inputs, strided_view: see the module doc (`strided_view` has the kernel's signature, and is a
    prepare phase too when `prepared`).
    """
    rules = DtypeRules(tuple(one_dtype), tuple((name, tuple(d)) for name, d in (accepts or {}).items()), widen)
    layout = tuple(sorted((layout_only or {}).items()))

    def decorate(fn: Callable) -> Callable:
        kernel = prepared_kernel(fn) if prepared else fn
        view = prepared_kernel(strided_view) if prepared and strided_view is not None else strided_view
        for op_type in op_types:
            _check_callable(op_type, kernel)
            _add_builtin(KernelEntry(op_type, kernel, builtin=True, prototype=prototype, layout_only=layout,
                                     rules=rules, strided_inputs=tuple(strided_inputs), strided_view=view))
        return kernel

    return decorate


def lookup_kernel(op_type: str) -> KernelEntry | None:
    """The active kernel of `op_type`, or None. (A node binds it with `binding.bind`; `calls.ge_op`
    calls it directly.)"""
    with _lock:
        stack = _kernels.get(op_type)
        return stack[-1] if stack else None


def supported_op_types() -> list[str]:
    with _lock:
        return sorted(_kernels)


def builtin_entries() -> dict[str, KernelEntry]:
    """GE op type -> its built-in kernel entry, sorted by type."""
    with _lock:
        return {op_type: next(e for e in stack if e.builtin)
                for op_type, stack in sorted(_kernels.items()) if any(e.builtin for e in stack)}


def builtin_kernels() -> dict[str, Callable]:
    """GE op type -> its built-in kernel function, sorted by type."""
    return {op_type: entry.fn for op_type, entry in builtin_entries().items()}


def builtin_layout_only_attrs(op_type: str) -> dict[str, str]:
    """The attrs the built-in kernel of `op_type` declares layout-only, with the reasons."""
    entry = builtin_entries().get(op_type)
    return dict(entry.layout_only) if entry else {}


def builtin_op_types() -> list[str]:
    return list(builtin_entries())

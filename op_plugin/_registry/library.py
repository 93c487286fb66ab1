"""Registers validated specs with torch.library, all of a file's ops or none.

Per op:
- the schema (`Library.define`), tagged `inplace` when it mutates and returns its first argument
  so torch.compile functionalizes it with auto_functionalized;
- the eager kernel at CompositeExplicitAutograd: it runs on every device and, unlike a
  CompositeImplicitAutograd kernel, is never decomposed by tracing, so the op stays whole in graphs;
- for an op with `aclnn:`, its NPU kernel at PrivateUse1 (`aclnn_kernel`), ahead of the reference;
- the fake/Meta function (`torch.library.register_fake`), generated from `outputs:` or user-given;
- autograd (`torch.library.register_autograd`) for functional ops; for in-place ops a kernel that
  bumps the version counter of mutated tensors and refuses to run when a gradient is required.

Kernels look their Python pieces up in the registry at call time, so decorators may come later.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from .._base.errors import MissingBackwardError, MissingImplementationError, NoBackwardError
from .._base.handles import RegistrationHandle
from .._spec.model import OpSpec
from .aclnn_kernel import aclnn_kernel
from .binding import bind, check_dtypes
from .meta import generated_meta
from .op_state import state


def register_library(specs: tuple[OpSpec, ...]) -> RegistrationHandle:
    """Register one YAML file's ops in one torch.library fragment; the handle destroys it.

    A failure part-way destroys the fragment before raising, so nothing of the file stays.
    """
    lib = torch.library.Library(specs[0].namespace, "FRAGMENT")
    try:
        for spec in specs:
            _register_op(lib, spec)
    except Exception:
        lib._destroy()
        raise
    return RegistrationHandle(lib._destroy, f"torch.library fragment of {', '.join(s.qualname for s in specs)}")


def op_overload(spec: OpSpec) -> torch._ops.OpOverload:
    """The registered `torch.ops.<namespace>.<name>.<overload>` of a loaded op."""
    packet = getattr(getattr(torch.ops, spec.namespace), spec.name)
    return getattr(packet, spec.schema.overload or "default")


def exists_in_dispatcher(spec: OpSpec) -> bool:
    try:
        torch._C._dispatch_find_schema_or_throw(f"{spec.namespace}::{spec.name}", spec.schema.overload)
        return True
    except RuntimeError:
        return False


def _register_op(lib: torch.library.Library, spec: OpSpec) -> None:
    schema = spec.schema
    tags = (torch.Tag.inplace,) if any(r.alias_set for r in schema.returns) else ()
    lib.define(schema.text, tags=tags)
    overload_name = spec.overload_name
    eager = _eager_kernel(spec)
    lib.impl(overload_name, eager, "CompositeExplicitAutograd")
    if spec.aclnn is not None:  # NPU tensors run the op's aclnn kernel (the reference only on the virtual NPU)
        lib.impl(overload_name, aclnn_kernel(spec, eager), "PrivateUse1")
    torch.library.register_fake(spec.qualname, _fake_kernel(spec), lib=lib)
    if schema.is_mutable:
        lib.impl(overload_name, _inplace_autograd_kernel(spec), "Autograd", with_keyset=True)
        lib.impl(overload_name, _version_bump_kernel(spec), "ADInplaceOrView", with_keyset=True)
    elif not torch._library.utils.has_kwarg_only_tensors(schema.torch_schema):
        setup, backward = _autograd_wrappers(spec)
        torch.library.register_autograd(spec.qualname, backward, setup_context=setup, lib=lib)


def _missing(spec: OpSpec, what: str, how: str) -> MissingImplementationError:
    error = MissingBackwardError if what == "backward" else MissingImplementationError
    return error(f"{spec.location}: {spec.qualname} has no {what}; {how}")


def _eager_kernel(spec: OpSpec) -> Callable:
    st = state(spec.qualname)

    def kernel(*args, **kwargs):
        if st.reference is None:
            raise _missing(spec, "reference kernel", f"define one with @op_plugin.reference('{spec.qualname}')")
        args, kwargs, bound = bind(spec, args, kwargs)
        check_dtypes(spec, bound)
        return st.reference(*args, **kwargs)

    kernel.__name__ = f"{spec.name}_reference_kernel"
    return kernel


def _fake_kernel(spec: OpSpec) -> Callable:
    st = state(spec.qualname)

    def fake(*args, **kwargs):
        args, kwargs, bound = bind(spec, args, kwargs)
        check_dtypes(spec, bound)
        if st.meta is not None:
            return st.meta(*args, **kwargs)
        if spec.outputs is None:
            raise _missing(spec, "Meta function (field 'outputs')",
                           f"add `outputs:` to the YAML entry, a module in meta/ (op_plugin.meta_functions), or "
                           f"@op_plugin.meta('{spec.qualname}')")
        return generated_meta(spec, bound)

    fake.__name__ = f"{spec.name}_meta"
    return fake


def _autograd_wrappers(spec: OpSpec) -> tuple[Callable, Callable]:
    st = state(spec.qualname)

    def setup_context(ctx, inputs, output, keyword_only_inputs=None):
        if st.setup_context is None:
            return
        if keyword_only_inputs is None:
            st.setup_context(ctx=ctx, inputs=inputs, output=output)
        else:
            st.setup_context(ctx=ctx, inputs=inputs, keyword_only_inputs=keyword_only_inputs, output=output)

    def backward(ctx, *grads):
        if st.backward is None:
            raise _missing(spec, "backward", f"define one with @op_plugin.backward('{spec.qualname}') "
                           "(and @op_plugin.setup_context to save inputs), or run under torch.no_grad()")
        return st.backward(ctx, *grads)

    if any(a.kwarg_only for a in spec.schema.args):
        return setup_context, backward

    def positional_setup_context(ctx, inputs, output):
        setup_context(ctx, inputs, output)

    return positional_setup_context, backward


def _inplace_autograd_kernel(spec: OpSpec) -> Callable:
    def kernel(keyset, *args, **kwargs):
        if torch.is_grad_enabled() and any(
            isinstance(t, torch.Tensor) and t.requires_grad
            for t in torch.utils._pytree.tree_leaves((args, kwargs))
        ):
            raise NoBackwardError(f"{spec.qualname} is an in-place op and has no gradient; call it under "
                                "torch.no_grad() or on tensors that do not require grad")
        with torch._C._AutoDispatchBelowAutograd():
            return _redispatch(spec, keyset & torch._C._after_autograd_keyset, args, kwargs)

    return kernel


def _version_bump_kernel(spec: OpSpec) -> Callable:
    mutated = [a.name for a in spec.schema.args if a.mutated]

    def kernel(keyset, *args, **kwargs):
        bound = bind(spec, args, kwargs)[2]
        for name in mutated:
            torch.autograd.graph.increment_version(bound[name])
        return _redispatch(spec, keyset & torch._C._after_ADInplaceOrView_keyset, args, kwargs)

    return kernel


def _redispatch(spec: OpSpec, keyset: Any, args: tuple, kwargs: dict) -> Any:
    return op_overload(spec).redispatch(keyset, *args, **kwargs)

"""Oracles for `op-plugin test` that are not the code under test: a user's second implementation of
an op (`@op_plugin.testing.oracle`) and golden values (`@op_plugin.testing.golden`).

Why: for a custom GE type (a type CANN does not ship) the simulator runs the op's own reference
kernel, so npugraph == eager compares that kernel with itself and proves only that the lowering
(inputs, attrs, outputs of the GE node) is consistent. A wrong formula passes it. An independent
implementation (a loop, plain torch written another way, a formula from the kernel's design doc)
or expected values taken elsewhere (an NPU run, a paper's table) are what check the numbers.

    @op_plugin.testing.oracle("npu_rope")          # same arguments as the op, returns the same
    def rope_by_loop(x, cos, sin): ...

    @op_plugin.testing.golden("npu_rope")          # cases with their expected outputs
    def rope_golden():
        return [((x, cos, sin), {}, expected), ...]   # (args, expected) works too
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch._dynamo  # reset() below may run before any torch.compile has imported it

from ... import _registry
from ..._base.errors import OpPluginError
from ..._registry.library import op_overload
from ..._spec.model import OpSpec
from .samples import SampleCase, assert_results_close, clone_tree

_ORACLES: dict[str, Callable] = {}
_GOLDEN: dict[str, Callable] = {}


class CheckSkipped(Exception):
    """The check does not apply to this case (reason in the message)."""


def _registrar(table: dict[str, Callable], what: str) -> Callable:
    def decorator_factory(op_name: str) -> Callable[[Callable], Callable]:
        qualname = _registry.qualify(op_name)

        def decorate(fn: Callable) -> Callable:
            if not callable(fn):
                raise OpPluginError(f"@op_plugin.testing.{what}('{op_name}') must decorate a function, got {fn!r}")
            existing = table.get(qualname)
            if existing is not None and existing is not fn:
                raise OpPluginError(f"{qualname} already has a {what} ({_describe(existing)}); remove one of the "
                                    f"two @op_plugin.testing.{what} definitions")
            table[qualname] = fn
            return fn

        return decorate

    decorator_factory.__name__ = what
    return decorator_factory


oracle = _registrar(_ORACLES, "oracle")
oracle.__doc__ = """Register a second, independent implementation of a YAML op for `op-plugin test`.

It takes the op's arguments (schema order, as the reference kernel does) and returns what the op
returns. The "oracle" check compares both the eager op (the reference kernel) and the npugraph
result with it on every sample. Write it differently from the reference kernel (a loop index by
index, another formula), or it checks nothing."""

golden = _registrar(_GOLDEN, "golden")
golden.__doc__ = """Register golden values of a YAML op for `op-plugin test`: a function returning a list of
`(args, kwargs, expected)` or `(args, expected)`, where `expected` is what the op must return
(a tensor, or a tuple for several outputs), taken from somewhere other than the reference kernel
(an NPU run saved with torch.save, a worked example). Each case becomes a row `<op>-golden<i>`:
eager and npugraph must both give `expected` within the dtype's tolerance."""


def forget(op_name: str) -> None:
    """Drop the oracle and golden values of an op (tests, interactive re-definition)."""
    qualname = _registry.qualify(op_name)
    _ORACLES.pop(qualname, None)
    _GOLDEN.pop(qualname, None)


def has_oracle(qualname: str) -> bool:
    return qualname in _ORACLES or qualname in _GOLDEN


def _describe(fn: Callable) -> str:
    code = getattr(fn, "__code__", None)
    return f"{getattr(fn, '__qualname__', fn)}" + (f" at {code.co_filename}:{code.co_firstlineno}" if code else "")


@dataclass(frozen=True)
class GoldenCase:
    """One golden case of an op: fixed inputs and the outputs they must give."""

    spec: OpSpec
    index: int
    args: tuple
    kwargs: dict
    expected: Any

    @property
    def id(self) -> str:
        return f"{self.spec.name}-golden{self.index}"

    @property
    def op(self) -> torch._ops.OpOverload:
        return op_overload(self.spec)


def golden_cases(spec: OpSpec) -> list[GoldenCase]:
    """The op's golden cases, each checked for its form; a malformed entry is an error naming it."""
    fn = _GOLDEN.get(spec.qualname)
    if fn is None:
        return []
    cases = []
    for index, entry in enumerate(fn()):
        if isinstance(entry, tuple) and len(entry) == 2:
            args, expected = entry
            kwargs = {}
        elif isinstance(entry, tuple) and len(entry) == 3:
            args, kwargs, expected = entry
        else:
            raise OpPluginError(f"{spec.qualname}: golden case {index} of {_describe(fn)} must be (args, expected) "
                                f"or (args, kwargs, expected), got {type(entry).__name__}")
        if not isinstance(args, (tuple, list)) or not isinstance(kwargs, dict):
            raise OpPluginError(f"{spec.qualname}: golden case {index} of {_describe(fn)}: args must be a tuple "
                                "and kwargs a dict")
        cases.append(GoldenCase(spec, index, tuple(args), dict(kwargs), expected))
    return cases


def _compiled(op, *, dynamic: bool = False):
    torch._dynamo.reset()
    return torch.compile(lambda *a, **k: op(*a, **k), backend="npugraph", fullgraph=True, dynamic=dynamic)


def _has_ge_lowering(spec: OpSpec) -> bool:
    st = _registry.find(spec.qualname)
    return spec.ge is not None or (st is not None and st.converter is not None)


def _agree(what: str, got: Any, want: Any) -> None:
    try:
        assert_results_close(got, want)
    except AssertionError as exc:
        raise AssertionError(f"{what}: {exc}") from None


def check_oracle(case: SampleCase) -> str:
    """The eager op (its reference kernel) and its npugraph result agree with the user's oracle."""
    fn = _ORACLES.get(case.spec.qualname)
    if fn is None:
        raise CheckSkipped(custom_type_note(case.spec) or "no @op_plugin.testing.oracle")
    args, kwargs = case.inputs(seed=11)
    with torch.no_grad():
        want_args, want_kwargs = clone_tree((args, kwargs))
        want = fn(*want_args, **want_kwargs)
        eager_args, eager_kwargs = clone_tree((args, kwargs))
        _agree("the reference kernel departs from the oracle", case.op(*eager_args, **eager_kwargs), want)
        _agree("the reference kernel mutates its arguments unlike the oracle", (eager_args, eager_kwargs),
               (want_args, want_kwargs))
        if not _has_ge_lowering(case.spec):
            return "eager agrees with the oracle (no GE lowering)"
        got_args, got_kwargs = clone_tree((args, kwargs))
        _agree("npugraph departs from the oracle", _compiled(case.op)(*got_args, **got_kwargs), want)
    return "eager and npugraph agree with the oracle"


def check_golden(case) -> str:
    """Eager and npugraph give the golden case's expected outputs."""
    if not isinstance(case, GoldenCase):
        raise CheckSkipped("golden values are checked as their own cases (<op>-golden<i>)")
    with torch.no_grad():
        args, kwargs = clone_tree((case.args, case.kwargs))
        _agree("eager departs from the golden values", case.op(*args, **kwargs), case.expected)
        if not _has_ge_lowering(case.spec):
            return "eager gives the golden values (no GE lowering)"
        args, kwargs = clone_tree((case.args, case.kwargs))
        _agree("npugraph departs from the golden values", _compiled(case.op)(*args, **kwargs), case.expected)
    return "eager and npugraph give the golden values"


def custom_type_note(spec: OpSpec) -> str | None:
    """What npugraph == eager proves for an op lowered to a custom GE type on a CPU host, or None
    for an op whose GE type is a CANN built-in (the simulator runs CANN's semantics for it)."""
    if spec.ge is None or has_oracle(spec.qualname) or _is_builtin(spec.ge.type):
        return None
    return (f"{spec.ge.type} is a custom GE type: on a CPU host the simulator runs this op's reference kernel for it, "
            "so npugraph == eager checks the lowering (inputs, attrs, outputs), not the formula; give "
            f"@op_plugin.testing.oracle('{spec.name}') (a second implementation) or "
            f"@op_plugin.testing.golden('{spec.name}') (expected values)")


def _is_builtin(ge_type: str) -> bool:
    from ..._ge.builtin_prototypes import builtin_prototype

    try:
        return builtin_prototype(ge_type) is not None
    except OSError:  # no unpacked wheel: nothing runs on the simulator either
        return False

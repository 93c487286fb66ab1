"""Hostile input to the npu ops with CPU reference kernels (ops.COVERED), eager: every call ends, within a
hang guard and a cap on new address space, either in an error naming the op, or in a result that is right.

Right means: for the same values in unusual storage (non-contiguous, expanded stride-0) the result equals
the call on contiguous copies; for any other variant the call succeeded, so its outputs must have the
shapes and dtypes the op's Meta function (the wheel's, what an NPU host traces) gives for the same call,
never a silently different result. Variants come from one valid call per op (_npu_hostile_calls.VALID):
wrong dtypes, ranks, mismatched shapes, empty dims, NaN/Inf, out-of-range index values, huge or negative
int arguments; hypothesis picks among them and draws arbitrary integers for int arguments and index values."""
from __future__ import annotations

import logging

import pytest
import torch
from hypothesis import HealthCheck, given, settings, strategies as st
from torch._subclasses.fake_tensor import FakeTensorMode

from tests.simulator._npu_hostile_calls import NEEDS_PROCESS_GROUP, VALID
from tests.simulator._npu_hostile_mutations import (HUGE, Hang, bounded, contiguous_copy, int_arguments, replace_int,
                                                    variants)
from op_plugin._simulator.npu import ops

pytestmark = pytest.mark.usefixtures("torchair")
FEW = settings(max_examples=12, deadline=None, database=None, derandomize=True,
               suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
ALLOCATION_FAILURES = ("can't allocate memory", "not enough memory", "std::bad_alloc", "MemoryError")


def test_every_covered_op_has_a_valid_seed_call():
    assert set(VALID) | set(NEEDS_PROCESS_GROUP) == set(ops.COVERED)


def _int_places(name, args, kwargs):
    """int_arguments of the call, plus the schema's int arguments the call leaves at their defaults."""
    schema = ops.overload_of(name)._schema
    given = {a.name for a in schema.arguments[:len(args)]} | set(kwargs)
    text = str(schema)
    # ScalarType arguments are ints to the JIT type system, but an int that is not a ScalarType number
    # crashes torch's own call path (torch.ops.aten.to.dtype(x, 2487) too) before any kernel runs
    dtypes = {a.name for a in schema.arguments if f"ScalarType {a.name}" in text or f"ScalarType? {a.name}" in text}
    defaults = [("scalar", True, a.name, None) for a in schema.arguments
                if a.name not in given | dtypes and str(a.type) in ("int", "Optional[int]", "SymInt")]
    return int_arguments(args, kwargs) + defaults


def _outputs(value):
    return list(value) if isinstance(value, (list, tuple)) else [value]


def _fake(mode, value):
    if isinstance(value, torch.Tensor):
        return mode.from_tensor(value)
    if isinstance(value, list) and value and isinstance(value[0], torch.Tensor):
        return [mode.from_tensor(v) for v in value]
    return value


def _meta(op, args, kwargs):
    """The op's Meta on fake copies: its outputs, or the exception it raises."""
    quiet = logging.getLogger("torch._subclasses.fake_tensor")
    level, quiet.level = quiet.level, logging.CRITICAL  # a refusing Meta is logged as an error by FakeTensor
    try:
        with FakeTensorMode(allow_non_fake_inputs=True) as mode:
            return op(*[_fake(mode, a) for a in args], **{k: _fake(mode, v) for k, v in kwargs.items()})
    except Exception as error:  # the Meta refuses (or is itself broken): the CPU kernel must refuse too
        return error
    finally:
        quiet.setLevel(level)


def _call(name, args, kwargs):
    """(outputs, None) or (None, the exception), bounded; a hang or an allocation past the cap fails the test."""
    try:
        with bounded():
            return ops.overload_of(name)(*args, **kwargs), None
    except Hang as error:
        pytest.fail(f"{name}: no answer within the hang guard: {error}")
    except MemoryError as error:
        pytest.fail(f"{name}: allocated past the cap instead of refusing: {error}")
    except Exception as error:  # judged by the caller
        return None, error


def check_refusal(name, label, error):
    text = f"{type(error).__name__}: {error}"
    assert not any(s in text for s in ALLOCATION_FAILURES), f"{name} [{label}] allocated past the cap: {text[:300]}"
    assert name.split(".")[0] in str(error), f"{name} [{label}]: the error does not name the op: {text[:300]}"


def check_variant(name, label, kind, args, kwargs):
    op = ops.overload_of(name)
    if kind.startswith("same"):
        copies_args, copies_kwargs = contiguous_copy(args), contiguous_copy(kwargs)
        want, refused = _call(name, copies_args, copies_kwargs)
        got, error = _call(name, args, kwargs)
        if refused is not None:  # the values themselves are invalid (an expanded index repeats): refused too
            assert error is not None, f"{name} [{label}]: accepted what the contiguous call refuses: {refused}"
            return check_refusal(name, label, error)
        if error is not None and kind == "same-expanded":  # a stride-0 view may be refused, by name
            return check_refusal(name, label, error)
        assert error is None, f"{name} [{label}]: refused same values in other storage: {error}"
        pairs = [("output", g, w) for g, w in zip(_outputs(got), _outputs(want), strict=True)]
        pairs += [("argument (in-place write)", g, w) for g, w in zip(args, copies_args, strict=True)]
        for what, g, w in pairs:
            if isinstance(g, torch.Tensor):
                torch.testing.assert_close(g, w, equal_nan=True, msg=f"{name} [{label}]: an {what} differs")
        return None
    got, error = _call(name, args, kwargs)
    if error is not None:
        return check_refusal(name, label, error)
    meta = _meta(op, args, kwargs)
    assert not isinstance(meta, Exception), (
        f"{name} [{label}]: the CPU kernel returned a result for a call the op's Meta refuses ({meta!r:.200})")
    for index, (g, m) in enumerate(zip(_outputs(got), _outputs(meta), strict=True)):
        if isinstance(g, torch.Tensor):
            assert (tuple(g.shape), g.dtype) == (tuple(m.shape), m.dtype), (
                f"{name} [{label}] output {index}: {tuple(g.shape)} {g.dtype}, the Meta gives {tuple(m.shape)} "
                f"{m.dtype}: a silently different result")
    return None


@pytest.mark.parametrize("name", sorted(VALID))
def test_every_hostile_variant_is_refused_by_name_or_right(name):
    """Each variant of each tensor argument (a few dozen per op, cheap): all of them, so a check a kernel
    loses is found whatever hypothesis would have drawn."""
    torch.manual_seed(0)
    args, kwargs = VALID[name]()
    for label, kind, new_args, new_kwargs in variants(args, kwargs):
        check_variant(name, label, kind, new_args, new_kwargs)


@pytest.mark.parametrize("name", sorted(VALID))
@FEW
@given(data=st.data())
def test_two_hostile_changes_at_once(name, data):
    """Two variants applied together (e.g. a float64 cache and an out-of-range slot), from random values."""
    torch.manual_seed(data.draw(st.integers(0, 2 ** 16), label="seed"))
    args, kwargs = VALID[name]()
    options = variants(args, kwargs)
    first, second = data.draw(st.lists(st.sampled_from(options), min_size=2, max_size=2), label="variants")
    combined_args = [b if b is not a else f for a, f, b in zip(args, first[2], second[2], strict=True)]
    combined_kwargs = {k: (second[3][k] if second[3][k] is not v else first[3][k]) for k, v in kwargs.items()}
    check_variant(name, f"{first[0]} + {second[0]}", "hostile", combined_args, combined_kwargs)


@pytest.mark.parametrize("name", sorted(VALID))
@FEW
@given(data=st.data())
def test_arbitrary_integers_are_refused_by_name_or_right(name, data):
    """Any value in any int argument or element of an index tensor: sizes, lengths, block ids, group sizes, k."""
    torch.manual_seed(0)
    args, kwargs = VALID[name]()
    places = _int_places(name, args, kwargs)
    if not places:
        pytest.skip(f"{name} takes no integer argument")
    where = data.draw(st.sampled_from(places), label="argument")
    value = data.draw(st.one_of(st.integers(-4, 16), st.integers(-2 ** 63, 2 ** 63 - 1)), label="value")
    label, new_args, new_kwargs = replace_int(args, kwargs, where, value)
    if new_args is None:
        return  # the value does not fit the index tensor's dtype
    check_variant(name, label, "hostile", new_args, new_kwargs)


@pytest.mark.parametrize("name", sorted(VALID))
def test_huge_int_arguments_are_refused_before_allocating(name):
    """2**40 in each int argument (scalars and list elements): refused or harmless, never an allocation."""
    args, kwargs = VALID[name]()
    scalars = [where for where in _int_places(name, args, kwargs) if where[0] == "scalar"]
    if not scalars:
        pytest.skip(f"{name} takes no int argument")
    for where in scalars:
        label, new_args, new_kwargs = replace_int(args, kwargs, where, HUGE)
        check_variant(name, label, "hostile", new_args, new_kwargs)

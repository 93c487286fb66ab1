"""Every shipped backward formula against an oracle that is not itself: autograd through the op's
reference kernel (plain differentiable torch code), with a random cotangent on every floating
output, so a gradient through any output (rstd of the RMS norms included) is checked. Every sample
runs in float32: the formulas are compared, not half-precision rounding."""
from __future__ import annotations

import pytest

from op_plugin import _registry, testing
from op_plugin.testing import sample_cases


def _differentiable(case) -> bool:
    st = _registry.find(case.spec.qualname)
    return case.spec.differentiable and st.backward is not None


def test_every_backward_has_a_case():
    ops = {c.spec.qualname for c in sample_cases() if _differentiable(c)}
    with_backward = {st.qualname for st in _registry.loaded() if st.backward is not None and st.spec.differentiable}
    assert ops == with_backward


def test_backward_matches_autograd_through_the_reference(case):
    """The same check `op-plugin test` runs on a user's ops (op_plugin/_tools/user_tests/checks.py)."""
    try:
        testing.CHECKS["backward"](case)
    except testing.CheckSkipped as why:
        pytest.skip(f"{case.id}: {why}")

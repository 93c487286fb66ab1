"""Inputs for an op built from its YAML `samples:`, for tests, demos and benchmarks.

    from op_plugin import testing
    for case in testing.sample_cases("npu::npu_custom_linear"):
        args, kwargs = case.inputs()                  # sizes from `dims:`
        args, kwargs = case.inputs(case.variants()[2])  # the same sample at other sizes

`variants()` gives size assignments for the named `dims:` that differ from each other and from the
sample's fixed sizes, and are never 0 or 1, so torch.compile(dynamic=True) sees genuinely new
shapes without specialising or duck-sizing two dims into one.

Checks of a user's own ops, for their pytest suite (the same as `op-plugin test FILE.yaml`):

    from op_plugin import testing
    def test_my_ops():
        testing.check_yaml_ops("my_ops.yaml", python=["my_ops_kernels"])  # AssertionError lists failures

    @pytest.mark.parametrize("case", testing.yaml_cases("my_ops.yaml"), ids=lambda c: c.id)
    @pytest.mark.parametrize("check", list(testing.CHECKS))
    def test_each(case, check):
        testing.CHECKS[check](case)   # raises AssertionError / testing.CheckSkipped

Oracles that are not the code under test, for an op lowered to a custom GE type (on a CPU host the
simulator runs its reference kernel, so npugraph == eager does not check the formula):

    @testing.oracle("npu_my_rope")                # a second implementation, written differently
    def rope_loop(x, cos, sin): ...

    @testing.golden("npu_my_rope")                # expected values, e.g. saved from an NPU run
    def rope_golden():
        return [((x, cos, sin), {}, expected)]

The implementation lives in `op_plugin._tools` (samples, user_checks, user_tests) so that the
`op-plugin` command can use it too; this module is the public face.
"""

from __future__ import annotations

from pathlib import Path

from ._tools.user_tests.counting_backend import CountingNpugraph
from ._tools.user_tests.oracles import GoldenCase, golden, oracle
from ._tools.user_tests.samples import SampleCase, assert_results_close, clone_tree, sample_cases
from ._tools._shared.tolerances import tolerances
from ._tools.user_tests.checks import CHECKS, CheckSkipped, specialised_sizes
from ._tools.user_tests.runner import failure_text, run_yaml_checks, summary_table, yaml_cases

__all__ = ["CHECKS", "CheckSkipped", "CountingNpugraph", "GoldenCase", "SampleCase", "assert_results_close",
           "check_yaml_ops", "clone_tree", "golden", "oracle", "sample_cases", "specialised_sizes", "tolerances",
           "yaml_cases"]


def check_yaml_ops(path: str | Path, python=(), checks=None, ops=None, no_grad: bool = False) -> list:
    """Run every check (opcheck, Meta vs reference, symbolic sizes, npugraph static and dynamic,
    backward, and oracle/golden when given) on every op x sample of the YAML file; raise
    AssertionError with the summary table and each failure when any fails. Returns the outcomes."""
    outcomes = run_yaml_checks(path, python, checks, ops, no_grad=no_grad)
    if any(o.failed for o in outcomes):
        raise AssertionError(f"{summary_table(outcomes)}\n{failure_text(outcomes)}")
    return outcomes

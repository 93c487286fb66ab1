import os

# torch turns a custom op that aliases its inputs into an error when the CI variable is set (a warning
# otherwise); every run of these tests, and the rank processes they start, checks as CI does.
os.environ["TORCHINDUCTOR_ERROR_ON_CUSTOM_OP_ALIASING"] = "1"

import pytest
import torch

import op_plugin  # noqa: F401  (registers the shipped ops)
from op_plugin.testing import sample_cases

torch._functorch.config.error_on_custom_op_aliasing = True

SHIPPED_CASES = sample_cases()


def pytest_generate_tests(metafunc):
    """Any test that takes `case` runs once per shipped op x YAML sample."""
    if "case" in metafunc.fixturenames:
        metafunc.parametrize("case", SHIPPED_CASES, ids=[c.id for c in SHIPPED_CASES])


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()

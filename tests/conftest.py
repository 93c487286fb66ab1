import pytest
import torch

import op_plugin  # noqa: F401  (registers the shipped ops)
from op_plugin.testing import sample_cases

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

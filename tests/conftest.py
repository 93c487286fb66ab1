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


def tolerances(dtype: torch.dtype) -> dict:
    """Tolerances for comparing a compiled result with eager, per dtype."""
    return {
        torch.float16: dict(atol=1e-3, rtol=1e-3),
        torch.bfloat16: dict(atol=1.6e-2, rtol=1.6e-2),
        torch.float32: dict(atol=1e-5, rtol=1.3e-6),
    }.get(dtype, dict(atol=0, rtol=0))

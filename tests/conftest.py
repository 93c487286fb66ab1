import os
import time

# torch turns a custom op that aliases its inputs into an error when the CI variable is set (a warning
# otherwise); every run of these tests, and the rank processes they start, checks as CI does.
os.environ["TORCHINDUCTOR_ERROR_ON_CUSTOM_OP_ALIASING"] = "1"
# npugraph's compile cache stays on, as for a user, but in a folder of this run's own (one per pytest worker,
# inherited by the processes tests start): a run never reads entries from an earlier run or the user's cache.
if "OP_PLUGIN_CACHE_DIR" not in os.environ:
    import atexit
    import shutil
    import tempfile

    os.environ["OP_PLUGIN_CACHE_DIR"] = tempfile.mkdtemp(prefix="op-plugin-test-cache-")
    atexit.register(shutil.rmtree, os.environ["OP_PLUGIN_CACHE_DIR"], ignore_errors=True)

import pytest
import torch
import torch._functorch.config

import op_plugin  # noqa: F401  (registers the shipped ops)
from op_plugin.testing import sample_cases

torch._functorch.config.error_on_custom_op_aliasing = True

SHIPPED_CASES = sample_cases()


def pytest_generate_tests(metafunc):
    """Any test that takes `case` runs once per shipped op x YAML sample."""
    if "case" in metafunc.fixturenames:
        metafunc.parametrize("case", SHIPPED_CASES, ids=[c.id for c in SHIPPED_CASES])


_started_files: set[str] = set()
_session_start: list[float] = []


@pytest.hookimpl(trylast=True)
def pytest_runtest_logstart(nodeid, location):
    """Name each test file as its first test starts, with the time since the first start, so a long run
    shows what it is doing (under xdist the controller hears every worker's start)."""
    path = nodeid.split("::", 1)[0]
    if path in _started_files:
        return
    _started_files.add(path)
    _session_start[:] = _session_start or [time.monotonic()]
    elapsed = int(time.monotonic() - _session_start[0])
    reporter = _config[0].pluginmanager.get_plugin("terminalreporter") if _config else None
    if reporter is not None and reporter.verbosity <= 0:  # -v already names every test
        if reporter._tw.width_of_current_line:  # after -q's progress dots, which ensure_newline does not track
            reporter.write("\n")
        reporter.write_line(f"[{elapsed // 60:2d}:{elapsed % 60:02d}] {path}")


_config: list = []


def pytest_configure(config):
    _config[:] = [config]


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()

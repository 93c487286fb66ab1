"""Issue 25, items 12 and 13: `op-plugin --version`, and reports a user can read: `op-plugin test`
errors without TorchAir's pasted tracebacks and error-code lines or a backend's repr, opcheck
failures without "(scroll up for stack trace)", the output of a multi-output op that differs
named, and GE graph text that does not call Shape's int64 sizes float32."""
from __future__ import annotations

import importlib.metadata
import re

import pytest
import torch

import op_plugin
from op_plugin import _registry, testing
from op_plugin._registry.load import unload
from op_plugin._tools.user_tests.oracles import forget


def test_version_names_op_plugin_torch_and_the_simulator_wheel(capsys):
    from op_plugin.cli import main

    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"op-plugin {importlib.metadata.version('op_plugin')}"
    assert f"torch {importlib.metadata.version('torch')} (required: torch==2.13.0)" in out
    simulator = next(line for line in out if line.startswith("simulator:"))
    assert "torch-npu 2.13.0 wheel" in simulator and "v2.13.0-" in simulator, simulator


@pytest.fixture
def user_file(tmp_path):
    names = []

    def write(text: str, *ops: str):
        path = tmp_path / f"ops{len(names)}.yaml"
        path.write_text(text)
        names.extend(ops)
        return path

    yield write
    for name in names:
        forget(name)
        if _registry.find(name) is not None and _registry.find(name).spec is not None:
            unload(name)
        for piece in _registry.Piece:
            _registry.detach(name, piece)


def test_an_error_inside_torchair_is_one_message_without_tracebacks(user_file):
    path = user_file("""\
ops:
  - func: npu_out_broken(Tensor x) -> Tensor
    outputs: [{size: x.shape, dtype: x}]
    ge: {type: NpuOutBroken}
    samples: [{x: [float32, [2, 3]]}]
""", "npu_out_broken")
    op_plugin.reference("npu_out_broken")(lambda x: x + 1)

    @op_plugin.converter("npu_out_broken")
    def broken(x, meta_outputs=None):
        raise ValueError("the converter of npu_out_broken cannot lower this sample")

    (outcome,) = testing.run_yaml_checks(path, checks=["npugraph"])
    assert outcome.status == "error"
    assert "cannot lower this sample" in outcome.detail, outcome.detail
    for noise in ("Traceback", "ERR03005", "backend=", "<function", "TORCHDYNAMO_VERBOSE", "scroll up"):
        assert noise not in outcome.detail, (noise, outcome.detail)
    assert outcome.detail.count("cannot lower this sample") == 1, outcome.detail


def test_an_opcheck_failure_names_the_failing_test(user_file):
    path = user_file("""\
ops:
  - func: npu_out_wrong_meta(Tensor x) -> Tensor
    outputs: [{size: x.shape, dtype: float16}]
    samples: [{x: [float32, [2, 3]]}]
""", "npu_out_wrong_meta")
    op_plugin.reference("npu_out_wrong_meta")(lambda x: x + 1)   # float32, where the Meta says float16
    (outcome,) = testing.run_yaml_checks(path, checks=["opcheck"])
    assert outcome.status == "fail", outcome
    assert re.search(r"test_\w+ failed: ", outcome.detail), outcome.detail
    assert "scroll up" not in outcome.detail and "Traceback" not in outcome.detail, outcome.detail


def test_the_differing_output_of_a_multi_output_op_is_named(user_file):
    path = user_file("""\
ops:
  - func: npu_out_pair(Tensor x) -> (Tensor, Tensor)
    outputs: [{size: x.shape, dtype: x}, {size: x.shape, dtype: x}]
    samples: [{x: [float32, [2, 3]]}]
""", "npu_out_pair")
    op_plugin.reference("npu_out_pair")(lambda x: (x + 1, x * 2))
    testing.oracle("npu_out_pair")(lambda x: (1 + x, x * 3))   # the second output disagrees
    (outcome,) = testing.run_yaml_checks(path, checks=["oracle"])
    assert outcome.status == "fail" and "output 1:" in outcome.detail and "output 0" not in outcome.detail, outcome


def test_ge_text_does_not_label_shape_sizes_float32():
    report = op_plugin.inspect(lambda x: x.reshape(x.shape[0], -1, 2) * 2, torch.randn(4, 6), dynamic=True)
    shape_lines = [line for line in report.ge_text().splitlines() if ": Shape(" in line]
    assert shape_lines, report.ge_text()
    assert all(line.endswith("-> int64[?]") for line in shape_lines), shape_lines
    assert "float32?" not in report.ge_text() and "float32[?]" not in " ".join(shape_lines)


def test_the_simulator_install_step_of_make_setup_prints_no_warning():
    """`make setup` runs `python -m op_plugin._simulator.hosting.install`: a second run (already
    installed, as in every `make` after the first) prints its one line and no RuntimeWarning of
    the project's own (runpy's 'found in sys.modules' warning when a package imports the module
    run with -m)."""
    import subprocess
    import sys

    result = subprocess.run([sys.executable, "-W", "default", "-m", "op_plugin._simulator.hosting.install"],
                            capture_output=True, text=True, timeout=600, check=False)
    assert result.returncode == 0, result.stderr
    assert "Warning" not in result.stderr, result.stderr
    assert "simulator ready" in result.stdout + result.stderr

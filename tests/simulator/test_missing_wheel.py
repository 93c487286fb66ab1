"""torch_npu's operators when the unpacked wheel is missing (issue 35): `import op_plugin` says so once, naming
the folder ($OP_PLUGIN_SIMULATOR_DIR when set) and the command that fixes it, instead of a later bare
AttributeError on torch.ops.npu.npu_rms_norm; where op_plugin itself needs the ops (the simulator's load,
torch_npu on the virtual NPU: tests/virtual_npu/test_facade.py) the error carries the same message."""
import os
import subprocess
import sys

from op_plugin._base import wheel
from op_plugin._simulator.npu import ops as npu_ops

_CODE = """
import warnings
warnings.simplefilter("always")
import torch, op_plugin
print("defined:", hasattr(torch.ops.npu, "npu_rms_norm"))
from op_plugin._simulator import SimulatorUnavailable, load_simulated_torchair
try:
    load_simulated_torchair()
except SimulatorUnavailable as error:
    print("load:", error)
"""


def _run(folder):
    env = {**os.environ, wheel.ENV_VAR: str(folder)}
    done = subprocess.run([sys.executable, "-c", _CODE], capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def test_a_configured_folder_without_the_wheel_is_said_once_with_the_fix(tmp_path):
    folder = tmp_path / "empty-simulator"
    folder.mkdir()
    done = _run(folder)
    assert "defined: False" in done.stdout
    warned = [line for line in done.stderr.splitlines() if "NpuOpsUndefinedWarning" in line]
    assert len(warned) == 1, done.stderr[-3000:]
    assert f"${wheel.ENV_VAR} = '{folder}'" in warned[0] and "torch.ops.npu.npu_rms_norm" in warned[0]
    assert f"op-plugin setup-simulator '{folder}'" in warned[0] and "lacks torch_npu/dynamo/torchair" in warned[0]
    load = next(line for line in done.stdout.splitlines() if line.startswith("load:"))
    assert str(folder) in load and "op-plugin setup-simulator" in load


def test_a_configured_folder_that_does_not_exist_is_said_once_not_twice(tmp_path):
    folder = tmp_path / "no-such-folder"
    done = _run(folder)
    assert "defined: False" in done.stdout
    assert "NpuOpsUndefinedWarning" not in done.stderr                        # simulator_dir() has said it
    assert sum("SimulatorDirWarning" in line for line in done.stderr.splitlines()) == 1


def test_the_default_folder_missing_names_it_and_the_setup_commands(tmp_path, monkeypatch):
    monkeypatch.delenv(wheel.ENV_VAR, raising=False)
    monkeypatch.setattr(wheel, "simulator_dir", lambda: tmp_path / "torch-npu-2.13.0")
    message = npu_ops.missing_wheel_message()
    assert f"'{tmp_path / 'torch-npu-2.13.0'}' does not exist" in message
    assert "`op-plugin setup-simulator` (or `make setup`)" in message and wheel.ENV_VAR not in message


def test_a_complete_wheel_has_no_message():
    assert npu_ops.missing_wheel_message() is None    # this environment's simulator is unpacked


def test_the_installer_itself_does_not_warn_of_what_it_is_about_to_unpack(tmp_path):
    env = {**os.environ, wheel.ENV_VAR: str(tmp_path / "not-yet"), "PYTHONWARNINGS": "always"}
    done = subprocess.run([sys.executable, "-m", "op_plugin._simulator.hosting.install", "--help"],
                          capture_output=True, text=True, env=env, timeout=600)
    assert "usage:" in done.stdout + done.stderr  # it stops at its usage line: no download in a test
    assert "Warning" not in done.stderr, done.stderr

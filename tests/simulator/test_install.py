"""install_simulator: pinned, idempotent (marker), atomic, never site-packages."""

import importlib.util
import json
import os
import subprocess
import sys

import pytest

from op_plugin._base import wheel as _wheel
from op_plugin._simulator.hosting import install as _install
from op_plugin._simulator import install_simulator, simulator_dir
from tests.simulator._wheel_fakes import fake_unpack


@pytest.fixture
def no_pip(monkeypatch):
    calls = []
    monkeypatch.setattr(_install, "_pip_unpack", lambda target: calls.append(target))
    return calls


def test_simulator_dir_default_and_override(monkeypatch, tmp_path):
    monkeypatch.delenv(_install.ENV_VAR, raising=False)
    assert simulator_dir() == type(simulator_dir())(sys.prefix) / "op-plugin-simulator" / "torch-npu-2.13.0"
    monkeypatch.setenv(_install.ENV_VAR, str(tmp_path))
    assert simulator_dir() == tmp_path


def test_existing_complete_folder_is_compiled_and_marked_without_pip_and_not_redone(tmp_path, no_pip, monkeypatch):
    folder = tmp_path / "sim"
    fake_unpack(folder)
    assert install_simulator(folder) == folder
    marker = json.loads((folder / _install.MARKER_NAME).read_text())
    assert marker["torch_npu"] == "2.13.0" and marker["bytecode"] == [sys.implementation.cache_tag]
    # The TorchAir sources have bytecode, whatever PYTHONDONTWRITEBYTECODE says.
    sources = [folder / name for name in _wheel.REQUIRED_FILES if name.endswith(".py") and "torchair" in name]
    assert sources and all(os.path.exists(importlib.util.cache_from_source(str(path))) for path in sources)
    compiled = []
    monkeypatch.setattr(_install, "compile_bytecode", compiled.append)
    install_simulator(folder)
    assert no_pip == [] and compiled == []   # the marker says it is done: nothing is redone


def test_a_folder_marked_by_an_older_op_plugin_gets_its_bytecode(tmp_path, no_pip):
    folder = tmp_path / "sim"
    fake_unpack(folder)
    (folder / _install.MARKER_NAME).write_text(json.dumps({"torch_npu": _install.TORCH_NPU_VERSION}))
    install_simulator(folder)
    assert json.loads((folder / _install.MARKER_NAME).read_text())["bytecode"] == [sys.implementation.cache_tag]


def test_missing_folder_is_unpacked_by_pip_into_a_staging_dir_then_renamed(tmp_path, monkeypatch):
    folder = tmp_path / "sim"
    seen = []

    def fake_pip(target):
        seen.append(target)
        assert target != folder and target.parent == folder.parent  # never the final folder, never site-packages
        fake_unpack(target)

    monkeypatch.setattr(_install, "_pip_unpack", fake_pip)
    install_simulator(folder, quiet=True)
    assert len(seen) == 1 and not seen[0].exists()
    assert (folder / _install.MARKER_NAME).is_file()
    assert _install.missing_parts(folder) == []
    install_simulator(folder)  # marker present: no second pip run
    assert len(seen) == 1


def test_failed_pip_leaves_no_half_folder(tmp_path, monkeypatch):
    folder = tmp_path / "sim"

    def failing_pip(target):
        (target / "partial.txt").write_text("half")
        raise RuntimeError("pip exited with 1")

    monkeypatch.setattr(_install, "_pip_unpack", failing_pip)
    with pytest.raises(RuntimeError, match="pip exited"):
        install_simulator(folder, quiet=True)
    assert not folder.exists()
    assert [p.name for p in tmp_path.iterdir()] == [".sim.install-lock"]  # only the lock file stays


def test_wrong_version_is_not_complete(tmp_path):
    folder = tmp_path / "sim"
    fake_unpack(folder, version="2.14.0")
    assert any("2.14.0" in part for part in _install.missing_parts(folder))


def test_pip_command_is_pinned_and_targets_the_folder(tmp_path, monkeypatch):
    recorded = []
    monkeypatch.setattr(subprocess, "run",
                        lambda cmd, check: recorded.append(cmd) or subprocess.CompletedProcess(cmd, 0))
    _install._pip_unpack(tmp_path)
    command = recorded[0]
    assert command[:4] == [sys.executable, "-m", "pip", "install"]
    assert "--no-deps" in command and command[command.index("--target") + 1] == str(tmp_path)
    assert command[-1] == "torch-npu==2.13.0"


def test_command_line_on_a_complete_folder(tmp_path):
    folder = tmp_path / "sim"
    fake_unpack(folder)
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    for _ in range(2):
        result = subprocess.run(
            [sys.executable, "-m", "op_plugin._simulator.hosting.install", str(folder)],
            cwd=repo, capture_output=True, text=True, timeout=60,
        )
        assert result.returncode == 0, result.stderr
        assert "simulator ready" in result.stdout
    assert (folder / _install.MARKER_NAME).is_file()

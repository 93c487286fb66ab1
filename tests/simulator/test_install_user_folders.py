"""install_simulator never deletes or overwrites a folder it did not create (issue 35): the unpack is staged
beside the target and swapped in only when complete; a non-empty folder without op_plugin's marker is refused
by name before anything is downloaded; two installers take turns. pip is always replaced by a fake unpack."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

from op_plugin._simulator.hosting import install as _install
from op_plugin._simulator import install_simulator
from tests.simulator._wheel_fakes import fake_unpack


def _failing_midway(calls):
    def pip(target):
        calls.append(target)
        (target / "torch_npu").mkdir()
        (target / "torch_npu" / "half.py").write_text("half")
        raise RuntimeError("pip exited with 1 (network gone)")
    return pip


def _user_folder(tmp_path):
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "notes.txt").write_text("my own work")
    (folder / "torch_npu").mkdir()                 # even a name the wheel also uses
    (folder / "torch_npu" / "data.bin").write_bytes(b"\x00\x01")
    return folder


def _tree(folder):
    return sorted((str(p.relative_to(folder)), p.read_bytes() if p.is_file() else None) for p in folder.rglob("*"))


@pytest.mark.parametrize("via", ["target", "env"])
def test_a_users_folder_is_refused_by_name_and_left_as_it_was(tmp_path, monkeypatch, via):
    folder = _user_folder(tmp_path)
    before = _tree(folder)
    calls = []
    monkeypatch.setattr(_install, "_pip_unpack", _failing_midway(calls))
    monkeypatch.setenv(_install.ENV_VAR, str(folder))
    with pytest.raises(RuntimeError) as caught:
        install_simulator(folder if via == "target" else None, quiet=True)
    message = str(caught.value)
    assert str(folder) in message and "not an unpack made by op_plugin" in message and "new or empty folder" in message
    assert calls == []                             # refused before anything is downloaded
    assert _tree(folder) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine"]


def test_a_refused_folder_name_is_shown_escaped(tmp_path, monkeypatch):
    folder = tmp_path / "evil\x1b[31mname"
    folder.mkdir()
    (folder / "keep.txt").write_text("x")
    monkeypatch.setattr(_install, "_pip_unpack", _failing_midway([]))
    with pytest.raises(RuntimeError) as caught:
        install_simulator(folder, quiet=True)
    assert "\x1b" not in str(caught.value) and "evil\\x1b[31mname" in str(caught.value)


def test_an_empty_folder_survives_a_failed_unpack_and_is_filled_by_a_good_one(tmp_path, monkeypatch):
    folder = tmp_path / "empty"
    folder.mkdir()
    calls = []
    monkeypatch.setattr(_install, "_pip_unpack", _failing_midway(calls))
    with pytest.raises(RuntimeError, match="network gone"):
        install_simulator(folder, quiet=True)
    assert len(calls) == 1 and calls[0] != folder and not calls[0].exists()   # staged beside it, then removed
    assert folder.is_dir() and list(folder.iterdir()) == []
    monkeypatch.setattr(_install, "_pip_unpack", fake_unpack)
    assert install_simulator(folder, quiet=True) == folder
    assert _install.missing_parts(folder) == [] and (folder / _install.MARKER_NAME).is_file()
    assert not (folder / _install.STAGING_MARKER_NAME).exists()


def _old_unpack_of_ours(tmp_path):
    folder = tmp_path / "sim"
    (folder / "torch_npu").mkdir(parents=True)
    (folder / "torch_npu" / "old.py").write_text("old")
    (folder / _install.MARKER_NAME).write_text(json.dumps({"torch_npu": "2.12.0"}))
    return folder


def test_our_older_unpack_survives_a_failed_unpack(tmp_path, monkeypatch):
    folder = _old_unpack_of_ours(tmp_path)
    before = _tree(folder)
    monkeypatch.setattr(_install, "_pip_unpack", _failing_midway([]))
    with pytest.raises(RuntimeError, match="network gone"):
        install_simulator(folder, quiet=True)
    assert _tree(folder) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == [".sim.install-lock", "sim"]


def test_our_older_unpack_is_replaced_whole(tmp_path, monkeypatch):
    folder = _old_unpack_of_ours(tmp_path)
    monkeypatch.setattr(_install, "_pip_unpack", fake_unpack)
    install_simulator(folder, quiet=True)
    assert _install.missing_parts(folder) == [] and not (folder / "torch_npu" / "old.py").exists()
    assert json.loads((folder / _install.MARKER_NAME).read_text())["torch_npu"] == _install.TORCH_NPU_VERSION
    assert sorted(p.name for p in tmp_path.iterdir()) == [".sim.install-lock", "sim"]


def test_files_put_into_the_empty_folder_during_the_unpack_are_kept(tmp_path, monkeypatch):
    folder = tmp_path / "sim"
    folder.mkdir()

    def racing_pip(target):
        fake_unpack(target)
        (folder / "arrived.txt").write_text("someone else's")   # after the check, before the swap

    monkeypatch.setattr(_install, "_pip_unpack", racing_pip)
    with pytest.raises(RuntimeError, match="not an unpack made by op_plugin"):
        install_simulator(folder, quiet=True)
    assert [p.name for p in folder.iterdir()] == ["arrived.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == [".sim.install-lock", "sim"]


def test_leftovers_of_a_killed_installer_are_removed_and_nothing_else(tmp_path, monkeypatch):
    folder = tmp_path / "sim"
    dead = tmp_path / ".sim.partial-dead"
    (dead / "torch_npu").mkdir(parents=True)
    (dead / _install.STAGING_MARKER_NAME).write_text("")
    lookalike = tmp_path / ".sim.partial-users"    # same pattern, no marker: not ours
    lookalike.mkdir()
    (lookalike / "keep.txt").write_text("x")
    monkeypatch.setattr(_install, "_pip_unpack", fake_unpack)
    install_simulator(folder, quiet=True)
    assert not dead.exists() and (lookalike / "keep.txt").read_text() == "x"


def test_a_symlinked_folder_is_installed_through_and_the_link_kept(tmp_path, monkeypatch):
    real = tmp_path / "real"
    real.mkdir()
    link = tmp_path / "link"
    link.symlink_to(real)
    monkeypatch.setattr(_install, "_pip_unpack", fake_unpack)
    assert install_simulator(link, quiet=True) == link
    assert link.is_symlink() and _install.missing_parts(real) == []


_RACER = textwrap.dedent("""
    import os, sys, time
    from op_plugin._base import wheel
    from op_plugin._simulator.hosting import install

    folder, log = sys.argv[1], sys.argv[2]

    def slow_unpack(target):
        with open(log, "a") as handle:
            handle.write(f"{os.getpid()}\\n")
        time.sleep(1.5)                      # long enough for the other process to arrive meanwhile
        for name in wheel.REQUIRED_FILES:
            path = target / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("# stand-in")
        meta = target / f"torch_npu-{install.TORCH_NPU_VERSION}.dist-info"
        meta.mkdir()
        (meta / "METADATA").write_text(f"Name: torch_npu\\nVersion: {install.TORCH_NPU_VERSION}\\n\\n")

    install._pip_unpack = slow_unpack
    open(f"{log}.ready.{os.getpid()}", "w").close()   # both imported: start together (a barrier)
    deadline = time.monotonic() + 120
    while len([n for n in os.listdir(os.path.dirname(log)) if ".ready." in n]) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    print(install.install_simulator(folder, quiet=False))
""")


def test_two_installer_processes_take_turns(tmp_path):
    script = tmp_path / "racer.py"
    script.write_text(_RACER)
    folder, log = tmp_path / "sim", tmp_path / "pip.log"
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    racers = [subprocess.Popen([sys.executable, str(script), str(folder), str(log)], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, env=env) for _ in range(2)]
    outcomes = [racer.communicate(timeout=300) for racer in racers]
    assert [racer.returncode for racer in racers] == [0, 0], [err[-2000:] for _, err in outcomes]
    assert all(out.strip().splitlines()[-1] == str(folder) for out, _ in outcomes)
    assert len(log.read_text().split()) == 1       # one unpack; the second installer found it done
    assert sum("waiting for another installer" in err for _, err in outcomes) == 1
    assert _install.missing_parts(folder) == [] and (folder / _install.MARKER_NAME).is_file()
    names = sorted(p.name for p in tmp_path.iterdir() if ".ready." not in p.name)
    assert names == [".sim.install-lock", "pip.log", "racer.py", "sim"]

"""Every `op-plugin` subcommand answers bad input with one located line and a non-zero exit, never a
traceback, a hang or a raw control character; no command replaces an existing output file without
--force; SIGTERM and SIGKILL to the command line leave no worker or child process running.

The hostile inputs, each given where the command reads a path: a binary file, a folder, a FIFO, a missing
file, and a file whose name holds control characters (ESC, CR, BEL). `demo` reads no path and is left out;
`setup-simulator` writes its TARGET rather than reading it, so a missing TARGET is a new folder to unpack
into, not bad input. The matrix runs in one child process calling `op_plugin.cli.main` (what the console
script runs), each call under a 60 s alarm, so a FIFO that blocked would be reported, not hang the suite.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

CLI = str(Path(sys.executable).with_name("op-plugin"))
ROOT = Path(__file__).resolve().parents[1]
CONTROL = "evil\x1b[31m\r\x07name"
KINDS = {"binary": "hbin", "folder": "hdir", "fifo": "hfifo", "missing": "hmissing", "control": CONTROL}

DRIVER = textwrap.dedent('''
    import contextlib, io, json, os, signal, sys
    kinds = json.loads(sys.argv[1])
    sys.path.insert(0, os.getcwd())
    from op_plugin.cli import main
    from op_plugin._simulator.hosting import install

    def unreachable(target=None, **kw):  # setup-simulator must refuse before it would download anything
        raise AssertionError("install_simulator reached")

    install.install_simulator = unreachable
    for kind, stem in kinds.items():
        for ext in (".yaml", ".py", ".json"):
            path = stem + ext
            if kind == "binary":
                open(path, "wb").write(b"\\x00\\x01\\xff\\xfe\\x80 binary")
            elif kind == "fifo":
                os.mkfifo(path)
            elif kind == "control":
                open(path, "w").write("ops: [\\n")
            elif kind == "folder":
                os.makedirs(path)
        if kind == "folder":
            os.makedirs(stem)
            open(os.path.join(stem, "keep.txt"), "w").write("not a wheel")
    open("ok.yaml", "w").write("ops:\\n  - func: npu_hostile_ok(Tensor x) -> Tensor\\n"
                               "    outputs: [{size: x.shape, dtype: x}]\\n")

    def commands(kind, stem):
        y, py, js = stem + ".yaml", stem + ".py", stem + ".json"
        table = {
            "validate": ["validate", y], "list": ["list", "--yaml", y], "msopgen": ["msopgen", y],
            "opproto": ["opproto", y, "--out", "generated"], "declared-cases": ["declared-cases", "--from-json", js],
            "declared-cases --setup": ["declared-cases", "--setup", py, "--prefix", "none"],
            "test": ["test", y], "test --python": ["test", "ok.yaml", "--python", py],
            "inspect": ["inspect", stem + ":make"], "compare": ["compare", stem + ":make"],
            "setup-simulator": ["setup-simulator", stem if kind == "folder" else y], "run": ["run", "--", py],
        }
        if kind == "missing":
            del table["setup-simulator"]  # a new folder to unpack into: not bad input for it
        return table

    def alarm(*args):
        raise TimeoutError("no answer within 60 s (blocked on the path?)")

    signal.signal(signal.SIGALRM, alarm)
    for kind, stem in kinds.items():
        for name, argv in commands(kind, stem).items():
            err, out = io.StringIO(), io.StringIO()
            signal.alarm(60)
            try:
                with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
                    code = main(argv)
            except BaseException as error:
                code = f"raised {type(error).__name__}: {error}"
            finally:
                signal.alarm(0)
            print(json.dumps({"kind": kind, "stem": stem, "command": name, "code": code, "err": err.getvalue()}),
                  flush=True)
''')


def _shown(name: str) -> str:
    from op_plugin._base.paths import shown

    return shown(name)


@pytest.fixture(scope="module")
def matrix(tmp_path_factory):
    folder = tmp_path_factory.mktemp("hostile")
    done = subprocess.run([sys.executable, "-c", DRIVER, json.dumps(KINDS)], cwd=folder, capture_output=True,
                          text=True, timeout=1200)
    assert done.returncode == 0, done.stderr[-3000:]
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def test_every_command_answers_every_hostile_input_with_one_located_line(matrix):
    commands = {row["command"] for row in matrix}
    assert {"validate", "list", "msopgen", "opproto", "declared-cases", "test", "inspect", "compare",
            "setup-simulator", "run"} <= commands  # every subcommand that reads a path (demo reads none)
    assert len(matrix) == len(KINDS) * 12 - 1
    for row in matrix:
        where = f"{row['command']} with a {row['kind']} input: {row['code']!r}: {row['err']!r}"
        assert isinstance(row["code"], int) and row["code"] != 0, where
        lines = [line for line in row["err"].splitlines() if line.strip()]
        assert len(lines) == 1 and "Traceback" not in row["err"], where
        assert not any(c in row["err"] for c in "\x1b\r\x07"), where  # control characters escaped
        assert _shown(row["stem"]) in lines[0], where  # located: the path (or module) is named


def test_special_files_are_refused_before_they_are_opened(matrix):
    for row in matrix:
        if row["kind"] == "fifo" and row["command"] not in ("inspect", "compare", "run"):
            assert "the path is a FIFO (named pipe), not a regular file" in row["err"], row


def test_the_console_script_answers_without_a_traceback(tmp_path):
    """`op-plugin list --yaml <binary file>` ended in a traceback; `validate` on a FIFO must not block."""
    (tmp_path / "bin.yaml").write_bytes(b"\x00\x01\xff\xfe")
    os.mkfifo(tmp_path / "pipe.yaml")
    for argv, expected in ((["list", "--yaml", "bin.yaml"], "error: bin.yaml:1: the file is not UTF-8 text"),
                           (["validate", "pipe.yaml"], "error: pipe.yaml:1: the path is a FIFO (named pipe)")):
        done = subprocess.run([CLI, *argv], cwd=tmp_path, capture_output=True, text=True, timeout=600)
        lines = [line for line in done.stderr.splitlines() if line.strip() and "Warning" not in line]
        assert done.returncode != 0 and "Traceback" not in done.stderr, (argv, done.stderr[-2000:])
        assert len(lines) == 1 and lines[0].startswith(expected), (argv, done.stderr[-2000:])


# ---------------------------------------------------------------- output files: never replaced without --force

def test_declared_cases_and_compare_outputs_need_force(tmp_path, capsys):
    from op_plugin.cli import main

    saved = tmp_path / "saved.json"
    saved.write_text('{"summary": {}, "cases": []}')
    for option in ("--json", "--markdown", "--write-known"):
        existing = tmp_path / "existing.out"
        existing.write_text("keep me")
        assert main(["declared-cases", "--from-json", str(saved), option, str(existing)]) == 2, option
        err = capsys.readouterr().err
        assert f"error: {existing}: {option} would replace a file that exists; pass --force" in err, err
        assert existing.read_text() == "keep me"
    assert main(["declared-cases", "--from-json", str(saved), "--json", str(existing), "--force"]) == 0
    assert json.loads(existing.read_text())["cases"] == []
    # compare's --json is checked before the model is even imported
    assert main(["compare", "no_such_module_anywhere:make", "--json", str(existing)]) == 2
    assert "would replace a file that exists" in capsys.readouterr().err
    assert main(["declared-cases", "--from-json", str(saved), "--json", str(tmp_path)]) == 2
    assert "--json names a folder" in capsys.readouterr().err


def test_generated_files_are_not_replaced_without_force(tmp_path, capsys):
    from op_plugin.cli import main

    path = tmp_path / "ops.yaml"
    path.write_text("ops:\n  - func: npu_force_probe(Tensor x) -> Tensor\n    outputs: [{size: x.shape, dtype: x}]\n"
                    "    ge: {type: ForceProbe}\n")
    out = tmp_path / "out"
    assert main(["msopgen", str(path), "--out", str(out)]) == 0
    first = (out / "force_probe.json").read_text()
    (out / "force_probe.json").write_text("edited")
    assert main(["msopgen", str(path), "--out", str(out)]) == 1
    assert f"error: cannot write {out / 'force_probe.json'}: exists; pass --force to replace it" in \
        capsys.readouterr().err
    assert (out / "force_probe.json").read_text() == "edited"
    assert main(["msopgen", str(path), "--out", str(out), "--force"]) == 0
    assert (out / "force_probe.json").read_text() == first
    pics = tmp_path / "pics"
    pics.mkdir()
    (pics / "ge_graph_0.svg").write_text("<svg/>")
    assert main(["inspect", "no_such_module_anywhere:make", "--out", str(pics)]) == 2  # refused before importing
    assert "holds the files of an earlier run (1)" in capsys.readouterr().err


def test_names_from_the_file_system_are_escaped():
    from op_plugin._base.errors import Location
    from op_plugin._base.paths import shown

    assert shown("plain/ünïcode name.yaml") == "plain/ünïcode name.yaml"
    assert shown("a\x1b[31mb\nc\rd\x07e\u202ef\x7f") == "a\\x1b[31mb\\x0ac\\x0dd\\x07e\\u202ef\\x7f"
    assert shown(os.fsdecode(b"bad\xffname")) == "bad\\xffname"  # an undecodable byte of a file name
    assert str(Location("x\x1b.yaml", 3, "op", "func")) == "x\\x1b.yaml:3: op 'op': field 'func'"


# ---------------------------------------------------------------- signals: no orphans

def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as handle:
            text = handle.read()
    except OSError:
        return True
    return text[text.rfind(")") + 2:].split()[0] in ("Z", "X")


def _wait_gone(pids, seconds: float = 10.0) -> list[int]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not all(_gone(pid) for pid in pids):
        time.sleep(0.1)
    return [pid for pid in pids if not _gone(pid)]


def _wait_for_file(path: Path, proc, seconds: float) -> str:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip():
            return path.read_text().strip()
        assert proc.poll() is None, f"the command ended early ({proc.returncode})"
        time.sleep(0.2)
    raise AssertionError(f"{path} was not written within {seconds} s")


@pytest.mark.parametrize("how", ["SIGTERM", "SIGKILL"])
def test_op_plugin_run_leaves_no_orphan(tmp_path, how):
    """SIGTERM is passed on to the command; after SIGKILL (no cleanup runs) the kernel sends it SIGTERM."""
    pid_file = tmp_path / "pid"
    child = f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); time.sleep(300)"
    proc = subprocess.Popen([CLI, "run", "--", sys.executable, "-c", child], cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    pid = None
    try:
        pid = int(_wait_for_file(pid_file, proc, 600))
        proc.send_signal(getattr(signal, how))
        code = proc.wait(timeout=30)
        assert _wait_gone([pid]) == [], f"the command (pid {pid}) outlived op-plugin run ({how})"
        if how == "SIGTERM":
            assert code == 128 + signal.SIGTERM and "op-plugin run: stopped by SIGTERM" in proc.stderr.read()
    finally:
        for leftover in (proc.pid, pid):
            if leftover is not None and not _gone(leftover):
                os.kill(leftover, signal.SIGKILL)
        proc.wait(timeout=30)


SETUP = textwrap.dedent('''
    """A declared case that writes its worker's pid, then runs for an hour."""
    import os
    import time

    from op_plugin._simulator import load_simulated_torchair
    from op_plugin._tools.declared.cases import plant_case

    load_simulated_torchair()
    from torchair._ge_concrete_graph.supported_declaration import F32  # noqa: E402


    def _long(x):
        with open(os.environ["OP_PLUGIN_TEST_PID_FILE"], "w") as handle:
            handle.write(str(os.getpid()))
        time.sleep(3600)
        return x


    plant_case("orphan.long#1", _long, F32(2, 3))
''')


def test_sigterm_to_declared_cases_ends_its_worker(tmp_path):
    """SIGTERM (what `timeout` and CI limits send) used to leave the worker running its case."""
    setup = tmp_path / "long_case.py"
    setup.write_text(SETUP)
    pid_file = tmp_path / "worker.pid"
    env = {**os.environ, "OP_PLUGIN_TEST_PID_FILE": str(pid_file)}
    proc = subprocess.Popen([CLI, "declared-cases", "--prefix", "orphan.long", "--workers", "1", "--setup",
                             str(setup), "--timeout", "3000"], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    worker = None
    try:
        worker = int(_wait_for_file(pid_file, proc, 900))
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=60)
        assert _wait_gone([worker]) == [], f"the worker (pid {worker}) outlived declared-cases"
        err = proc.stderr.read()
        assert code == 128 + signal.SIGTERM and "Traceback" not in err, (code, err[-2000:])
    finally:
        for leftover in (proc.pid, worker):
            if leftover is not None and not _gone(leftover):
                os.kill(leftover, signal.SIGKILL)
        proc.wait(timeout=60)


def test_compare_dumps_escapes_folder_names(tmp_path):
    from op_plugin._tools.compare.dumps import compare_dump_dirs

    with pytest.raises(ValueError) as refused:
        compare_dump_dirs(tmp_path / CONTROL, tmp_path)
    assert "\x1b" not in str(refused.value) and "\\x1b" in str(refused.value)
    (tmp_path / CONTROL).mkdir()
    with pytest.raises(ValueError) as empty:
        compare_dump_dirs(tmp_path / CONTROL, tmp_path)
    assert "\x1b" not in str(empty.value) and "no dump files" in str(empty.value)

"""Start-up in a fresh process: signals are honoured while TorchAir loads, and folders that merely share a
name with torch_npu or torchair (in the working directory, or the script's) are never imported by op_plugin.

Each check runs in its own interpreter, since loading TorchAir changes the process for good.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap

import pytest

# In the child: the first import that starts once TorchAir's `torchair/core/_backend.py` has run past its
# `signal.signal(SIGTERM/SIGINT, _signal_handler)` lines (its class TorchNpuGraph comes after them) sends the
# signal, then the load goes on: the signal arrives at the worst moment, deterministically.
_SIGNAL_IN_THE_WINDOW = """
    import os, signal, sys, time
    SIGNUM = signal.{signame}
    sent = []
    # Python's own dispositions, whatever this child inherited: a shell's background job starts with SIGINT
    # ignored (POSIX), and an ignored SIGINT would never interrupt the load.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)

    def audit(event, args):
        if event != "import" or sent:
            return
        backend = sys.modules.get("torchair.core._backend")
        if backend is not None and hasattr(backend, "TorchNpuGraph"):
            sent.append(args[0])
            os.kill(os.getpid(), SIGNUM)
            time.sleep(0.2)  # a default disposition ends the process here

    sys.addaudithook(audit)
"""


def _child(code: str, cwd, *, script: bool = False) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env.pop("OP_PLUGIN_VIRTUAL_NPU", None)
    source = textwrap.dedent(code)
    if script:  # sys.path[0] is the script's folder
        path = os.path.join(cwd, "main_script.py")
        with open(path, "w") as f:
            f.write(source)
        command = [sys.executable, path]
    else:  # python -c: sys.path[0] is "" (the working directory)
        command = [sys.executable, "-c", source]
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def _report(result) -> dict:
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("layer", ["handlers-refused", "handler-got-in"])
def test_sigterm_while_torchair_loads_ends_the_process(tmp_path, layer):
    """torchrun stops a rank with SIGTERM: one that arrives while the rank loads TorchAir ends it as at any
    other moment (TorchAir's import-time handler used to swallow it; the rank ran on and failed later).
    handler-got-in: TorchAir's handler installed after all (the refusal switched off): the signal it swallows
    is raised again once the previous handlers are back."""
    disable = "" if layer == "handlers-refused" else (
        "import contextlib\nfrom op_plugin._simulator.hosting import loader\n"
        "loader._torchair_signal_handlers_refused = contextlib.nullcontext\n")
    result = _child(_SIGNAL_IN_THE_WINDOW.format(signame="SIGTERM") + textwrap.indent(disable, "    ") + """
    from op_plugin._simulator import load_torchair
    torchair = load_torchair()
    print("still running after the load; torchair.ge:", hasattr(torchair, "ge"), "sent at", sent)
    """, tmp_path)
    assert result.returncode == -signal.SIGTERM, (result.returncode, result.stdout, result.stderr[-2000:])
    assert "still running" not in result.stdout


def test_a_handler_of_the_process_gets_a_signal_sent_while_torchair_loads(tmp_path):
    result = _child(_SIGNAL_IN_THE_WINDOW.format(signame="SIGTERM") + """
    import json
    received = []
    handler = lambda signum, frame: received.append(signum)
    signal.signal(signal.SIGTERM, handler)
    from op_plugin._simulator import load_torchair
    torchair = load_torchair()
    print(json.dumps({"sent_at": sent, "received": received,
                      "handler_kept": signal.getsignal(signal.SIGTERM) is handler,
                      "sigint_default": signal.getsignal(signal.SIGINT) is signal.default_int_handler,
                      "ge": hasattr(torchair, "ge")}))
    """, tmp_path)
    report = _report(result)
    assert report["sent_at"], "the signal was never sent: the window moved (see _SIGNAL_IN_THE_WINDOW)"
    assert report == {"sent_at": report["sent_at"], "received": [signal.SIGTERM], "handler_kept": True,
                      "sigint_default": True, "ge": True}


def test_ctrl_c_while_torchair_loads_interrupts_the_load(tmp_path):
    result = _child(_SIGNAL_IN_THE_WINDOW.format(signame="SIGINT") + """
    from op_plugin._simulator import load_torchair
    try:
        load_torchair()
        print("loaded")
    except KeyboardInterrupt:
        print("interrupted", sent)
    """, tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip().splitlines()[-1].startswith("interrupted ['"), result.stdout


# ---- folders named torch_npu / torchair -------------------------------------------------------------------

_RAISING_INIT = "raise RuntimeError('the user folder {name} was imported')\n"

_COMPILE_AND_REPORT = """
    import json, sys
    import torch
    import op_plugin
    from op_plugin import _backend
    from op_plugin._base.installed import real_torch_npu
    compiled = torch.compile(lambda x: x * 2 + 1, backend="npugraph", fullgraph=True)
    got = compiled(torch.ones(3)).tolist()
    torchair = sys.modules["torchair"]
    print(json.dumps({"got": got, "torch_npu_modules": sorted(m for m in sys.modules if m.split(".")[0] == "torch_npu"),
                      "ascend": _backend.on_ascend_host(), "real": real_torch_npu(),
                      "torchair_file": torchair.__file__}))
"""


def _folder(root, name, init=None):
    folder = root / name
    folder.mkdir()
    if init is not None:
        (folder / "__init__.py").write_text(init)
    return folder


@pytest.mark.parametrize("place", ["working-directory", "beside-the-script"])
@pytest.mark.parametrize("content", ["empty", "raising-init"])
def test_a_folder_named_torch_npu_is_never_imported(tmp_path, place, content):
    """An empty data folder (a namespace package) or a package whose __init__ raises, in the working directory
    (python -c) or beside the script (sys.path[0]): op_plugin and TorchAir never import it, the host is a CPU
    host, and npugraph compiles. (It used to be imported: every compile then failed with "torch_npu is
    already imported".)"""
    _folder(tmp_path, "torch_npu", _RAISING_INIT.format(name="torch_npu") if content == "raising-init" else None)
    report = _report(_child(_COMPILE_AND_REPORT, tmp_path, script=place == "beside-the-script"))
    wheel = os.path.join("torch_npu", "dynamo", "torchair", "__init__.py")
    assert report == {"got": [3.0, 3.0, 3.0], "torch_npu_modules": [], "ascend": False, "real": False,
                      "torchair_file": report["torchair_file"]}
    assert report["torchair_file"].endswith(wheel)


def test_a_user_torchair_package_does_not_replace_the_simulators(tmp_path):
    _folder(tmp_path, "torchair", _RAISING_INIT.format(name="torchair"))
    report = _report(_child(_COMPILE_AND_REPORT, tmp_path))
    assert report["got"] == [3.0, 3.0, 3.0]
    assert report["torchair_file"].endswith(os.path.join("torch_npu", "dynamo", "torchair", "__init__.py"))


def test_a_user_torch_npu_imported_by_the_user_is_refused_by_its_path(tmp_path):
    _folder(tmp_path, "torch_npu")
    result = _child("""
    import torch, torch_npu  # the user's own folder, imported on purpose or by accident
    import op_plugin
    try:
        op_plugin.load_torchair()
    except RuntimeError as error:
        print(error)
    """, tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    message = result.stdout.strip().splitlines()[-1]
    assert f"torch_npu at {tmp_path / 'torch_npu'} (in the working directory) is already imported" in message
    assert "not the installed torch-npu" in message


_FAKE_DISTRIBUTION = """
    import json, sys
    from op_plugin._base import installed
    print(json.dumps({"real": installed.real_torch_npu(), "spec": installed.torch_npu_spec().origin}))
"""


@pytest.mark.parametrize("shadow", [None, "empty", "package"])
def test_only_the_installed_distribution_counts_as_torch_npu(tmp_path, shadow):
    """A torch-npu distribution (dist-info metadata beside its package, as pip installs it): that torch_npu is
    real; an empty folder in the working directory cannot hide it (a regular package wins over a namespace
    portion); a package there that would be imported in its place is refused by name."""
    site = tmp_path / "site"
    site.mkdir()
    _folder(site, "torch_npu", "")
    info = _folder(site, "torch_npu-2.13.0.dist-info")
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: torch-npu\nVersion: 2.13.0\n")
    work = _folder(tmp_path, "work")
    if shadow is not None:
        _folder(work, "torch_npu", "" if shadow == "package" else None)
    env_path = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = str(site) + (os.pathsep + env_path if env_path else "")
    try:
        result = _child(_FAKE_DISTRIBUTION, work)
    finally:
        if env_path is None:
            del os.environ["PYTHONPATH"]
        else:
            os.environ["PYTHONPATH"] = env_path
    if shadow == "package":  # `import op_plugin` itself refuses: on an Ascend host it decides the host at import
        assert result.returncode != 0
        assert (f"ShadowedTorchNpu: torch_npu at {work / 'torch_npu'} (in the working directory) hides the installed "
                f"torch-npu ({site / 'torch_npu'}): `import torch_npu` would load it instead; rename or move it"
                ) in result.stderr, result.stderr[-2000:]
    else:
        assert _report(result) == {"real": True, "spec": str(site / "torch_npu" / "__init__.py")}


def test_torch_npus_ops_are_defined_beside_a_torch_npu_folder(tmp_path):
    _folder(tmp_path, "torch_npu")
    result = _child("""
    import torch, op_plugin
    print(hasattr(torch.ops.npu, "npu_rms_norm"))
    """, tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip().splitlines()[-1] == "True"

"""The import boundary: TorchAir loads on a CPU host without dragging torch_npu in or leaking side effects.

Each check runs in a fresh interpreter, since loading TorchAir changes the process for good.
"""

import json
import os
import subprocess
import sys
import textwrap

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _run(code, env_extra=None):
    env = dict(os.environ)
    env.update(env_extra or {})
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], cwd=REPO, env=env, capture_output=True, text=True, timeout=300
    )


def test_load_torchair_in_a_fresh_process():
    result = _run(
        """
        import json, logging, signal, sys
        import torch
        logger_class_before = logging.getLoggerClass()
        sigint_before = signal.getsignal(signal.SIGINT)
        from op_plugin._simulator import load_simulated_torchair
        torchair = load_simulated_torchair()
        again = load_simulated_torchair()
        import torchair as imported
        native = sys.modules["torchair.core._torchair"]
        try:
            native.AclopStartDumpArgs
            unknown = "no error"
        except AttributeError as error:
            unknown = str(error)
        handlers = [h.stream is sys.stderr for h in logging.getLogger("torchair").handlers if hasattr(h, "stream")]
        print(json.dumps({
            "same": torchair is again is imported,
            "torch_npu": sorted(m for m in sys.modules if m == "torch_npu" or m.startswith("torch_npu.")),
            "torch_ok": torch.ones(2).add(1).tolist(),
            "unknown": unknown,
            "logger_class_restored": logging.getLoggerClass() is logger_class_before,
            "sigint_restored": signal.getsignal(signal.SIGINT) is sigint_before,
            "torchair_handlers_on_stderr": handlers,
            "backend": callable(torchair.get_npu_backend),
        }))
        """
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["same"] is True
    assert report["torch_npu"] == []
    assert report["torch_ok"] == [2.0, 2.0]
    assert "AclopStartDumpArgs" in report["unknown"] and "CPU simulator" in report["unknown"]
    assert report["logger_class_restored"] is True
    assert report["sigint_restored"] is True
    assert report["torchair_handlers_on_stderr"] and all(report["torchair_handlers_on_stderr"])
    assert report["backend"] is True


def test_simulator_unavailable_names_the_install_command(tmp_path):
    empty = tmp_path / "no-simulator-here"
    empty.mkdir()
    result = _run(
        """
        import sys
        from op_plugin._simulator import SimulatorUnavailable, load_simulated_torchair
        assert issubclass(SimulatorUnavailable, RuntimeError)
        try:
            load_simulated_torchair()
        except SimulatorUnavailable as error:
            print(repr(str(error)))
            print("torchair" in sys.modules)
        else:
            print("loaded")
        """,
        {"OP_PLUGIN_SIMULATOR_DIR": str(empty)},
    )
    assert result.returncode == 0, result.stderr
    message_repr, torchair_imported = result.stdout.strip().splitlines()[-2:]
    message = eval(message_repr)  # - our own repr() output
    assert "\n" not in message
    assert str(empty) in message
    assert "make setup" in message and "op-plugin setup-simulator" in message
    assert torchair_imported == "False"


def test_stub_is_strict_and_answers_what_torchair_reads():
    from op_plugin._simulator.hosting import native_stub as _native_stub

    module = _native_stub.make_native_module()
    with pytest.raises(AttributeError, match="GetSocName.*CPU simulator"):
        module.GetSocName()
    assert module.get_registered_ir_def("NoSuchOpAnywhere") == ("ERROR", [], [], [])
    assert module.check_cann_compat("Add", (), ()) == ""
    assert module.InitializeGraphEngine({"ge.exec.deviceId": "0"}) is None
    assert module.TorchDataType.FLOAT16 == 1 and module.TorchDataType.BF16 == 27


def test_torchair_logger_configured_before_the_first_compile(tmp_path):
    """logging.getLogger("torchair").setLevel(...) before TorchAir loads must not break compiles."""
    code = (
        "import logging, torch, op_plugin\n"
        "logging.getLogger('torchair').setLevel(logging.WARNING)\n"
        "f = torch.compile(lambda x: torch.ops.npu.npu_vector_add(x, x), backend='npugraph')\n"
        "x = torch.ones(3)\n"
        "assert f(x).tolist() == [2.0, 2.0, 2.0]\n"
        "logger = logging.getLogger('torchair')\n"
        "print(hasattr(logger, 'event'), logger.level == logging.WARNING)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split() == ["True", "True"]

"""The TorchAir smoke tier's runner (run.py: expectations, results, comparison; no TorchAir test is run here) and
the torch_npu names the tier made the virtual NPU provide (save_npugraph_tensor & co., in a child process)."""
from __future__ import annotations

import json

import pytest

from ..virtual_npu.test_device import _ok, built_extension  # noqa: F401  (the module fixture builds the C++ part)
from . import run


def test_expected_toml_parses_and_names_only_known_kinds():
    expected = run.load_expected(run.EXPECTED)
    assert "ge_test.py" in expected and all(e.kind in run.KINDS for tests in expected.values() for e in tests.values())


@pytest.mark.parametrize("value", ["passed", "pass: why", "refused", {"expect": "pass", "match": "x"},
                                   {"expect": "refused: x", "match": "y"}, {"match": "y"}, 3,
                                   {"expect": "torchair-bug: x", "flaky": True}])
def test_a_malformed_expectation_is_refused_naming_the_test(value):
    with pytest.raises(ValueError, match="f.py::T::t"):
        run.parse_expectation("f.py::T::t", value)


def _log(tmp_path, *records):
    path = tmp_path / "events.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_results_fold_the_phases_and_name_a_timeout(tmp_path):
    log = _log(tmp_path,
               {"event": "start", "id": "f.py::T::ok"},
               {"event": "report", "id": "f.py::T::ok", "when": "setup", "outcome": "passed"},
               {"event": "report", "id": "f.py::T::ok", "when": "call", "outcome": "passed"},
               {"event": "start", "id": "f.py::T::bad"},
               {"event": "report", "id": "f.py::T::bad", "when": "call", "outcome": "failed", "message": "E: boom",
                "text": "trace"},
               {"event": "warning", "id": "f.py::T::bad", "text": "ACL graph capture needs an NPU"},
               {"event": "start", "id": "f.py::T::hang"},
               {"event": "report", "id": "f.py::T::hang", "when": "setup", "outcome": "passed"})
    results = run.read_log(log, "f.py", timed_out=True)
    assert results["T::ok"].outcome == "passed" and results["T::hang"].outcome == "timeout"
    assert results["T::bad"].outcome == "failed" and "ACL graph capture" in results["T::bad"].text


def test_any_difference_in_either_direction_is_reported():
    expected = {"T::a": run.parse_expectation("a", "pass"),
                "T::b": run.parse_expectation("b", "refused: does not provide foo"),
                "T::c": run.parse_expectation("c", {"expect": "gap: why", "match": "same dtype"}),
                "T::gone": run.parse_expectation("gone", "pass")}
    results = {"T::a": run.Result("failed", "E: x"), "T::b": run.Result("failed", "does not provide foo"),
               "T::c": run.Result("passed"), "T::new": run.Result("passed")}
    found = {test: got for test, _, got in run.compare("f.py", expected, run.FileRun(results))}
    assert found == {"f.py::T::a": "failed: E: x", "f.py::T::c": "passed", "f.py::T::gone": "not run",
                     "f.py::T::new": "passed"}


def test_a_flaky_gap_may_pass_or_fail_as_it_says_but_not_otherwise():
    expect = run.parse_expectation("f", {"expect": "gap: capture", "match": "CANN", "flaky": True})
    assert run.agrees(expect, run.Result("passed")) and run.agrees(expect, run.Result("failed", "not defined by CANN"))
    assert not run.agrees(expect, run.Result("failed", "KeyError")) and not run.agrees(expect, run.Result("timeout"))


def test_a_file_that_does_not_import_is_one_difference():
    expected = {"T::a": run.parse_expectation("a", "pass")}
    results = {run.COLLECTION: run.Result("error", "RuntimeError: Failed to load the backend extension")}
    (test, _, got), = run.compare("f.py", expected, run.FileRun(results))
    assert test == "f.py::*" and "does not import" in got and "backend extension" in got


def test_without_the_smoke_folder_the_tier_is_skipped_with_its_reason(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("TORCHAIR_SMOKE_DIR", raising=False)
    monkeypatch.setenv("TORCHAIR_SMOKE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("TORCHAIR_SMOKE_REPO_URL", str(tmp_path / "no-such-repository"))
    assert run.main([]) == 2
    assert run.main(["--allow-offline"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 and all(line.startswith("torchair-smoke: skipped: ") and "git fetch" in line
                                   for line in lines), lines


def test_save_and_print_npugraph_tensor_and_memory_snapshot(tmp_path):
    out = _ok("""
        import os, torch, torch_npu
        x = torch.arange(4.).npu(1)
        torch_npu.save_npugraph_tensor(x, save_path="a.pt")
        torch_npu.save_npugraph_tensor(x, save_path="a")                      # .pt added, the count goes on
        torch.ops.npu.save_npugraph_tensor([x.cpu(), x.cpu()], save_path="l.pt", overwrite=True)
        torch_npu.print_npugraph_tensor(x.cpu(), tensor_name="x")
        g, s = torch.npu.NPUGraph(), x.clone()
        with torch.npu.graph(g):                                               # a capture saves nothing...
            torch_npu.save_npugraph_tensor(s * 2, save_path="g.pt")
        g.replay()                                                             # ... each replay saves
        s.fill_(5.0)
        g.replay()
        assert torch.npu.memory_snapshot() == []
        print(sorted(f for f in os.listdir(".") if f.endswith(".pt")))
        print(torch.load("a_device_1_1.pt").tolist(), torch.load("g_device_1_1.pt").tolist(), len(torch.load("l.pt")))
    """, tmp_path)
    lines = out.splitlines()
    assert lines[0] == "x=tensor([0., 1., 2., 3.]), shape=(4,), dtype=torch.float32", out
    assert lines[1] == str(["a_device_1_0.pt", "a_device_1_1.pt", "g_device_1_0.pt", "g_device_1_1.pt", "l.pt"])
    assert lines[2] == "[0.0, 1.0, 2.0, 3.0] [10.0, 10.0, 10.0, 10.0] 2"

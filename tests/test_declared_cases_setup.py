"""The declared-cases tool's --setup (what a setup file defines stays for the run) and its count of the
cases declared on the npu converters (torch_npu's ops), issue 23 item 5."""
import gc
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from op_plugin._tools.declared.cases import CaseResult, enumerate_cases, import_setup, run_case
from op_plugin._tools.declared.report import render_page, summarize, summary_text

ROOT = Path(__file__).resolve().parents[1]
SETUP = str(Path(__file__).parent / "data" / "declared_setup_fragment.py")


def test_a_setup_files_fragment_ops_survive_garbage_collection():
    import_setup(SETUP)  # as the CLI and its workers call it: the returned module is not kept
    gc.collect()
    assert torch.equal(torch.ops.declsetup.scaled_add(torch.ones(2), torch.ones(2)), torch.full((2,), 3.0))
    module = import_setup(SETUP)
    assert import_setup(SETUP) is module  # once per run
    assert sys.modules[module.__name__] is module
    case = enumerate_cases(["declsetup."])
    assert [c.case_id for c in case] == ["declsetup.scaled_add.default#1"]
    result = run_case(case[0])
    assert result.cls == "pass", result.reason
    assert result.ge_graphs >= 1  # compiled through TorchAir and the GE executor


def test_the_cli_runs_a_setup_files_cases_in_its_workers(tmp_path):
    out = tmp_path / "run.json"
    done = subprocess.run([sys.executable, "-m", "op_plugin.cli", "declared-cases", "--setup", SETUP,
                           "--prefix", "declsetup.", "--prefix", "npu.npu_gelu.default", "--workers", "1",
                           "--json", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    cases = {c["case_id"]: c["cls"] for c in json.loads(out.read_text())["cases"]}
    assert cases == {"declsetup.scaled_add.default#1": "pass", "npu.npu_gelu.default#1": "pass",
                     "npu.npu_gelu.default#2": "pass"}
    assert "npu converters (torch_npu's ops): 2 of 2 cases pass (100.0%" in done.stdout


@pytest.mark.parametrize("case_id", ["npu.npu_rms_norm.default#1", "npu.npu_gelu.default#2", "npu.npu_linear.default#1",
                                     "npu.npu_rms_norm_backward.default#1",
                                     "npu.npu_dtype_cast.default#1"])
def test_npu_converter_cases_run(case_id):
    (case,) = [c for c in enumerate_cases([case_id.split("#")[0] + "#"]) if c.case_id == case_id]
    result = run_case(case)
    assert result.cls == "pass", result.reason
    assert result.ge_graphs >= 1


def test_torchairs_swiglu_backward_cases_are_refused_by_eager():
    """TorchAir declares npu_swiglu_backward(F32(2, 2), F32(2, 2)): a grad the shape of x, not of SwiGlu's
    output (half of x); CANN's SwiGluGrad defines no such input, so eager refuses it (not a pass)."""
    for case in enumerate_cases(["npu.npu_swiglu_backward.default#"]):
        result = run_case(case)
        assert result.cls == "eager-unsupported" and "half of x" in result.reason, result.reason


def test_the_npu_converters_cases_are_enumerated_and_counted_apart():
    npu_cases = [c for c in enumerate_cases(["npu."])]
    assert len(npu_cases) >= 108  # TorchAir's 108, plus op_plugin's own on npu ops
    results = [CaseResult("npu.a.default#1", "pass"), CaseResult("npu.a.default#2", "eager-unsupported"),
               CaseResult("npu.b.default#1", "numeric"), CaseResult("npu.b.default#2", "pass"),
               CaseResult("aten.add.Tensor#1", "pass"), CaseResult("aten.mul.Tensor#1", "eager-unsupported")]
    summary = summarize(results)
    assert summary["npu"] == {"cases": 4, "passed": 2, "pass_rate": 0.5,
                              "by_class": {"pass": 2, "numeric": 1, "eager-unsupported": 1},
                              "invalid_cases": [], "too_large": 0, "valid": 4, "valid_pass_rate": 0.5}
    assert (summary["passed"], summary["eager_runnable"]) == (3, 4)  # the overall rate is unchanged
    assert "npu converters (torch_npu's ops): 2 of 4 cases pass (50.0%" in summary_text(summary)
    assert "the 4 cases declared on the converters of torch_npu's ops" in render_page(results, summary)

"""The declared-cases tool (op_plugin/_tools/declared_*.py): enumeration, classification, guarded workers.

The full run is a CI step, not a test here: `op-plugin declared-cases --check
tests/data/declared_cases_known_failures.txt` (see docs/declared-cases.md).
"""
from pathlib import Path

import math

import pytest

import torch

from op_plugin._tools.declared.cases import CaseResult, build_inputs, enumerate_cases, run_case
from op_plugin._tools.declared.pool import run_cases
from op_plugin._tools.declared.report import (
    check_known,
    read_known,
    render_page,
    summarize,
    write_known,
)

PLANTED = str(Path(__file__).parent / "data" / "declared_planted.py")


def test_enumeration_finds_torchairs_declared_cases():
    cases = enumerate_cases()
    ids = [c.case_id for c in cases]
    assert len(ids) == len(set(ids))
    torchairs = [c for c in cases if "#op_plugin-" not in c.case_id]
    # 919 with TorchAir of torch-npu 2.13.0: 811 on aten/prims/operator converters, 108 on npu converters
    # (those register once every op of the wheel's schema list is defined, issue 23)
    assert 880 <= len(torchairs) <= 1000, len(torchairs)
    assert len([c for c in torchairs if c.case_id.startswith("npu.")]) == 108
    assert len({c.converter for c in cases}) >= 250
    assert "aten.add.Tensor#1" in ids and "npu.npu_rms_norm.default#1" in ids
    assert all(c.case_id.startswith("aten.add") for c in enumerate_cases(["aten.add"]))


def test_op_plugins_own_converters_declare_cases_beside_torchairs():
    """op_plugin's converters (op_plugin/_lowering/registry.py) declare cases in TorchAir's form;
    they are listed after TorchAir's cases of the same target and run alike."""
    from op_plugin._lowering.registry import entries

    own = [c for c in enumerate_cases() if "#op_plugin-" in c.case_id]
    assert len(own) >= 40
    sizes_only = {torch.sym_max, torch.sym_min, math.trunc}  # size arithmetic: no graph of a case holds them
    # collectives run only with a process group: tested on gloo ranks in tests/distributed, not as cases
    collectives = "op_plugin._lowering.collective_converters"
    # the RNG-state higher-order ops activation checkpointing leaves in a graph: dynamo refuses a call of them in
    # user code ("unsupported HigherOrderOperator"), so no case can; tested in tests/test_checkpoint_rng.py
    from torch._prims.rng_prims import run_and_save_rng_state, run_with_rng_state
    checkpoint_only = {run_and_save_rng_state, run_with_rng_state}
    # refusals of arguments TorchAir drops, for converters no case can run here: TorchAir lowers npu_add_quant_gmm
    # only for Ascend 950, the all-to-all quantised matmuls are collectives (tests/test_torchair_scan_corrections.py)
    npu = torch.ops.npu
    ascend_only = {npu.npu_add_quant_gmm.default, npu.npu_add_quant_gmm_.default,
                   npu.npu_all_to_all_quant_matmul.default, npu.npu_quant_matmul_all_to_all.default}
    ops = {target for e in entries() if e.when != "library" and e.fn.__module__ != collectives
           for target in e.targets} - sizes_only - ascend_only
    targets = {c.target for c in own}
    assert ops - checkpoint_only <= targets
    assert checkpoint_only <= ops and not checkpoint_only & targets  # exempt only while op_plugin lowers them case-less
    # beyond the aten ones: library converters whose op exists in this process (prims::fma, from inductor)
    assert {str(t).replace(".default", "").replace(".", "::") for t in targets - ops} <= {
        name for e in entries() if e.when == "library" for name in e.targets}
    assert [c.case_id for c in enumerate_cases(["aten.eye.m"])] == [f"aten.eye.m#op_plugin-{n}" for n in (1, 2, 3)]
    gelu = [c.case_id for c in enumerate_cases(["aten.gelu.default#"])]
    own_gelu = [f"aten.gelu.default#op_plugin-{n}" for n in (1, 2, 3)]
    assert gelu == ["aten.gelu.default#1", "aten.gelu.default#2", *own_gelu]  # TorchAir's first
    (_, index, values), _ = build_inputs(enumerate_cases(["aten.index_put.default#op_plugin-1"])[0])
    assert index[0].tolist() == [0, 2, 4] and index[0].dtype == torch.int64 and values.shape == (3, 4)
    result = run_case(enumerate_cases(["aten.eye.m#op_plugin-1"])[0])
    assert result.cls == "pass", result
    assert "Equal" in result.ge_types and "Eye" not in result.ge_types  # op_plugin's lowering of eye


def test_inputs_follow_the_specs():
    case = next(c for c in enumerate_cases(["aten.bernoulli.Tensor#1"]))
    (x, p), _ = build_inputs(case)
    assert x.dtype == p.dtype == torch.float32 and x.shape == p.shape == (4, 16)
    assert 0 <= p.min() and p.max() <= 1  # value_range=(0, 1)
    again, _ = build_inputs(case)
    assert torch.equal(again[0], x)  # seeded from the case id
    rand = next(c for c in enumerate_cases(["aten.rand.default#1"]))
    assert build_inputs(rand)[1]["device"] == "cpu"  # device="npu" is the host here


def test_a_case_whose_inputs_exceed_the_bound_is_refused_unrun(monkeypatch):
    from op_plugin._tools.declared import cases as declared_cases

    case = enumerate_cases(["npu.npu_dynamic_quant.default#1"])[0]
    assert declared_cases.input_bytes(case) == 64 * 16384 * 16384 * 2  # TorchAir's F16(64, 16384, 16384)
    assert declared_cases._too_large(case).cls == "too-large"  # (run_case checks it before allocating)
    small = enumerate_cases(["aten.add.Tensor#1"])[0]
    monkeypatch.setattr(declared_cases, "INPUT_BYTES_LIMIT", declared_cases.input_bytes(small) - 1)
    result = run_case(small)
    assert result.cls == "too-large" and "GiB" in result.reason and "aten.add.Tensor" in result.reason
    monkeypatch.setattr(declared_cases, "INPUT_BYTES_LIMIT", declared_cases.input_bytes(small))
    assert run_case(small).cls == "pass"
    as_list = enumerate_cases(["aten.sum.dim_IntList#4"])[0]   # I32([]): the shape given as one list
    assert declared_cases.input_bytes(as_list) == 4 and run_case(as_list).cls == "pass"


def test_a_passing_case_passes_in_process():
    result = run_case(enumerate_cases(["aten.add.Tensor#1"])[0])
    assert result.cls == "pass", result
    assert result.ge_graphs == 1 and "Add" in result.ge_types


def test_numeric_mismatch_reports_error_and_tolerance():
    from op_plugin._tools.declared.compare import compare

    result = CaseResult("x#1", "pass")
    want = torch.ones(3, dtype=torch.float16)
    compare(result, (want + 0.01,), (want,))
    assert result.cls == "numeric" and result.tolerance == {"rtol": 2e-3, "atol": 1e-3}
    assert result.max_abs_err == pytest.approx(0.0098, abs=1e-3)
    result = CaseResult("x#1", "pass")
    compare(result, (torch.ones(3, dtype=torch.int32),), (torch.ones(3),))
    assert result.cls == "shape-dtype"


@pytest.fixture(scope="module")
def planted_run():
    ids = ["aten.add.Tensor#1", "aten.mul.Tensor#1", "planted.crash#1", "aten.add.Tensor#2", "planted.hang#1",
           "aten.add.Tensor#3"]
    return {r.case_id: r for r in run_cases(ids, workers=1, timeout=20, setup=[PLANTED])}


def test_pool_classifies_each_planted_case(planted_run):
    assert planted_run["aten.add.Tensor#1"].cls == "pass"
    missing = planted_run["aten.mul.Tensor#1"]
    assert (missing.cls, missing.ge_type) == ("missing-kernel", "Mul"), missing


def test_a_crash_costs_one_case(planted_run):
    crash = planted_run["planted.crash#1"]
    assert crash.cls == "crash" and "exit code 3" in crash.reason, crash
    assert planted_run["aten.add.Tensor#2"].cls == "pass"  # the next case ran in a fresh worker


def test_a_hang_costs_one_case(planted_run):
    hang = planted_run["planted.hang#1"]
    assert hang.cls == "timeout" and hang.seconds >= 20, hang
    assert planted_run["aten.add.Tensor#3"].cls == "pass"


def test_known_failures_check(tmp_path):
    results = [CaseResult("a#1", "pass"), CaseResult("b#1", "missing-kernel", "no CPU kernel for GE type Foo", "Foo"),
               CaseResult("c#1", "numeric", "output 0: max abs err 1"), CaseResult("d#1", "eager-unsupported", "x")]
    path = tmp_path / "known.txt"
    assert write_known(path, results) == 2
    known = read_known(path)
    assert set(known) == {"b#1", "c#1"} and known["b#1"].reason == "no CPU kernel for GE type Foo"
    assert check_known(results, known, all_cases_ran=True).ok
    now = [CaseResult("a#1", "timeout", "no result"), CaseResult("b#1", "pass"), CaseResult("c#1", "crash", "died"),
           CaseResult("d#1", "eager-unsupported", "x")]
    outcome = check_known(now, known, all_cases_ran=True)
    assert not outcome.ok and [r.case_id for r in outcome.regressions] == ["a#1"]
    assert [k.case_id for k in outcome.stale] == ["b#1"]
    assert [k.case_id for k, _ in outcome.changed] == ["c#1"]
    assert "REGRESSION a#1" in outcome.text() and "b#1 now passes" in outcome.text()
    known["c#1"].reason = "by design: a reason written by hand"
    write_known(path, [CaseResult("c#1", "numeric", "output 0: max abs err 2"), CaseResult("e#1", "crash", "x")], known)
    rewritten = read_known(path)
    assert set(rewritten) == {"c#1", "e#1"} and rewritten["c#1"].reason == "by design: a reason written by hand"
    summary = summarize(now)
    assert (summary["passed"], summary["eager_runnable"]) == (1, 3)
    page = render_page(now, summary)
    assert "1 of 3 eager-runnable cases pass" in page and "`c#1` | crash | died" in page


def test_an_npu_case_eager_cannot_run_must_be_listed_with_its_reason(tmp_path):
    results = [CaseResult("npu.op.default#1", "eager-unsupported", "NotImplementedError: no CPU kernel"),
               CaseResult("aten.x.default#1", "eager-unsupported", "eager fails on the CPU")]
    outcome = check_known(results, {}, all_cases_ran=True)
    assert [r.case_id for r in outcome.regressions] == ["npu.op.default#1"]   # the aten one is not counted
    path = tmp_path / "known.txt"
    assert write_known(path, results) == 1
    known = read_known(path)
    assert known["npu.op.default#1"].cls == "eager-unsupported"
    known["npu.op.default#1"].reason = "TorchAir's case is outside CANN's contract"
    outcome = check_known(results, known, all_cases_ran=True)
    assert outcome.ok and not outcome.stale and not outcome.changed
    page = render_page(results, summarize(results), known)
    assert ("| `npu.op.default#1` | NotImplementedError: no CPU kernel | TorchAir's case is outside CANN's "
            "contract |") in page
    outcome = check_known([CaseResult("npu.op.default#1", "pass")], known, all_cases_ran=True)
    assert [k.case_id for k in outcome.stale] == ["npu.op.default#1"]


def test_an_invalid_case_verdict_is_kept_and_left_out_of_the_valid_rate_only(tmp_path):
    results = [CaseResult("npu.a.default#1", "pass"), CaseResult("npu.b.default#1", "eager-unsupported", "refused"),
               CaseResult("npu.c.default#1", "kernel-error", "TypeError in TorchAir's converter"),
               CaseResult("npu.d.default#1", "too-large", "64 GiB"), CaseResult("npu.e.default#1", "numeric", "off")]
    path = tmp_path / "known.txt"
    path.write_text("npu.b.default#1 invalid-case grad has x's shape, the doc says half of it\n"
                    "npu.c.default#1 invalid-case TorchAir's converter raises on dst_type=1 on every host\n"
                    "npu.d.default#1 too-large 64 GiB\nnpu.e.default#1 numeric off\n")
    known = read_known(path)
    outcome = check_known(results, known, all_cases_ran=True)
    assert outcome.ok and not outcome.changed and not outcome.stale   # a verdict accepts any failing class
    npu = summarize(results, known)["npu"]
    assert (npu["passed"], npu["cases"], npu["pass_rate"]) == (1, 5, 0.2)   # the all-cases rate is unchanged
    assert npu["invalid_cases"] == ["npu.b.default#1", "npu.c.default#1"] and npu["too_large"] == 1
    assert (npu["valid"], npu["valid_pass_rate"]) == (2, 0.5)
    assert summarize(results)["npu"]["valid"] == 4   # without the file no case is called invalid
    write_known(path, results, known)
    assert read_known(path)["npu.c.default#1"].cls == "invalid-case"   # regeneration keeps the verdict
    outcome = check_known([CaseResult("npu.b.default#1", "pass")], known, all_cases_ran=False)
    assert [k.case_id for k in outcome.stale] == ["npu.b.default#1"] and "check which is wrong" in outcome.text()


def test_known_failures_file_format(tmp_path):
    path = tmp_path / "known.txt"
    path.write_text("# comment\nx#1 bogus-class why\n")
    with pytest.raises(ValueError, match="known.txt:2"):
        read_known(path)


def test_cli_check_fails_on_a_regression_and_warns_about_stale_entries(tmp_path, capsys):
    from op_plugin.cli import main

    known = tmp_path / "known.txt"
    known.write_text("aten.mul.Tensor#1 missing-kernel no CPU kernel for GE type Mul\n"
                     "aten.add.Tensor#1 numeric an old failure\n")
    out_json, page = tmp_path / "r.json", tmp_path / "page.md"
    status = main(["declared-cases", "--prefix", "aten.mul.Tensor#1", "--prefix", "aten.add.Tensor#1", "--prefix",
                   "planted.crash", "--workers", "1", "--setup", PLANTED, "--check", str(known),
                   "--json", str(out_json), "--markdown", str(page)])
    printed = capsys.readouterr().out
    assert status == 1
    assert "REGRESSION planted.crash#1: crash" in printed
    assert "aten.add.Tensor#1 now passes" in printed and "REGRESSION aten.mul" not in printed
    assert "1 of 3 eager-runnable declared cases pass" in printed
    assert "declared-cases" in page.read_text() and '"missing_ge_types"' in out_json.read_text()


def test_cli_reports_on_a_saved_run(tmp_path, capsys):
    import json

    from op_plugin.cli import main

    saved = tmp_path / "r.json"
    cases = [CaseResult("a#1", "pass").as_dict(), CaseResult("b#1", "numeric", "by 1").as_dict()]
    saved.write_text(json.dumps({"summary": {}, "cases": cases}))
    known = tmp_path / "known.txt"
    known.write_text("b#1 numeric by design: a note\n")
    page = tmp_path / "page.md"
    assert main(["declared-cases", "--from-json", str(saved), "--check", str(known), "--markdown", str(page)]) == 0
    assert "1 of 2 eager-runnable declared cases pass" in capsys.readouterr().out
    assert "| `b#1` | numeric | by 1 | by design: a note |" in page.read_text()

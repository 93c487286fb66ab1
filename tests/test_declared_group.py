"""Declared cases of ops that take a communicator name run in a gloo world (op_plugin/_tools/declared/group.py):
one rank, or the case's world_size ranks (forked peers); the case's placeholder name is replaced by the group's,
the group exists only for the case, and a rank that fails fails the case naming the rank."""
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

from op_plugin._tools.declared import group as declared_group
from op_plugin._tools.declared.cases import build_inputs, enumerate_cases, run_case
from op_plugin._tools.declared.pool import run_cases


def test_group_arguments_are_the_ops_str_hcom_and_group_arguments():
    from op_plugin._simulator import load_simulated_torchair

    load_simulated_torchair()  # defines torch_npu's ops on this host
    assert declared_group.group_arguments(torch.ops.npu.npu_mm_all_reduce_base.default) == ("hcom",)
    assert declared_group.group_arguments(torch.ops.aten.add.Tensor) == ()
    assert not declared_group.needs_group(lambda x: x)


def test_the_placeholder_name_becomes_the_groups_name_only_inside_the_group():
    case = enumerate_cases(["npu.npu_mm_all_reduce_base.default#1"])[0]
    args, _ = build_inputs(case)
    assert args[2] == "group"  # TorchAir's placeholder, outside any group
    with declared_group.one_rank_group() as name:
        assert dist.is_initialized() and dist.get_world_size() == 1
        args, _ = build_inputs(case)
        assert args[2] == name == "tag=ptd:0;rank_list=0"
    assert not dist.is_initialized()
    case = enumerate_cases(["npu.npu_all_gather_quant_mm.default#1"])[0]
    with declared_group.one_rank_group() as name:
        assert build_inputs(case)[1]["hcom"] == name  # given by keyword
    assert not dist.is_initialized()


def test_mc2_declared_cases_run_in_a_one_rank_group():
    results = {r.case_id: r for r in (run_case(c) for c in enumerate_cases(["npu.npu_mm_all_reduce_base.default#"]))}
    for case_id in ("npu.npu_mm_all_reduce_base.default#1", "npu.npu_mm_all_reduce_base.default#2"):
        assert results[case_id].cls == "pass", results[case_id]
        assert results[case_id].ge_types == ["MatmulAllReduce"]
    assert not dist.is_initialized()  # torn down after each case


def test_a_case_declaring_world_size_8_runs_on_8_ranks():
    cases = {c.case_id: c for c in enumerate_cases(["npu.npu_quant_mm_reduce_scatter.default#1",
                                                    "npu.npu_mm_all_reduce_base.default#1"])}
    assert declared_group.world_size(cases["npu.npu_quant_mm_reduce_scatter.default#1"]) == 8
    assert declared_group.world_size(cases["npu.npu_mm_all_reduce_base.default#1"]) == 1
    result = run_case(cases["npu.npu_quant_mm_reduce_scatter.default#1"])
    assert result.cls == "pass", result
    assert result.ge_types == ["MatmulReduceScatterV2"]
    assert not dist.is_initialized()


def test_a_rank_that_fails_fails_the_case_naming_the_rank(monkeypatch):
    """The peers are forked after the patch: rank 3 alone reports a failure, and the case carries it."""
    from op_plugin._tools.declared import cases as declared_cases

    original = declared_cases._run_case

    def rank_3_differs(case):
        result = original(case)
        if dist.get_rank() == 3:
            result.cls, result.reason = "numeric", "planted on rank 3"
        return result

    monkeypatch.setattr(declared_cases, "_run_case", rank_3_differs)
    result = run_case(enumerate_cases(["npu.npu_quant_mm_reduce_scatter.default#1"])[0])
    assert (result.cls, result.reason) == ("numeric", "rank 3: planted on rank 3"), result


def test_more_ranks_than_the_tool_runs_are_refused():
    from op_plugin._tools.declared.cases import DeclaredCase, _Support

    case = enumerate_cases(["npu.npu_quant_mm_reduce_scatter.default#1"])[0]
    wide = DeclaredCase(case.case_id, case.target, _Support(case.support.args, {**case.support.kwargs,
                                                                                 "world_size": 16}))
    with pytest.raises(RuntimeError, match="world_size=16; the tool runs at most 8 ranks"):
        run_case(wide)


def test_the_guarded_worker_runs_a_group_case():
    [result] = run_cases(["npu.npu_mm_all_reduce_base.default#1"], workers=1)
    assert result.cls == "pass", result


def test_a_case_on_n_ranks_gets_n_times_the_timeout_and_the_pool_applies_it():
    cases = enumerate_cases(["npu.npu_all_gather_quant_mm", "npu.npu_mm_all_reduce_base", "npu.npu_gelu"])
    assert declared_group.rank_scaled_timeouts(cases, 100) == {"npu.npu_all_gather_quant_mm.default#1": 800}
    planted = str(Path(__file__).parent / "data" / "declared_planted.py")
    [result] = run_cases(["planted.hang#1"], workers=1, timeout=600, setup=[planted],
                         case_timeouts={"planted.hang#1": 2})
    assert result.cls == "timeout" and "within 2 s" in result.reason

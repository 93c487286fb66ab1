"""Smoke test of bench/: every benchmark module runs in its --quick configuration and reports the
figure keys the report is built from. No timing is asserted (figures from --quick are meaningless).

The modules run as subprocesses, two at a time (each is a fresh interpreter anyway).
"""
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # bench/ is not installed; `python -m pytest` from the root has it already
    sys.path.insert(0, str(ROOT))

PARALLEL = 2  # two at a time: the machine has 2 cores and others may be running benchmarks
TIMEOUT_S = 240

EXPECTED_FIGURES = {
    "compile_time": ["aot_eager.L1.first_call_s", "npugraph.L1.first_call_s", "npugraph.L1.dynamo_s",
                     "npugraph.L1.aot_s", "npugraph.L1.torchair_lowering_s", "npugraph.L1.ge_load_s",
                     "npugraph.L1.graphplan_compile_s", "ratio_first_call.L1", "ratio_first_call_cold.L1",
                     "import_torch_s", "simulator_load_s"],
    "lowering_scaling": ["lowering_us_per_node.N20", "lowering_us_per_node.N60", "backend_us_per_node.N60",
                         "first_run_us_per_node.N60", "ratio_vs_N20.N60", "fit_marginal_us_per_node",
                         "max_deviation_vs_base"],
    "steady_state": ["eager_ms.L1.B2xS8", "npugraph_ms.L1.B2xS8", "aot_eager_ms.L1.B2xS8",
                     "ratio_npugraph_vs_eager.L1.B2xS8"],
    "recompiles": ["compiles.dynamic=True.npu_vector_add-0", "compiles.default.npu_vector_add-0",
                   "recompiles_after_first.dynamic=True.decoder_model_L1", "max_recompiles_after_first.dynamic=True",
                   "cases_with_recompiles.default"],
    "dispatch": ["yaml_op_us", "plain_custom_op_us", "reference_direct_us", "ratio_yaml_vs_plain"],
    "zoo_steady": ["npugraph_vs_eager.example:bert_layer.B2xL7.static.T1",
                   "npugraph_vs_aot_eager.example:bert_layer.B2xL7.dynamic.T1"],
    "registration": ["yaml_s.N5", "torch_library_s.N5", "ratio_yaml_vs_torch_library.N5",
                     "yaml_rss_kib_per_op.N5", "yaml_tracemalloc_kib_per_op.N5"],
    "npu_tiers": ["npugraph_over_eager.w8a8:bfloat16.T1", "npugraph_over_aot_eager.w8a8:bfloat16.T1"],
    "distributed_tier": ["npugraph_over_eager", "npugraph_over_aot_eager"],
    "npu_eager": ["eager_npu_over_cpu.example:bert_layer.B2xL7", "npugraph_npu_over_cpu.example:bert_layer.B2xL7"],
    "startup": ["import_torch_s", "op_plugin_over_torch_s", "op_plugin_over_torch_cpu_s",
                "cli_first_line_after_torch_s.validate", "cli_first_stdout_after_torch_s.--help",
                "cli_first_stdout_after_torch_worst_s", "cli_first_stdout_after_torch_cpu_worst_s"],
}


@pytest.fixture(scope="module")
def quick_results(tmp_path_factory, worker_id):
    """The quick runs, made once for the whole session: under pytest-xdist the first worker to get here runs them
    and the others read its results (xdist's documented recipe: a file lock in the workers' shared temp folder),
    instead of each worker running all of them again (74 s of both cores each)."""
    if worker_id == "master":  # not under xdist
        return _run_quick(tmp_path_factory.mktemp("bench"))
    from filelock import FileLock

    shared = tmp_path_factory.getbasetemp().parent / "bench_quick_results"
    with FileLock(str(shared) + ".lock"):
        done = shared / "results.json"
        if done.is_file():
            return json.loads(done.read_text())
        shared.mkdir(exist_ok=True)
        results = _run_quick(shared)
        done.write_text(json.dumps(results))
        return results


def _run_quick(folder: Path) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    waiting, running, results = list(EXPECTED_FIGURES), {}, {}
    try:
        while waiting or running:
            while waiting and len(running) < PARALLEL:
                name = waiting.pop(0)
                log = open(folder / f"{name}.log", "w")
                cmd = [sys.executable, "-m", f"bench.{name}", "--quick", "--json", str(folder / f"{name}.json")]
                running[name] = (subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT),
                                 log, time.monotonic())
            for name, (proc, log, started) in list(running.items()):
                if proc.poll() is None and time.monotonic() - started < TIMEOUT_S:
                    continue
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
                log.close()
                del running[name]
                output = (folder / f"{name}.log").read_text()
                assert proc.returncode == 0, f"bench.{name} --quick failed:\n{output[-4000:]}"
                results[name] = json.loads((folder / f"{name}.json").read_text())
            time.sleep(0.2)
    finally:
        for proc, log, _ in running.values():
            proc.kill()
            log.close()
    return results


@pytest.mark.parametrize("name", sorted(EXPECTED_FIGURES))
def test_quick_run_reports_its_figures(quick_results, name):
    result = quick_results[name]
    assert result["name"] == name
    missing = [key for key in EXPECTED_FIGURES[name] if key not in result["figures"]]
    assert not missing, f"bench.{name}: missing figures {missing}"
    assert all(isinstance(v, (int, float)) for v in result["figures"].values())
    assert result["tables"] and all(len(row) == len(t["columns"]) for t in result["tables"] for row in t["rows"])
    assert result["goals"] and all({"goal", "value", "target", "met"} <= set(g) for g in result["goals"])


def test_report_renders(quick_results, tmp_path):
    from bench._common import machine_info
    from bench._report import render_markdown

    results = [quick_results[name] for name in EXPECTED_FIGURES]
    plots = {}
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        pass
    else:
        from bench.lowering_scaling import plot

        plot(quick_results["lowering_scaling"], tmp_path / "lowering.png")
        assert (tmp_path / "lowering.png").stat().st_size > 0
        plots["lowering_scaling"] = "lowering.png"
    text = render_markdown(results, machine=machine_info(), versions={"python": sys.version.split()[0]},
                           plots=plots, wall_s=1.0, command="test")
    assert "## Goals" in text and text.count("\n## ") >= 2 + len(results)
    for result in results:
        assert result["title"] in text


def test_suite_time_reads_a_steps_pytest_summary_and_slowest_tests(tmp_path):
    """bench.suite_time times CI's steps in a fresh clone (too long for a smoke test); its reading of a
    step's output is checked on a stand-in step."""
    from bench import suite_time

    lines = ["============ slowest 8 durations ============", "12.50s call     tests/a.py::test_x",
             "0.20s setup    tests/b.py::test_y", "========== 3 passed, 1 skipped in 20.00s =========="]
    step = suite_time._run_step("stand-in", [sys.executable, "-c", f"print({chr(10).join(lines)!r})"], tmp_path)
    assert step["rc"] == 0 and step["summary"] == "3 passed, 1 skipped"
    assert step["slowest"] == ["12 s call tests/a.py::test_x"]   # under a second: not a reason
    failing = suite_time._run_step("failing", [sys.executable, "-c", "raise SystemExit(3)"], tmp_path)
    assert failing["rc"] == 3
    # the steps timed are .ci/run's own, in its order, after the set-up
    assert [name for name, _ in suite_time.STEPS] == ["setup", "make test", "make virtual-npu", "make declared-cases",
                                                     "make distributed", "make zoo", "make zoo-npu"]


def test_startup_times_each_streams_first_line_from_spawn():
    """bench.startup's clocks, against a stand-in child: stderr at once, then 0.3 s of sleep and 0.3 s of busy CPU
    (the oracle: time.sleep and the child's own process_time) before its stdout line."""
    from bench import startup

    code = ("import sys, time; print('progress', file=sys.stderr, flush=True); time.sleep(0.3); "
            "end = time.process_time() + 0.3\nwhile time.process_time() < end: pass\n"
            f"print({startup.MARK!r} + '[\"torchair\"]', flush=True)")
    sample = startup.spawn("stand-in", [sys.executable, "-c", code])
    assert sample["stream"] == "stderr" and sample["first_line"] < sample["first_stdout"]
    assert sample["first_stdout"] >= 0.6 and sample["loaded"] == ["torchair"]
    assert 0.3 - 0.02 <= sample["cpu_first_stdout"] <= sample["cpu_to_exit"] + 0.02  # /proc ticks: 10 ms
    with pytest.raises(RuntimeError, match="stand-in .* exited with 3"):
        startup.spawn("stand-in", [sys.executable, "-c", "print('x'); raise SystemExit(3)"])
    # -X importtime's rows after a top-level import finished: only the later import's modules
    profile = startup.import_time_profile("stand-in", [sys.executable, "-c", "import json; import csv"], after="json")
    names = [line.split()[-1] for line in profile.splitlines()[1:]]
    assert "csv" in names and "json" not in names and "json.decoder" not in names

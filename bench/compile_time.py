"""1. First-call compile time: backend="npugraph" vs backend="aot_eager" on the decoder model.

The model is op_plugin's DemoBlock stacked 2, 6 and 12 times (bench/_model.py), compiled with
torch.compile's defaults (static shapes on the first call), batch 2, sequence 8, under no_grad.
Every sample is a fresh interpreter (start-up and first-use costs matter here), and the two
backends alternate sample by sample. A child process times:

* import torch, import op_plugin, and for npugraph the simulator load (`load_torchair()`, the
  import of TorchAir from the unpacked torch-npu wheel), each once;
* the first call of the compiled model (trace + compile + first run), split with torch's own
  counters (`torch._dynamo.utils.compilation_time_metrics`): dynamo = `_compile.compile_inner`
  minus `OutputGraph.call_user_compiler`; AOT autograd = `create_aot_dispatcher_function` minus
  the TorchAir lowering that runs inside it; backend set-up = the rest of call_user_compiler;
* for npugraph, by wrapping (in the child only) TorchAir's converter phase
  `_NpuFxCompiler._gen_compiled_gm` (FX passes, converters, GE graph passes), TorchAir's
  `TorchNpuGraph.load` (serialise the GE graph, the simulator parses it), the executor's
  `compile_graph` (GraphPlan) and the first `GraphPlan.run`.

"first call" is measured after the imports, so for npugraph it excludes the simulator load;
"cold" adds the simulator load (what a fresh process pays on its first npugraph compile).
"""
from __future__ import annotations

if __name__ == "__main__" and not __package__:  # `python bench/compile_time.py`
    import pathlib, sys  # noqa: E401
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))
    from bench._common import script_shim
    script_shim(__file__, "compile_time")
    raise SystemExit

import collections

from ._common import cli, goal, median, perf, profile_seconds, run_child, top_profile

FULL = {"layers": [2, 6, 12], "repeats": 3}
QUICK = {"layers": [1], "repeats": 1}
BACKENDS = ("aot_eager", "npugraph")
GOAL = 1.15
PHASES = ("dynamo", "aot", "backend_setup", "torchair_lowering", "ge_load", "graphplan_compile", "first_run", "other")
_FX, _GE = "torchair/npu_fx_compiler.py", "torchair/_ge_concrete_graph/fx2ge_converter.py"
_EXECUTOR, _LOWERING = "_simulator/interpreter/executor/plan.py", "op_plugin/_lowering/install.py"
_CUSTOM_OPS = "_simulator/hosting/custom_ops.py"
# Parts of the npugraph first call in the profile (indented rows nest in the row above).
WHERE = {
    "TorchAir lowering (_NpuFxCompiler._gen_compiled_gm)": [(_FX, "_gen_compiled_gm")],
    "  deep copy of the FX graph": [("/copy.py", "deepcopy")],
    "  FX passes (_optimize_fx)": [(_FX, "_optimize_fx")],
    "  FX interpreter + converters (_NpuGraphConverter.run)": [(_FX, "run")],
    "  GE graph passes (optimize_graph_without_runtime)": [(_GE, "optimize_graph_without_runtime")],
    "npugraph backend set-up (get_npu_backend, install_converters)": [
        ("torchair/npu_fx_compiler.py", "get_npu_backend"),
        (_LOWERING, "install_converters")],
    "first GraphPlan.run (GE execution)": [(_EXECUTOR, "run")],
    "  custom GE types: Meta promise (_MetaPromise)": [(_CUSTOM_OPS, "__call__")],
    "  Const decoding (decode_tensor_def)": [("_ge/values.py", "decode_tensor_def")],
}
# first_run: npugraph, the first GraphPlan.run (GE execution on the simulator); aot_eager, everything after
# compile_inner (its first eager run). other: the rest of the first call (for npugraph TorchAir's first-call
# input processing and options, dynamo's guard/wrapper code).


def _instrument_npugraph(phases: dict) -> None:
    """Accumulate seconds spent in TorchAir's lowering and the simulator's graph set-up (child only)."""
    import torchair.npu_fx_compiler as fx_compiler
    from torchair.core import _backend as torchair_backend

    from op_plugin._simulator.interpreter import executor as _ge_executor

    def wrap(owner, name, key, first_only=False):
        original = getattr(owner, name)

        def timed(*args, **kwargs):
            if first_only and key in phases:
                return original(*args, **kwargs)
            start = perf()
            try:
                return original(*args, **kwargs)
            finally:
                phases[key] = phases.get(key, 0.0) + perf() - start

        setattr(owner, name, timed)

    wrap(fx_compiler._NpuFxCompiler, "_gen_compiled_gm", "torchair_lowering")
    wrap(torchair_backend.TorchNpuGraph, "load", "ge_load")
    wrap(_ge_executor, "compile_graph", "graphplan_compile")
    wrap(_ge_executor.GraphPlan, "run", "ge_first_run", first_only=True)


def child(payload: dict) -> dict:
    t0 = perf()
    import torch
    t1 = perf()
    import op_plugin  # noqa: F401
    t2 = perf()
    import torch._dynamo  # noqa: F401  (torch.compile imports it for every backend: timed apart)
    t3 = perf()
    out = {"import_torch": t1 - t0, "import_op_plugin": t2 - t1, "import_dynamo": t3 - t2, "import_torchair": 0.0}
    backend = payload["backend"]
    phases: dict = {}
    if backend == "npugraph":
        from op_plugin._simulator import load_torchair

        start = perf()
        load_torchair()
        out["import_torchair"] = perf() - start
        _instrument_npugraph(phases)

    from ._model import decoder_model, model_inputs

    model = decoder_model(payload["layers"])
    inputs = model_inputs()
    compiled = torch.compile(model, backend=backend)
    profile = None
    with torch.no_grad():
        if payload.get("profile"):
            import cProfile

            profile = cProfile.Profile()
            profile.enable()
        import os.path as os_path
        import posixpath

        realpaths, original_realpath = [0], posixpath.realpath

        def counting_realpath(*args, **kwargs):
            realpaths[0] += 1
            return original_realpath(*args, **kwargs)

        posixpath.realpath = os_path.realpath = counting_realpath
        start = perf()
        try:
            result = compiled(*inputs)
        finally:
            out["first_call"] = perf() - start
            posixpath.realpath = os_path.realpath = original_realpath
        out["realpaths"] = realpaths[0]
        if profile is not None:
            profile.disable()
        first_phases = dict(phases)
        start = perf()
        compiled(*inputs)
        out["second_call"] = perf() - start
        out["max_abs_error"] = (result - model(*inputs)).abs().max().item()

    metrics = torch._dynamo.utils.compilation_time_metrics
    total = lambda key: sum(metrics.get(key, []))  # noqa: E731
    lowering = first_phases.get("torchair_lowering", 0.0)
    compile_inner = total("_compile.compile_inner")
    user_compiler = total("OutputGraph.call_user_compiler")
    aot = total("create_aot_dispatcher_function")
    split = {
        "dynamo": compile_inner - user_compiler,
        "aot": aot - lowering,
        "backend_setup": user_compiler - aot,
        "torchair_lowering": lowering,
        "ge_load": first_phases.get("ge_load", 0.0),
        "graphplan_compile": first_phases.get("graphplan_compile", 0.0),
        "first_run": first_phases.get("ge_first_run", out["first_call"] - compile_inner),
    }
    split["other"] = out["first_call"] - sum(split.values())
    out["phases"] = split
    out["graphs"] = torch._dynamo.utils.counters["stats"]["unique_graphs"]
    if profile is not None:
        out["where"] = profile_seconds(profile, WHERE)
        out["profile_cumulative"] = top_profile(profile, 30, "cumulative")
        out["profile_tottime"] = top_profile(profile, 25, "tottime")
    return out


def run(quick: bool = False, profile_missed: bool = True) -> dict:
    cfg = QUICK if quick else FULL
    samples = collections.defaultdict(list)
    for layers in cfg["layers"]:
        for _ in range(cfg["repeats"]):
            for backend in BACKENDS:  # alternate, so drift hits both alike
                samples[(backend, layers)].append(run_child("compile_time", {"backend": backend, "layers": layers}))

    figures, rows, split_rows, ratios = {}, [], [], []
    for layers in cfg["layers"]:
        med = {}
        for backend in BACKENDS:
            runs = samples[(backend, layers)]
            med[backend] = {key: median(r[key] for r in runs)
                            for key in ("first_call", "second_call", "import_torchair")}
            med[backend]["cold"] = median(r["first_call"] + r["import_torchair"] for r in runs)
            med[backend]["min"] = min(r["first_call"] for r in runs)
            med[backend]["max"] = max(r["first_call"] for r in runs)
            phases = {p: median(r["phases"][p] for r in runs) for p in PHASES}
            for p, value in phases.items():
                figures[f"{backend}.L{layers}.{p}_s"] = value
            figures[f"{backend}.L{layers}.first_call_s"] = med[backend]["first_call"]
            figures[f"{backend}.L{layers}.max_abs_error"] = max(r["max_abs_error"] for r in runs)
            split_rows.append([backend, layers] + [phases[p] for p in PHASES] + [med[backend]["first_call"],
                                                                                 median(r["realpaths"] for r in runs)])
        ratio = med["npugraph"]["first_call"] / med["aot_eager"]["first_call"]
        ratio_cold = med["npugraph"]["cold"] / med["aot_eager"]["first_call"]
        ratios.append(ratio)
        figures[f"ratio_first_call.L{layers}"] = ratio
        figures[f"ratio_first_call_cold.L{layers}"] = ratio_cold
        ratio_min = med["npugraph"]["min"] / med["aot_eager"]["min"]
        figures[f"ratio_first_call_of_minima.L{layers}"] = ratio_min
        rows.append([layers, med["aot_eager"]["first_call"], med["npugraph"]["first_call"], ratio,
                     med["npugraph"]["cold"], ratio_cold,
                     f"{med['aot_eager']['min']:.2f}-{med['aot_eager']['max']:.2f}",
                     f"{med['npugraph']['min']:.2f}-{med['npugraph']['max']:.2f}", ratio_min])

    every = [r for runs in samples.values() for r in runs]
    npu_runs = [r for (b, _), runs in samples.items() if b == "npugraph" for r in runs]
    startup = {
        "import_torch_s": median(r["import_torch"] for r in every),
        "import_op_plugin_s": median(r["import_op_plugin"] for r in every),
        "import_dynamo_s": median(r["import_dynamo"] for r in every),
        "simulator_load_s": median(r["import_torchair"] for r in npu_runs),
    }
    figures.update(startup)
    worst = max(ratios)
    result = {
        "name": "compile_time",
        "title": "First-call compile time: npugraph vs aot_eager (decoder model, fresh processes)",
        "config": {"layers": cfg["layers"], "repeats (fresh processes per backend and size)": cfg["repeats"],
                   "shapes": "batch 2, seq 8, hidden 32 (static first compile)"},
        "figures": figures,
        "tables": [
            {"title": "First call (median seconds; ratio = npugraph / aot_eager in the same run)",
             "columns": ["layers", "aot_eager s", "npugraph s", "ratio", "npugraph + simulator load s",
                         "ratio (cold)", "aot_eager range s", "npugraph range s", "ratio of the minima"],
             "rows": rows},
            {"title": "Where the first call goes (median seconds)",
             "columns": ["backend", "layers", "dynamo (trace+guards)", "AOT autograd", "backend set-up",
                         "TorchAir lowering", "GE load (serialise+parse)", "GraphPlan compile", "first run (execution)",
                         "other", "total", "realpath calls in the first call"],
             "rows": split_rows},
            {"title": "Start-up in a fresh process (median seconds over all samples)",
             "columns": ["import torch", "import op_plugin (registers shipped ops)",
                         "import torch._dynamo (any torch.compile)", "simulator load (import TorchAir)"],
             "rows": [[startup["import_torch_s"], startup["import_op_plugin_s"], startup["import_dynamo_s"],
                       startup["simulator_load_s"]]]},
        ],
        "goals": [goal("npugraph first call <= 1.15x aot_eager (worst layer count; simulator load excluded)",
                       worst, GOAL, "x", "per layer count: " + ", ".join(
                           f"L{layer}: {r:.2f}x" for layer, r in zip(cfg["layers"], ratios, strict=True))),
                  goal("npugraph first call + simulator load <= 1.5x aot_eager's first call (fresh process, worst "
                       "layer count)", max(figures[f"ratio_first_call_cold.L{layer}"] for layer in cfg["layers"]), 1.5,
                       "x", "per layer count: " + ", ".join(
                           f"L{layer}: {figures[f'ratio_first_call_cold.L{layer}']:.2f}x" for layer in cfg["layers"])),
                  goal("simulator load <= 1.0 s in a fresh process (after torch._dynamo, which torch.compile imports)",
                       startup["simulator_load_s"], 1.0, " s")],
        "notes": [
            "Each sample is a fresh interpreter; backends alternate sample by sample; medians over the repeats.",
            "The ranges show the spread over the samples; on a shared machine interference only adds time, so the "
            "ratio of the minima is given as a robustness check next to the ratio of the medians (the figure).",
            "npugraph's first call includes the first run on the simulator (GE load, GraphPlan compile, execution); "
            "aot_eager's first call includes its first eager run.",
            "The split uses torch._dynamo.utils.compilation_time_metrics plus timers wrapped (in the child) around "
            "TorchAir's _NpuFxCompiler._gen_compiled_gm, TorchNpuGraph.load, the executor's compile_graph and the "
            "first GraphPlan.run. 'other' is the first call minus the named parts (guards evaluation, wrappers).",
            "realpath calls: the fixed cost that was in dynamo's window under npugraph. Dynamo's first trace imports "
            "torch.distributed.tensor.experimental._func_map, whose two custom ops' register_fake look up their "
            "source with inspect.getmodule, which resolves the real path of every module imported since the last "
            "lookup: after TorchAir's ~1100 modules (this child loads TorchAir before compiling) 1587 calls, "
            "against 452 under aot_eager. load_torchair now imports that module before TorchAir (issue 28).",
        ],
    }
    if worst > GOAL:
        layers = cfg["layers"][ratios.index(worst)]
        diff = {p: figures[f"npugraph.L{layers}.{p}_s"] - figures[f"aot_eager.L{layers}.{p}_s"] for p in PHASES}
        excess = figures[f"npugraph.L{layers}.first_call_s"] - figures[f"aot_eager.L{layers}.first_call_s"]
        allowed = (GOAL - 1) * figures[f"aot_eager.L{layers}.first_call_s"]
        result["tables"].append({
            "title": f"Why the goal is missed: npugraph minus aot_eager per part at {layers} layers (median seconds; "
                     f"the goal allows {allowed:.3f} s more than aot_eager, the excess is {excess:.3f} s)",
            "columns": list(PHASES), "rows": [[diff[p] for p in PHASES]]})
        result["notes"].append(
            f"Why the goal is missed (at {layers} layers): the npugraph-only work alone exceeds the {GOAL - 1:.0%} "
            f"allowance ({allowed:.3f} s): TorchAir lowering {diff['torchair_lowering']:.3f} s, GE load + GraphPlan "
            f"compile {diff['ge_load'] + diff['graphplan_compile']:.3f} s, and the first GE execution is "
            f"{diff['first_run']:+.3f} s against aot_eager's first eager run. Dynamo and AOT autograd are shared work "
            f"(their differences, {diff['dynamo']:+.3f} s and {diff['aot']:+.3f} s, are within the run-to-run spread).")
    if worst > GOAL and profile_missed and not quick:
        layers = cfg["layers"][-1]
        profiled = run_child("compile_time", {"backend": "npugraph", "layers": layers, "profile": True})
        where = profiled["where"]
        total = where.pop("total")
        result["tables"].append({
            "title": f"Where the npugraph first call goes, {layers} layers (cProfile in a fresh process; profiled "
                     "seconds, inflated by the profiler; indented rows nest)",
            "columns": ["part", "profiled s", "share of the first call"],
            "rows": [[label, seconds, seconds / total] for label, seconds in where.items() if seconds > 0]
            + [["whole first call (profiled)", total, 1.0]]})
        result["profile"] = (f"cProfile of the npugraph first call, {layers} layers (fresh process; profiler "
                             f"overhead inflates absolute times)\n\n-- by cumulative time --\n"
                             + profiled["profile_cumulative"] + "\n\n-- by own time --\n" + profiled["profile_tottime"])
    return result


def main() -> None:
    cli("compile_time", __doc__.splitlines()[0], run, child)


if __name__ == "__main__":
    main()

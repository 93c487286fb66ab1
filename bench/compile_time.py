"""1. First-call compile time: backend="npugraph" vs backend="aot_eager" on the decoder model.

The model is op_plugin's DemoBlock stacked 2, 6 and 12 times (bench/_model.py), compiled with
torch.compile's defaults (static shapes on the first call), batch 2, sequence 8, under no_grad,
one intra-op thread. Every sample is a fresh interpreter (start-up and first-use costs matter
here), and the two backends alternate sample by sample. A child process times, on the wall and
the CPU clock (bench/_clocks.py), with the garbage collector's CPU time metered apart:

* import torch, import op_plugin, and for npugraph the simulator load (`load_simulated_torchair()`, the
  import of TorchAir from the unpacked torch-npu wheel), each once;
* the first call of the compiled model (trace + compile + first run), split by timers wrapped in
  the child around dynamo's `_compile`, `call_user_compiler`, `aot_module_simplified`, op_plugin's
  `install_converters`, TorchAir's `_NpuFxCompiler._gen_compiled_gm` (FX passes, converters, GE
  graph passes) and `TorchNpuGraph.load`, the executor's `compile_graph` (GraphPlan) and the first
  `GraphPlan.run`.

One more child splits the simulator load: the imports an aot_eager compile makes too, the rest of
torch._inductor that TorchAir's import pulls in, and load_torchair itself.

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
import importlib
import sys

from ._clocks import GcMeter, Phases, cpu
from ._common import cli, goal, median, perf, profile_seconds, run_child, top_profile
from ._first_call_reasons import GOAL, NOTES, PHASES, excess_detail, why_missed

FULL = {"layers": [2, 6, 12], "repeats": 3, "threads": 1}
QUICK = {"layers": [1], "repeats": 1, "threads": 1}
BACKENDS = ("aot_eager", "npugraph")
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


def _instrument(phases: Phases, backend: str) -> None:
    """Time dynamo, the backend call, AOT autograd and (npugraph) TorchAir's and the simulator's parts."""
    from torch._dynamo import convert_frame, output_graph
    from torch._dynamo.backends import common as backends_common

    phases.wrap(convert_frame, "_compile", "dynamo_total")
    phases.wrap(output_graph.OutputGraph, "call_user_compiler", "user_compiler")
    phases.wrap(backends_common, "aot_module_simplified", "aot_total")  # aot_eager's AOT
    if backend != "npugraph":
        return
    import torchair.npu_fx_compiler as fx_compiler
    from torchair.core import _backend as torchair_backend

    import op_plugin._backend as op_backend
    from op_plugin._simulator.interpreter import executor as _ge_executor

    phases.wrap(fx_compiler, "aot_module_simplified", "aot_total")  # TorchAir's AOT
    phases.wrap(op_backend, "install_converters", "install_converters")
    phases.wrap(fx_compiler._NpuFxCompiler, "_gen_compiled_gm", "torchair_lowering")
    phases.wrap(torchair_backend.TorchNpuGraph, "load", "ge_load")
    phases.wrap(_ge_executor, "compile_graph", "graphplan_compile")
    phases.wrap(_ge_executor.GraphPlan, "run", "ge_first_run", first_only=True)


def _split(phases: Phases, clock: str, first_call: float) -> dict:
    """The first call's parts on one clock (wall or cpu); they add up to the first call."""
    get = lambda key: phases.get(clock, key)  # noqa: E731
    total = get("dynamo_total")
    split = {
        "dynamo": total - get("user_compiler"),
        "aot": get("aot_total") - get("torchair_lowering"),
        "backend_setup": get("user_compiler") - get("aot_total"),
        "torchair_lowering": get("torchair_lowering"),
        "ge_load": get("ge_load"),
        "graphplan_compile": get("graphplan_compile"),
        "first_run": get("ge_first_run") if "ge_first_run" in phases.wall else first_call - total,
    }
    split["other"] = first_call - sum(split.values())
    split["install_converters"] = get("install_converters")  # part of backend_setup, not added again
    return split


def child(payload: dict) -> dict:
    gc_meter = GcMeter()
    w0, c0 = perf(), cpu()
    import torch
    w1 = perf()
    import op_plugin  # noqa: F401
    w2 = perf()
    import torch._dynamo  # torch.compile imports it for every backend: timed apart
    w3, c3 = perf(), cpu()
    torch.set_num_threads(payload.get("threads", 1))
    out = {"import_torch": w1 - w0, "import_op_plugin": w2 - w1, "import_dynamo": w3 - w2, "import_torchair": 0.0,
           "import_cpu": c3 - c0, "import_gc_cpu": gc_meter.seconds, "load_cpu": 0.0, "load_gc_cpu": 0.0}
    backend = payload["backend"]
    phases = Phases()
    if backend == "npugraph":
        from op_plugin._simulator import load_simulated_torchair

        gc_meter.reset()
        start, cpu_start = perf(), cpu()
        load_simulated_torchair()
        # what TorchAir's load defers to its first lowering (loader_deferred: inductor's pattern matcher, its
        # converter modules), counted
        # in the load, so that the first call is a warm process's (the goal's); a warm-cache hit never imports it
        from op_plugin._simulator.hosting.loader_deferred import DEFERRED

        for module in {name for deferred in DEFERRED.values() for name in deferred}:
            importlib.import_module(module)
        from op_plugin._lowering import converter_loading

        converter_loading.ensure_loaded()  # TorchAir's converter modules, deferred to the first lookup too
        out["import_torchair"], out["load_cpu"] = perf() - start, cpu() - cpu_start
        out["load_gc_cpu"] = gc_meter.seconds
    _instrument(phases, backend)

    from ._model import decoder_model, model_inputs

    model = decoder_model(payload["layers"])
    inputs = model_inputs()
    compiled = torch.compile(model, backend=backend)
    profile = None
    with torch.no_grad():
        if payload.get("profile"):
            import cProfile

            profile = cProfile.Profile(cpu)  # CPU clock: the machine's other jobs do not inflate it
            profile.enable()
        import os.path as os_path
        import posixpath

        realpaths, original_realpath = [0], posixpath.realpath

        def counting_realpath(*args, **kwargs):
            realpaths[0] += 1
            return original_realpath(*args, **kwargs)

        posixpath.realpath = os_path.realpath = counting_realpath
        gc_meter.reset()
        start, cpu_start = perf(), cpu()
        try:
            result = compiled(*inputs)
        finally:
            out["first_call"], out["first_call_cpu"] = perf() - start, cpu() - cpu_start
            out["gc_cpu"], out["gc_full"] = gc_meter.seconds, gc_meter.full
            phases.frozen = True
            posixpath.realpath = os_path.realpath = original_realpath
        out["realpaths"] = realpaths[0]
        if profile is not None:
            profile.disable()
        start = perf()
        compiled(*inputs)
        out["second_call"] = perf() - start
        out["max_abs_error"] = (result - model(*inputs)).abs().max().item()
    gc_meter.close()
    out["phases"] = _split(phases, "wall", out["first_call"])
    out["phases_cpu"] = _split(phases, "cpu", out["first_call_cpu"])
    out["graphs"] = torch._dynamo.utils.counters["stats"]["unique_graphs"]
    if profile is not None:
        out["where"] = profile_seconds(profile, WHERE)
        out["profile_cumulative"] = top_profile(profile, 30, "cumulative")
        out["profile_tottime"] = top_profile(profile, 25, "tottime")
    return out


def _load_parts() -> dict:
    """Where the simulator load goes (one fresh process, CPU seconds and GC CPU per step): first what an
    aot_eager compile imports too (a one-op function compiled with aot_eager: AOT autograd, networkx, part of
    torch._inductor), then the rest of torch._inductor's pattern matcher and lowering, which torchair.patterns
    imports and an aot_eager process never does, then load_torchair itself."""
    gc_meter = GcMeter()
    import torch
    import op_plugin  # noqa: F401
    import torch._dynamo
    from op_plugin._simulator import load_simulated_torchair

    def shared():
        torch.compile(lambda x: x + 1, backend="aot_eager")(torch.ones(2))
        torch._dynamo.reset()

    out = {}
    for key, step in (("shared", shared), ("inductor", lambda: __import__("torch._inductor.pattern_matcher")),
                      ("rest", load_simulated_torchair)):
        gc_meter.reset()
        cpu0 = cpu()
        step()
        out[f"{key}_cpu"], out[f"{key}_gc_cpu"], out[f"{key}_gc_full"] = cpu() - cpu0, gc_meter.seconds, gc_meter.full
    out["torchair_modules"] = sum(name.startswith("torchair") for name in sys.modules)
    return out


def _child(payload: dict) -> dict:
    return _load_parts() if payload.get("load_parts") else child(payload)


def run(quick: bool = False, profile_missed: bool = True) -> dict:
    cfg = QUICK if quick else FULL
    samples = collections.defaultdict(list)
    for layers in cfg["layers"]:
        for _ in range(cfg["repeats"]):
            for backend in BACKENDS:  # alternate, so drift hits both alike
                samples[(backend, layers)].append(run_child("compile_time", {
                    "backend": backend, "layers": layers, "threads": cfg["threads"]}))

    figures, rows, split_rows, ratios, cpu_ratios = {}, [], [], [], []
    for layers in cfg["layers"]:
        med = {}
        for backend in BACKENDS:
            runs = samples[(backend, layers)]
            med[backend] = {key: median(r[key] for r in runs) for key in (
                "first_call", "first_call_cpu", "second_call", "import_torchair", "gc_cpu", "gc_full")}
            med[backend]["cold"] = median(r["first_call"] + r["import_torchair"] for r in runs)
            med[backend]["min"] = min(r["first_call"] for r in runs)
            med[backend]["max"] = max(r["first_call"] for r in runs)
            for clock, field, suffix in (("wall", "phases", "s"), ("CPU", "phases_cpu", "cpu_s")):
                phases = {p: median(r[field][p] for r in runs) for p in PHASES + ("install_converters",)}
                for p, value in phases.items():
                    figures[f"{backend}.L{layers}.{p}_{suffix}"] = value
                total = med[backend]["first_call" if clock == "wall" else "first_call_cpu"]
                split_rows.append([backend, layers, clock] + [phases[p] for p in PHASES] + [
                    total, phases["install_converters"],
                    med[backend]["gc_cpu"] if clock == "CPU" else "", median(r["realpaths"] for r in runs)])
            figures[f"{backend}.L{layers}.first_call_s"] = med[backend]["first_call"]
            figures[f"{backend}.L{layers}.first_call_cpu_s"] = med[backend]["first_call_cpu"]
            figures[f"{backend}.L{layers}.gc_cpu_s"] = med[backend]["gc_cpu"]
            figures[f"{backend}.L{layers}.max_abs_error"] = max(r["max_abs_error"] for r in runs)
        ratio = med["npugraph"]["first_call"] / med["aot_eager"]["first_call"]
        cpu_ratio = med["npugraph"]["first_call_cpu"] / med["aot_eager"]["first_call_cpu"]
        ratio_cold = med["npugraph"]["cold"] / med["aot_eager"]["first_call"]
        ratios.append(ratio)
        cpu_ratios.append(cpu_ratio)
        figures[f"ratio_first_call.L{layers}"] = ratio
        figures[f"ratio_first_call_cpu.L{layers}"] = cpu_ratio
        figures[f"ratio_first_call_cold.L{layers}"] = ratio_cold
        ratio_min = med["npugraph"]["min"] / med["aot_eager"]["min"]
        figures[f"ratio_first_call_of_minima.L{layers}"] = ratio_min
        rows.append([layers, med["aot_eager"]["first_call"], med["npugraph"]["first_call"], ratio,
                     med["aot_eager"]["first_call_cpu"], med["npugraph"]["first_call_cpu"], cpu_ratio,
                     med["npugraph"]["cold"], ratio_cold,
                     f"{med['aot_eager']['min']:.2f}-{med['aot_eager']['max']:.2f}",
                     f"{med['npugraph']['min']:.2f}-{med['npugraph']['max']:.2f}", ratio_min])

    every = [r for runs in samples.values() for r in runs]
    npu_runs = [r for (b, _), runs in samples.items() if b == "npugraph" for r in runs]
    startup = {
        "import_torch_s": median(r["import_torch"] for r in every),
        "import_op_plugin_s": median(r["import_op_plugin"] for r in every),
        "import_dynamo_s": median(r["import_dynamo"] for r in every),
        "imports_cpu_s": median(r["import_cpu"] for r in every),
        "imports_gc_cpu_s": median(r["import_gc_cpu"] for r in every),
        "simulator_load_s": median(r["import_torchair"] for r in npu_runs),
        "simulator_load_cpu_s": median(r["load_cpu"] for r in npu_runs),
        "simulator_load_gc_cpu_s": median(r["load_gc_cpu"] for r in npu_runs),
    }
    figures.update(startup)
    load_parts = run_child("compile_time", {"load_parts": True})
    figures.update({f"load_parts.{k}": v for k, v in load_parts.items()})
    worst, worst_cpu = max(ratios), max(cpu_ratios)
    result = {
        "name": "compile_time",
        "title": "First-call compile time: npugraph vs aot_eager (decoder model, fresh processes)",
        "config": {"layers": cfg["layers"], "repeats (fresh processes per backend and size)": cfg["repeats"],
                   "intra-op threads": cfg["threads"],
                   "shapes": "batch 2, seq 8, hidden 32 (static first compile)"},
        "figures": figures,
        "tables": [
            {"title": "First call (median seconds; ratio = npugraph / aot_eager in the same run)",
             "columns": ["layers", "aot_eager s", "npugraph s", "ratio", "aot_eager CPU s", "npugraph CPU s",
                         "CPU ratio", "npugraph + simulator load s", "ratio (cold)", "aot_eager range s",
                         "npugraph range s", "ratio of the minima"],
             "rows": rows},
            {"title": "Where the first call goes (median seconds, wall and CPU clocks; the parts add up to the "
                      "total)",
             "columns": ["backend", "layers", "clock", "dynamo (trace+guards)", "AOT autograd", "backend set-up",
                         "TorchAir lowering", "GE load (serialise+parse)", "GraphPlan compile",
                         "first run (execution)", "other", "total", "of the set-up: install_converters",
                         "GC CPU in the first call", "realpath calls in the first call"],
             "rows": split_rows},
            {"title": "Start-up in a fresh process (median seconds over all samples)",
             "columns": ["import torch", "import op_plugin (registers shipped ops)",
                         "import torch._dynamo (any torch.compile)", "the three imports, CPU (GC CPU)",
                         "simulator load (import TorchAir)", "simulator load CPU (GC CPU)"],
             "rows": [[startup["import_torch_s"], startup["import_op_plugin_s"], startup["import_dynamo_s"],
                       f"{startup['imports_cpu_s']:.3f} ({startup['imports_gc_cpu_s']:.3f})",
                       startup["simulator_load_s"],
                       f"{startup['simulator_load_cpu_s']:.3f} ({startup['simulator_load_gc_cpu_s']:.3f})"]]},
            {"title": "Where the simulator load goes (one fresh process, CPU seconds, in this order)",
             "columns": ["an aot_eager compile of x + 1 (imports both backends need)", "GC in it",
                         "rest of torch._inductor's pattern matcher + lowering (TorchAir imports them, aot_eager "
                         "does not)", "GC in it", "rest of load_torchair (TorchAir's modules, op_plugin's hosting)",
                         "GC in it", "full collections in the last two", "torchair modules"],
             "rows": [[load_parts["shared_cpu"], load_parts["shared_gc_cpu"], load_parts["inductor_cpu"],
                       load_parts["inductor_gc_cpu"], load_parts["rest_cpu"], load_parts["rest_gc_cpu"],
                       load_parts["inductor_gc_full"] + load_parts["rest_gc_full"], load_parts["torchair_modules"]]]},
        ],
        "goals": [goal("npugraph first call <= 1.15x aot_eager (worst layer count; simulator load excluded)",
                       worst, GOAL, "x", "per layer count (wall / CPU): " + ", ".join(
                           f"L{layer}: {r:.2f}x / {c:.2f}x" for layer, r, c in zip(cfg["layers"], ratios,
                                                                                cpu_ratios, strict=True))
                       + excess_detail(cfg, figures, cpu_ratios)),
                  goal("npugraph first call + simulator load <= 1.5x aot_eager's first call (fresh process, worst "
                       "layer count)", max(figures[f"ratio_first_call_cold.L{layer}"] for layer in cfg["layers"]), 1.5,
                       "x", "per layer count: " + ", ".join(
                           f"L{layer}: {figures[f'ratio_first_call_cold.L{layer}']:.2f}x" for layer in cfg["layers"])
                       + f"; the simulator load alone is {startup['simulator_load_cpu_s']:.2f} s CPU"),
                  goal("simulator load <= 1.0 s in a fresh process (after torch._dynamo, which torch.compile imports)",
                       startup["simulator_load_s"], 1.0, " s",
                       f"CPU {startup['simulator_load_cpu_s']:.2f} s, of which GC "
                       f"{startup['simulator_load_gc_cpu_s']:.2f} s; torch._inductor's import "
                       f"{load_parts['inductor_cpu']:.2f} s")],
    }
    result["notes"] = NOTES + why_missed(cfg, figures, ratios, cpu_ratios, startup, load_parts)
    if worst > GOAL and profile_missed and not quick:
        layers = cfg["layers"][cpu_ratios.index(worst_cpu)]
        profiled = run_child("compile_time", {"backend": "npugraph", "layers": layers, "profile": True,
                                              "threads": cfg["threads"]})
        where = profiled["where"]
        total = where.pop("total")
        result["tables"].append({
            "title": f"Where the npugraph first call goes, {layers} layers (cProfile on the CPU clock in a fresh "
                     "process; profiled seconds, inflated by the profiler; indented rows nest)",
            "columns": ["part", "profiled s", "share of the first call"],
            "rows": [[label, seconds, seconds / total] for label, seconds in where.items() if seconds > 0]
            + [["whole first call (profiled)", total, 1.0]]})
        result["profile"] = (f"cProfile (CPU clock) of the npugraph first call, {layers} layers (fresh process; "
                             f"profiler overhead inflates absolute times)\n\n-- by cumulative time --\n"
                             + profiled["profile_cumulative"] + "\n\n-- by own time --\n" + profiled["profile_tottime"])
    return result


def main() -> None:
    cli("compile_time", __doc__.splitlines()[0], run, _child)


if __name__ == "__main__":
    main()

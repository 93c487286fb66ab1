"""3. Steady-state call time: the npugraph-compiled model on the simulator vs eager.

Same decoder model (DemoBlock stacked 2, 6, 12 times), same inputs, under torch.no_grad().
After warm-up calls (the first compiles), each call is timed on its own; backends alternate in
rounds so drift hits them alike; the figure is the median per-call time. aot_eager is timed as
well, as context: it separates the cost of dynamo's/AOT's runtime wrappers (which aot_eager also
pays) from the cost of the simulator (TorchAir's runtime + the GE executor running node by node).
"""
from __future__ import annotations

if __name__ == "__main__" and not __package__:  # `python bench/steady_state.py`
    import pathlib, sys  # noqa: E401
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))
    from bench._common import script_shim
    script_shim(__file__, "steady_state")
    raise SystemExit

from ._common import cli, goal, median, perf, profile_seconds, top_profile

FULL = {"cases": [(2, 2, 8), (6, 2, 8), (12, 2, 8), (12, 4, 64)], "warmup": 10, "rounds": 12, "calls_per_round": 12}
QUICK = {"cases": [(1, 2, 8)], "warmup": 2, "rounds": 2, "calls_per_round": 3}
BACKENDS = ("eager", "npugraph", "aot_eager")
GOAL = 1.5
EXECUTOR, CHECKS, CUSTOM_OPS, TORCHAIR = ("_simulator/interpreter/executor/plan.py",
                                       "_simulator/interpreter/executor/checks.py",
                                       "_simulator/hosting/custom_ops.py", "torchair/")
# Parts of a steady npugraph call, outermost first; a row's time includes the rows indented below it.
# Rows whose functions do not run (or no longer exist in the executor) are left out of the table.
WHERE = {
    "TorchAir runtime (GeConcreteGraph.__call__)": [(TORCHAIR + "_ge_concrete_graph/fx2ge_converter.py", "__call__")],
    "  GE executor (GraphPlan.run)": [(EXECUTOR, "run")],
    "    graph inputs: Data nodes and their checks (_data_value)": [(EXECUTOR, "_data_value")],
    "    node kernels with their output checks (_run_kernel)": [(EXECUTOR, "_run_kernel")],
    "      output checks against the graph (check_output)": [(CHECKS, "check_output")],
    "      custom GE types: reference kernel wrapper (reference_ge_kernel)": [(CUSTOM_OPS, "kernel")],
    "        Meta promise for the reference result (_MetaPromise)": [(CUSTOM_OPS, "__call__")],
    "    Const nodes decoded per run (decode_tensor_def)": [("_ge/values.py", "decode_tensor_def")],
    "    graph outputs: copies and checks (_collect_outputs)": [(EXECUTOR, "_collect_outputs")],
}


def run(quick: bool = False) -> dict:
    import torch

    from op_plugin._simulator import load_simulated_torchair

    from ._model import decoder_model, model_inputs

    cfg = QUICK if quick else FULL
    load_simulated_torchair()
    figures, rows, ratios = {}, [], []
    for layers, batch, seq in cfg["cases"]:
        torch._dynamo.reset()
        model = decoder_model(layers)
        inputs = model_inputs(batch, seq)
        fns = {"eager": model,
               "npugraph": torch.compile(model, backend="npugraph"),
               "aot_eager": torch.compile(model, backend="aot_eager")}
        times = {b: [] for b in BACKENDS}
        with torch.no_grad():
            want = model(*inputs)
            error = 0.0
            for backend in BACKENDS:
                for _ in range(cfg["warmup"]):
                    got = fns[backend](*inputs)
                error = max(error, (got - want).abs().max().item())
            for _ in range(cfg["rounds"]):
                for backend in BACKENDS:
                    fn = fns[backend]
                    for _ in range(cfg["calls_per_round"]):
                        start = perf()
                        fn(*inputs)
                        times[backend].append(perf() - start)
        med = {b: median(times[b]) for b in BACKENDS}
        ratio = med["npugraph"] / med["eager"]
        tag = f"L{layers}.B{batch}xS{seq}"
        figures[f"eager_ms.{tag}"] = med["eager"] * 1e3
        figures[f"npugraph_ms.{tag}"] = med["npugraph"] * 1e3
        figures[f"aot_eager_ms.{tag}"] = med["aot_eager"] * 1e3
        figures[f"ratio_npugraph_vs_eager.{tag}"] = ratio
        figures[f"ratio_aot_eager_vs_eager.{tag}"] = med["aot_eager"] / med["eager"]
        figures[f"max_abs_error.{tag}"] = error
        if (batch, seq) == cfg["cases"][0][1:]:
            ratios.append((tag, ratio))
        rows.append([layers, f"{batch}x{seq}", med["eager"] * 1e3, med["npugraph"] * 1e3, ratio,
                     med["aot_eager"] * 1e3, med["aot_eager"] / med["eager"], error])
        print(f"  {tag}: eager {med['eager'] * 1e3:.2f} ms, npugraph {med['npugraph'] * 1e3:.2f} ms ({ratio:.2f}x)",
              flush=True)

    worst_tag, worst = max(ratios, key=lambda item: item[1])
    calls = cfg["rounds"] * cfg["calls_per_round"]
    result = {
        "name": "steady_state",
        "title": "Steady-state call time: npugraph on the simulator vs eager",
        "config": {"cases (layers, batch, seq)": cfg["cases"], "warm-up calls": cfg["warmup"],
                   "timed calls per backend":
                       f"{calls} ({cfg['rounds']} alternating rounds of {cfg['calls_per_round']})"},
        "figures": figures,
        "tables": [{"title": "Median per-call time (ms); ratio = backend / eager in the same run",
                    "columns": ["layers", "batch x seq", "eager ms", "npugraph ms", "npugraph / eager",
                                "aot_eager ms", "aot_eager / eager", "max abs error (npugraph)"],
                    "rows": rows}],
        "goals": [goal("simulator steady call <= 1.5x eager "
                       f"(worst of the {cfg['cases'][0][1]}x{cfg['cases'][0][2]} cases)",
                       worst, GOAL, "x", ", ".join(f"{t}: {r:.2f}x" for t, r in ratios))],
        "notes": ["Both sides run the same reference kernels for the custom GE types; the simulator adds TorchAir's "
                  "runtime wrapper and a Python interpreter over the GE graph (a kernel call and output checks per GE "
                  "node per call).",
                  "The goal is evaluated on the demo's shape (batch 2, seq 8), where per-call overhead dominates; the "
                  "larger shape shows how the ratio shrinks as compute grows."],
    }
    if worst > GOAL and not quick:
        import cProfile

        torch._dynamo.reset()
        layers = max(c[0] for c in cfg["cases"])
        model = decoder_model(layers)
        inputs = model_inputs()
        fn = torch.compile(model, backend="npugraph")
        with torch.no_grad():
            for _ in range(3):
                fn(*inputs)
            profile = cProfile.Profile()
            profile.enable()
            for _ in range(50):
                fn(*inputs)
            profile.disable()
        calls = 50
        shares = profile_seconds(profile, WHERE)
        total = shares.pop("total")
        rows = [[label, seconds / calls * 1e3, seconds / total] for label, seconds in shares.items() if seconds > 0]
        rows.append(["whole profiled call (profiler on)", total / calls * 1e3, 1.0])
        result["tables"].append({
            "title": f"Where a steady npugraph call goes ({layers} layers, batch 2 x seq 8; cProfile over {calls} "
                     "calls, so Python-heavy parts are inflated; rows nest as indented)",
            "columns": ["part", "ms per call (profiled)", "share of the call"], "rows": rows})
        import collections

        from op_plugin._simulator import loaded_graphs

        types = collections.Counter(op.type for op in loaded_graphs()[-1].op)
        executor = shares["  GE executor (GraphPlan.run)"] / calls
        nodes = sum(types.values())
        inner = sorted((r for r in rows if r[0].startswith("    ")), key=lambda r: -r[2])[:3]
        result["notes"].append(
            f"Why the goal is missed: per call the executor interprets the whole GE graph in Python, {nodes} nodes at "
            f"{layers} layers ({', '.join(f'{n} {t}' for t, n in types.most_common(6))}, ...), about "
            f"{executor / nodes * 1e6:.0f} us per node profiled; GraphPlan.run is "
            f"{shares['  GE executor (GraphPlan.run)'] / total:.0%} of the profiled call. Its largest parts: "
            + "; ".join(f"{r[0].strip()} {r[2]:.0%}" for r in inner)
            + ". Eager runs the same reference kernels without that interpretation layer.")
        result["profile"] = (f"cProfile of {calls} steady npugraph calls, {layers} layers, batch 2 x seq 8 "
                             "(profiler overhead inflates absolute times)\n\n-- by own time --\n"
                             + top_profile(profile, 22, "tottime") + "\n\n-- by cumulative time --\n"
                             + top_profile(profile, 28, "cumulative"))
    return result


def main() -> None:
    cli("steady_state", __doc__.splitlines()[0], run)


if __name__ == "__main__":
    main()

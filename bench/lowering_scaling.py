"""2. Lowering time per FX node, from 100 to 20,000 nodes (should be flat: linear total).

The graph is a generated chain y = npu_vector_add(y, x); y = aten.mul(y, x);
y = npu_custom_rms_norm(y, gamma)[0]; ... (x: [4, 16] float32, gamma: [16]) of N call_function
nodes (getitem included). Tracing a 20,000-node program through dynamo would take minutes, so
the torch.fx.GraphModule is built directly with torch.fx and handed to the npugraph backend
entry point with example inputs, `op_plugin._backend.npugraph(gm, example_inputs)`: exactly what
dynamo does after tracing. The backend runs AOT autograd (functionalisation, fake tensors) and then
TorchAir's lowering; the compiled callable is then run once (GE load, GraphPlan compile, execution).

Measured per size, in one process after a warm-up compile (so one-time lazy imports are not
counted): the TorchAir lowering (`_NpuFxCompiler._gen_compiled_gm`: FX passes, converters, GE
graph passes) of the graph TorchAir receives; it is repeated on that same AOT graph (the call
deep-copies its input graph, so repeats are independent; they run in the context AOT autograd
calls its compiler in) and the median is reported. Also the
whole backend call (AOT autograd + lowering) and the first run, each once per size for large
graphs. Per-node = time / FX nodes of the graph TorchAir lowers.
"""
from __future__ import annotations

if __name__ == "__main__" and not __package__:  # `python bench/lowering_scaling.py`
    import pathlib, sys  # noqa: E401
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))
    from bench._common import script_shim
    script_shim(__file__, "lowering_scaling")
    raise SystemExit

import operator

from ._common import cli, goal, median, perf, profile_seconds, top_profile

FULL = {"sizes": [100, 300, 1000, 3000, 10000, 20000], "lowering_repeats": 3,
        "backend_repeats": {100: 3, 300: 3, 1000: 3, 3000: 2, 10000: 1, 20000: 1}}
QUICK = {"sizes": [20, 60], "lowering_repeats": 2, "backend_repeats": {20: 1, 60: 1}}
BAND = 0.20
PROFILE_MID = 1000
_FX, _GE = "torchair/npu_fx_compiler.py", "torchair/_ge_concrete_graph/fx2ge_converter.py"
# Parts of one TorchAir lowering (_NpuFxCompiler._gen_compiled_gm); indented rows nest in the row above.
WHERE = {
    "deep copy of the FX graph": [("/copy.py", "deepcopy")],
    "FX passes (_optimize_fx)": [(_FX, "_optimize_fx")],
    "FX interpreter: converters build the GE graph (_NpuGraphConverter.run)": [(_FX, "run")],
    "  GE op naming: GeGraph.next_unique_name (unique-name search per new op)": [
        ("torchair/ge/_ge_graph.py", "next_unique_name")],
    "  YAML-op converters (op_plugin generated_converter)": [("op_plugin/_lowering/converters.py", "convert")],
    "GE graph passes (optimize_graph_without_runtime)": [(_GE, "optimize_graph_without_runtime")],
}


def build_chain(nodes: int):
    """A torch.fx.GraphModule of `nodes` call_function nodes cycling vector_add, mul, rms_norm(+getitem)."""
    import torch

    npu = torch.ops.npu
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    gamma = graph.placeholder("gamma")
    y, count, step = x, 0, 0
    while count < nodes:
        kind = step % 3
        if kind == 0 or (kind == 2 and nodes - count < 2):
            y = graph.call_function(npu.npu_vector_add.default, (y, x))
            count += 1
        elif kind == 1:
            y = graph.call_function(torch.ops.aten.mul.Tensor, (y, x))
            count += 1
        else:
            pair = graph.call_function(npu.npu_custom_rms_norm.default, (y, gamma, 1e-6))
            y = graph.call_function(operator.getitem, (pair, 0))
            count += 2
        step += 1
    graph.output((y,))
    return torch.fx.GraphModule(torch.nn.Module(), graph)


def call_nodes(gm) -> int:
    return sum(1 for n in gm.graph.nodes if n.op == "call_function")


class _Recorder:
    """Wraps TorchAir's lowering entry point to time it and keep its arguments for re-lowering."""

    def __init__(self):
        import torchair.npu_fx_compiler as fx_compiler

        self.original = fx_compiler._NpuFxCompiler._gen_compiled_gm
        self.last = None
        recorder = self

        def timed(compiler, gm, example_inputs, observer):
            start = perf()
            out = recorder.original(compiler, gm, example_inputs, observer)
            recorder.last = {"seconds": perf() - start, "args": (compiler, gm, example_inputs, observer),
                             "nodes": call_nodes(gm)}
            return out

        fx_compiler._NpuFxCompiler._gen_compiled_gm = timed

    def relower(self) -> float:
        """Lower the recorded AOT graph again, in the context AOT autograd calls its compiler in
        (its fake mode active, the python dispatcher when there is a shape env): outside it every
        fake-tensor op takes a slower path and the lowering takes about twice as long."""
        import contextlib

        import torch
        from torch._dispatch.python import enable_python_dispatcher
        from torch._guards import detect_fake_mode

        args = self.last["args"]
        fake_mode = detect_fake_mode(args[2])
        with contextlib.ExitStack() as stack:
            stack.enter_context(torch.autograd.set_multithreading_enabled(False))
            if fake_mode is not None:
                stack.enter_context(fake_mode)
                if fake_mode.shape_env is not None:
                    stack.enter_context(enable_python_dispatcher())
            start = perf()
            self.original(*args)
            return perf() - start


def _set_backed_next_unique_name(self, name, op):
    """GeGraph.next_unique_name as in TorchAir, with the membership test on a set kept beside the list."""
    names = self.__dict__.get("_bench_name_set")
    if names is None or len(names) != len(self.op_name_list):
        if not self.op_name_list:
            self.op_name_list.extend(node.name for node in self._proto.op)
        names = self._bench_name_set = set(self.op_name_list)

    def take(candidate):
        if candidate in names:
            return False
        names.add(candidate)
        self.op_name_list.append(candidate)
        return True

    if name is not None:
        if name.strip() == "" or not take(name):
            raise AssertionError(f"empty or duplicated node name '{name}' is not allowed")
        return name
    if op not in self.op_name_idx_dict:
        self.op_name_idx_dict[op] = 0
        if take(op):
            return op
    counter = self.op_name_idx_dict[op] + 1
    while not take(f"{op}_{counter}"):
        counter += 1
    self.op_name_idx_dict[op] = counter
    return f"{op}_{counter}"


def _relower_with_set_names(recorder) -> float:
    from torchair.ge import _ge_graph

    shipped = _ge_graph.GeGraph.next_unique_name
    _ge_graph.GeGraph.next_unique_name = _set_backed_next_unique_name
    try:
        return recorder.relower()
    finally:
        _ge_graph.GeGraph.next_unique_name = shipped


def run(quick: bool = False) -> dict:
    import torch

    import op_plugin  # noqa: F401
    from op_plugin._backend import npugraph_backend
    from op_plugin._simulator import loaded_graphs, load_simulated_torchair

    npugraph = npugraph_backend(compile_cache=False)  # every compile lowers (a repeat would be a cache hit)
    cfg = QUICK if quick else FULL
    load_simulated_torchair()
    recorder = _Recorder()
    inputs = [torch.randn(4, 16), torch.ones(16)]

    def compile_once(n):
        gm = build_chain(n)
        start = perf()
        fn = npugraph(gm, inputs)
        backend_s = perf() - start
        start = perf()
        with torch.no_grad():
            out = fn(*inputs)
        first_run_s = perf() - start
        expected = gm(*inputs)[0]
        error = (out[0] - expected).abs().max().item()
        return backend_s, first_run_s, error, dict(recorder.last)

    for _ in range(2):  # warm-up: lazy imports and first-use caches of AOT and TorchAir
        compile_once(min(cfg["sizes"]))

    rows, per = [], {}
    for n in cfg["sizes"]:
        backend_s, first_s, lowering_s, errors = [], [], [], []
        for _ in range(cfg["backend_repeats"][n]):
            b, f, e, last = compile_once(n)
            backend_s.append(b)
            first_s.append(f)
            errors.append(e)
            lowering_s.append(last["seconds"])
        ge_nodes = len(loaded_graphs()[-1].op)
        while len(lowering_s) < cfg["lowering_repeats"]:
            lowering_s.append(recorder.relower())
        fx_nodes = last["nodes"]
        per[n] = {
            "fx_nodes": fx_nodes, "ge_nodes": ge_nodes,
            "lowering_s": median(lowering_s), "backend_s": median(backend_s), "first_run_s": median(first_s),
            "max_abs_error": max(errors),
        }
        print(f"  {n} nodes: lowering {per[n]['lowering_s']:.3f} s, backend {per[n]['backend_s']:.3f} s, "
              f"first run {per[n]['first_run_s']:.3f} s", flush=True)

    base = cfg["sizes"][0]
    unit = lambda n, key: per[n][key] / per[n]["fx_nodes"] * 1e6  # noqa: E731  (us per node)
    figures = {}
    ratios = []
    for n in cfg["sizes"]:
        p = per[n]
        ratio = unit(n, "lowering_s") / unit(base, "lowering_s")
        ratios.append(ratio)
        figures[f"lowering_us_per_node.N{n}"] = unit(n, "lowering_s")
        figures[f"backend_us_per_node.N{n}"] = unit(n, "backend_s")
        figures[f"first_run_us_per_node.N{n}"] = unit(n, "first_run_s")
        figures[f"ratio_vs_N{base}.N{n}"] = ratio
        figures[f"max_abs_error.N{n}"] = p["max_abs_error"]
        rows.append([n, p["fx_nodes"], p["ge_nodes"], p["lowering_s"], unit(n, "lowering_s"), ratio,
                     p["backend_s"], unit(n, "backend_s"), p["first_run_s"], unit(n, "first_run_s")])
    # total = fixed + marginal * nodes (least squares), and the marginal cost between the two largest sizes
    xs = [per[n]["fx_nodes"] for n in cfg["sizes"]]
    ys = [per[n]["lowering_s"] for n in cfg["sizes"]]
    mean_x, mean_y = sum(xs) / len(xs), sum(ys) / len(ys)
    slope = sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys, strict=True)) / sum((x - mean_x) ** 2 for x in xs)
    figures["fit_fixed_s"] = mean_y - slope * mean_x
    figures["fit_marginal_us_per_node"] = slope * 1e6
    a, b = cfg["sizes"][-2], cfg["sizes"][-1]
    figures["marginal_us_per_node_top"] = (per[b]["lowering_s"] - per[a]["lowering_s"]) / (
        per[b]["fx_nodes"] - per[a]["fx_nodes"]) * 1e6
    worst = max(abs(r - 1) for r in ratios)
    figures["max_deviation_vs_base"] = worst

    result = {
        "name": "lowering_scaling",
        "title": "Lowering time per FX node, 100 to 20,000 nodes",
        "config": {"sizes (FX call_function nodes)": cfg["sizes"],
                   "TorchAir lowering repeats per size": cfg["lowering_repeats"],
                   "whole backend call + first run repeats per size": cfg["backend_repeats"],
                   "warm-up": f"2 compiles of {min(cfg['sizes'])} nodes"},
        "figures": figures,
        "tables": [{
            "title": "Per size (median seconds; us/node = microseconds per FX node; "
                     f"ratio = lowering us/node vs {base} nodes)",
            "columns": ["nodes asked", "FX nodes lowered", "GE nodes", "TorchAir lowering s", "lowering us/node",
                        f"ratio vs {base}", "backend call s (AOT+lowering)", "backend us/node",
                        "first run s (load+plan+exec)", "first run us/node"],
            "rows": rows,
        }, {
            "title": "Linear fit of the TorchAir lowering total (seconds = fixed + marginal x nodes)",
            "columns": ["fixed s", "marginal us/node (fit)", f"marginal us/node between {a} and {b} nodes"],
            "rows": [[figures["fit_fixed_s"], figures["fit_marginal_us_per_node"],
                      figures["marginal_us_per_node_top"]]],
        }],
        "goals": [goal(f"lowering time per node flat within +-20% from {base} to {cfg['sizes'][-1]} nodes "
                       f"(largest deviation of us/node from the {base}-node figure)", worst * 100, BAND * 100, "%",
                       ", ".join(f"N={n}: {r:.2f}x" for n, r in zip(cfg["sizes"], ratios, strict=True)))],
        "notes": [
            "The FX GraphModule is built directly with torch.fx (not traced by dynamo) and passed to the npugraph "
            "backend with example inputs, which is what dynamo does after tracing.",
            "Nodes cycle npu_vector_add (YAML op, built-in GE Add), aten.mul and npu_custom_rms_norm (YAML op, "
            "built-in GE RmsNorm) + getitem; 'FX nodes lowered' counts the call_function nodes of the AOT graph "
            "TorchAir receives.",
            "Each compiled graph is run once and checked against the FX graph run eagerly (max abs error recorded).",
        ],
        "plot": {"x": [per[n]["fx_nodes"] for n in cfg["sizes"]],
                 "lowering": [unit(n, "lowering_s") for n in cfg["sizes"]],
                 "backend": [unit(n, "backend_s") for n in cfg["sizes"]],
                 "first_run": [unit(n, "first_run_s") for n in cfg["sizes"]]},
    }
    if worst > BAND and not quick:
        import cProfile

        largest, mid = cfg["sizes"][-1], PROFILE_MID
        # Diagnosis only (TorchAir code, patched in this process, never the reported figure): the same
        # lowering with GeGraph.next_unique_name testing names against a set instead of a list.
        what_if = {largest: [_relower_with_set_names(recorder) for _ in range(2)]}
        profiles = {}
        for n in (largest, mid):  # recorder.last holds the largest size's AOT graph from the loop above
            if n != largest:
                compile_once(n)
                what_if[n] = [_relower_with_set_names(recorder) for _ in range(2)]
            profile = cProfile.Profile()
            profile.enable()
            recorder.relower()
            profile.disable()
            profiles[n] = (profile, recorder.last["nodes"])
        shares = {n: profile_seconds(p, WHERE) for n, (p, _) in profiles.items()}
        rows = []
        for label in ["total"] + list(WHERE):
            a = shares[mid][label] / profiles[mid][1] * 1e6
            b = shares[largest][label] / profiles[largest][1] * 1e6
            rows.append([label if label != "total" else "whole lowering (profiled)", a, b,
                         b / a if a else float("nan")])
        result["tables"].append({
            "title": f"Where lowering time per node goes at {mid} and {largest} nodes (cProfile of one TorchAir "
                     "lowering each; us per FX node; the profiler inflates Python calls about 3x but not the "
                     "C-level list search inside the naming row; indented rows nest)",
            "columns": ["part", f"us/node at {mid}", f"us/node at {largest}", "growth"], "rows": rows})
        base_us = unit(base, "lowering_s")
        fix_rows = []
        for n in sorted(what_if):
            shipped = unit(n, "lowering_s") if n in per else float("nan")
            fixed = median(what_if[n]) / profiles[n][1] * 1e6
            figures[f"what_if_set_names_us_per_node.N{n}"] = fixed
            fix_rows.append([n, shipped, fixed, fixed / base_us])
        result["tables"].append({
            "title": "Diagnosis only, not the figure: the TorchAir lowering with GeGraph.next_unique_name backed by a "
                     "set (TorchAir patched in this benchmark process; median of 2)",
            "columns": ["nodes", "as shipped us/node", "names in a set us/node",
                        f"ratio vs the shipped {base}-node figure"],
            "rows": fix_rows})
        naming_growth = rows[4][3]
        # the simulator's set-backed name search (op_plugin/_simulator/hosting/torchair_fixes.py)
        if naming_growth < 1.5:
            result["notes"].append(
                f"GE op naming stays flat ({rows[4][1]:.0f} -> {rows[4][2]:.0f} us/node between {mid} and {largest} "
                "nodes): the simulator runs TorchAir's GeGraph.next_unique_name on a set "
                "(op_plugin/_simulator/hosting/torchair_fixes.py; upstream fix: keep a set beside `op_name_list` in "
                "torchair/ge/_ge_graph.py). A size whose figure departs from its neighbours while its re-measured "
                "figure in the diagnosis table does not is run-to-run spread, not growth.")
        else:
            result["notes"].append(
            f"Why the goal is missed: TorchAir's GeGraph.next_unique_name (torchair/ge/_ge_graph.py) tests every new "
            "GE op name with `op_name in self.op_name_list`, a Python list: O(n) per op, O(n^2) per graph. In the "
            f"profile it grows from {rows[4][1]:.0f} to {rows[4][2]:.0f} us/node between {mid} and {largest} nodes. "
            f"With the names in a set (diagnostic patch, table above) the {largest}-node lowering takes "
            f"{figures[f'what_if_set_names_us_per_node.N{largest}']:.0f} us/node instead of "
            f"{unit(largest, 'lowering_s'):.0f}. The YAML-op converter row grows too because TorchAir names the GE "
            "ops they create inside them.")
        result["profile"] = (f"cProfile of one TorchAir lowering of the {largest}-node graph (profiler overhead "
                             "inflates absolute times)\n\n-- by own time --\n"
                             + top_profile(profiles[largest][0], 20, "tottime")
                             + "\n\n-- by cumulative time --\n" + top_profile(profiles[largest][0], 25, "cumulative"))
    return result


def plot(result: dict, path) -> None:
    """time/node vs nodes (log x) for the lowering, the whole backend call and the first run."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    data = result["plot"]
    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=110)
    ax.plot(data["x"], data["backend"], "s-", label="backend call (AOT autograd + TorchAir lowering)")
    ax.plot(data["x"], data["lowering"], "o-", label="TorchAir lowering")
    ax.plot(data["x"], data["first_run"], "^-", label="first run (GE load + GraphPlan + execution)")
    base = data["lowering"][0]
    ax.axhspan(base * (1 - BAND), base * (1 + BAND), color="tab:orange", alpha=0.12,
               label=f"goal: lowering within +-{BAND:.0%} of {data['x'][0]} nodes")
    ax.set_xscale("log")
    ax.set_xlabel("FX nodes in the graph (log scale)")
    ax.set_ylabel("microseconds per FX node")
    ax.set_ylim(bottom=0)
    ax.set_title("npugraph lowering cost per FX node (flat = linear total)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def main() -> None:
    cli("lowering_scaling", __doc__.splitlines()[0], run)


if __name__ == "__main__":
    main()

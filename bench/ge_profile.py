"""8. Where a steady npugraph call goes, per GE type, against eager's own aten ops.

For BERT, T5's encoder, ResNet and EfficientNet (the zoo's small configs, batch 2) and the BERT-layer
example, in one fresh process per model (one intra-op thread):

* steady call: eager, npugraph running the plan's generated straight-line program (executor/program.py)
  with the calls the nodes' kernels were prepared with (interpreter/prepared.py), the same program
  preparing every node on every call (what the prepare phase saves), and npugraph walking the plan's
  steps one by one as the executor did before the program (reproduced here as `_step_walk`), timed in
  alternating rounds; medians, ratios against eager from the same rounds;
* per GE type: the summed time of that type's prepared calls in one call, median over the
  profiled calls (a perf_counter around each node; the timer adds ~0.3 us per node), next to eager's
  aten ops in one call (torch.profiler self CPU time per op, divided by the calls) and the simulator's
  aten ops under the same profiler: an aten op the simulator calls more often than eager, or a
  copy/cast eager does not make, is a kernel slower than its eager counterpart.
"""
from __future__ import annotations

if __name__ == "__main__" and not __package__:  # `python bench/ge_profile.py`
    import pathlib, sys  # noqa: E401
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))
    from bench._common import script_shim
    script_shim(__file__, "ge_profile")
    raise SystemExit

from ._common import cli, median, perf, run_child

FULL = {"models": [("bert", 2, 12), ("t5_encoder", 2, 12), ("resnet", 2, 0), ("efficientnet", 2, 0),
                   ("example:bert_layer", 2, 7)],
        "warmup": 5, "rounds": 15, "calls_per_round": 4, "profile_calls": 20, "top": 12}
QUICK = {"models": [("example:bert_layer", 2, 7)], "warmup": 1, "rounds": 2, "calls_per_round": 2,
         "profile_calls": 2, "top": 5}
MODES = ("eager", "program", "unprepared", "step_walk")


def _step_walk(plan, folded: dict):
    """The executor's verified call before the generated program: walk the steps, build each
    node's arg list, call its bound kernel (dtype rules checked), store and free slots."""
    from op_plugin._simulator.interpreter.executor.checks import GeExecutionError, kernel_failure

    def walk(inputs):
        values = plan._template.copy()
        plan._data_value(inputs, values)
        for slot, value in folded.items():
            values[slot] = value
        for step in plan.unfolded_steps:
            try:
                outputs = step.kernel([values[slot] for slot in step.arg_slots])
            except GeExecutionError:
                raise
            except Exception as error:
                raise kernel_failure(step.op, error) from error
            if step.writes_inputs:
                plan.write_inputs(step, outputs, inputs)
            for index, slot in step.out_slots:
                values[slot] = outputs[index]
            for slot in step.free_after:
                values[slot] = None
        return [values[slot] for slot in plan.output_slots]

    return walk


def _unprepared(plan) -> dict:
    """step -> a call that prepares the node's kernel on every call (the prepare phase not cached)."""
    from op_plugin._simulator.interpreter.prepared import direct_specs

    def every_call(kernel):
        return lambda *grouped: kernel.call_for(direct_specs(grouped))(*grouped)

    return {step: every_call(step.kernel) for step in plan.unfolded_steps}


def per_type_us(plans: dict, call, calls: int) -> tuple[dict, dict]:
    """({GE type: us per call}, {GE type: unfolded nodes}): the median over `calls` calls of `call` of each
    type's summed time, from a timer (perf_counter: ~0.2 us a reading; the thread's CPU clock is a ~2 us
    system call here, which would swamp nodes of a few us) around every unfolded node's prepared call
    of the verified programs of `plans` (plan -> the inputs of one of its calls). The programs are rebuilt
    with the timers and stay so: profile last."""
    from op_plugin._simulator.interpreter.executor.program import build_program

    per_type: dict[str, float] = {}
    nodes: dict[str, int] = {}

    def timed(fn, op_type):
        def wrapper(*a, **k):
            start = perf()
            try:
                return fn(*a, **k)
            finally:
                per_type[op_type] = per_type.get(op_type, 0.0) + perf() - start
        return wrapper

    for p in plans:
        for step in p.unfolded_steps:
            nodes[step.op.type] = nodes.get(step.op.type, 0) + 1
        for signature, verified in list((p._verified or {}).items()):
            timed_calls = {step: timed(fn, step.op.type) for step, fn in verified.calls.items()}
            p._verified[signature] = verified._replace(program=build_program(p, plans[p], verified.folded,
                                                                             timed_calls))
    call()
    samples = []
    for _ in range(calls):
        per_type.clear()
        call()
        samples.append(dict(per_type))
    return {t: median(sample.get(t, 0.0) for sample in samples) * 1e6 for t in nodes}, nodes


def child(payload: dict) -> dict:
    import time

    import torch

    torch.set_num_threads(payload.get("threads", 1))
    import op_plugin  # noqa: F401
    from op_plugin._simulator import load_simulated_torchair
    from op_plugin._simulator.interpreter.executor import plan as plan_module
    from op_plugin._simulator.interpreter.executor.program import build_program

    from .zoo_steady import _load

    load_simulated_torchair()
    plans = {}  # plan -> the inputs of its latest call
    original_run = plan_module.GraphPlan.run

    def recording_run(self, inputs):
        plans[self] = inputs
        return original_run(self, inputs)

    plan_module.GraphPlan.run = recording_run
    model_name, batch, length = payload["model"]
    model, args, kwargs = _load(model_name, batch, length)
    compiled = torch.compile(model, backend="npugraph")
    call = {"eager": lambda: model(*args, **kwargs), "npugraph": lambda: compiled(*args, **kwargs)}
    with torch.no_grad():
        for _ in range(payload["warmup"]):
            call["eager"]()
            call["npugraph"]()
        # per plan and signature: the program (prepared calls), the program preparing on every call, the step walk
        variants = {}
        for p, inputs in plans.items():
            for signature, verified in p._verified.items():
                variants[p, signature] = {
                    "program": verified,
                    "unprepared": verified._replace(program=build_program(p, inputs, verified.folded,
                                                                          _unprepared(p))),
                    "step_walk": verified._replace(program=_step_walk(p, verified.folded))}

        def use(which):
            for (p, signature), variant in variants.items():
                p._verified[signature] = variant[which]

        times = {m: [] for m in MODES}
        cpu = {m: [] for m in MODES}
        for _ in range(payload["rounds"]):
            for mode in MODES:
                if mode != "eager":
                    use(mode)
                fn = call["eager" if mode == "eager" else "npugraph"]
                for _ in range(payload["calls_per_round"]):
                    start, cpu_start = perf(), time.thread_time()
                    fn()
                    cpu[mode].append(time.thread_time() - cpu_start)
                    times[mode].append(perf() - start)
        use("program")
        prepared_nodes = sum(1 for p in plans for step in p.unfolded_steps if step.kernel.prepare is not None)

        ge_us, nodes = per_type_us(plans, call["npugraph"], payload["profile_calls"])
        calls = payload["profile_calls"]
        aten = {}
        for mode in ("eager", "npugraph"):
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
                for _ in range(calls):
                    call[mode]()
            aten[mode] = {e.key: [e.self_cpu_time_total / calls, e.count / calls] for e in prof.key_averages()
                          if e.key.startswith("aten::")}
    return {"times": times, "cpu": cpu, "ge_us": ge_us, "nodes": nodes, "aten": aten, "prepared_nodes": prepared_nodes}


def run(quick: bool = False) -> dict:
    cfg = QUICK if quick else FULL
    figures, speed_rows, tables, notes = {}, [], [], []
    for model in cfg["models"]:
        out = run_child("ge_profile", {"model": model, **{k: cfg[k] for k in
                                                          ("warmup", "rounds", "calls_per_round", "profile_calls")}},
                        timeout=1800)
        name = f"{model[0]}.B{model[1]}xL{model[2]}"
        for clock in ("times", "cpu"):
            med = {m: median(out[clock][m]) for m in MODES}
            label = "wall" if clock == "times" else "CPU"
            figures[f"program_vs_eager.{label}.{name}"] = med["program"] / med["eager"]
            figures[f"unprepared_vs_eager.{label}.{name}"] = med["unprepared"] / med["eager"]
            figures[f"step_walk_vs_eager.{label}.{name}"] = med["step_walk"] / med["eager"]
            speed_rows.append([name, label, out["prepared_nodes"], med["eager"] * 1e3, med["program"] * 1e3,
                               med["unprepared"] * 1e3, med["step_walk"] * 1e3, med["program"] / med["eager"],
                               med["unprepared"] / med["eager"], med["step_walk"] / med["eager"]])
        ge_rows = sorted(out["ge_us"].items(), key=lambda kv: -kv[1])[:cfg["top"]]
        tables.append({"title": f"{name}: GE types by kernel time per call (us, median over calls), all nodes of "
                                "the type",
                       "columns": ["GE type", "nodes", "kernel us per call", "us per node"],
                       "rows": [[t, out["nodes"].get(t, 0), us, us / max(out["nodes"].get(t, 1), 1)]
                                for t, us in ge_rows]})
        eager, sim = out["aten"]["eager"], out["aten"]["npugraph"]
        keys = sorted(set(eager) | set(sim), key=lambda k: -max(eager.get(k, [0, 0])[0], sim.get(k, [0, 0])[0]))
        tables.append({"title": f"{name}: aten ops per call under torch.profiler (self CPU us; calls), eager vs "
                                "the simulator's kernels",
                       "columns": ["aten op", "eager us", "eager calls", "npugraph us", "npugraph calls"],
                       "rows": [[k, eager.get(k, [0, 0])[0], eager.get(k, [0, 0])[1], sim.get(k, [0, 0])[0],
                                 sim.get(k, [0, 0])[1]] for k in keys[:cfg["top"]]]})
    tables.insert(0, {"title": "Steady call (median ms; ratios against eager measured in the same rounds)",
                      "columns": ["model", "clock", "nodes with a prepare phase", "eager ms", "npugraph (program) ms",
                                  "npugraph (program, preparing every call) ms", "npugraph (step walk) ms",
                                  "program / eager", "preparing every call / eager", "step walk / eager"],
                      "rows": speed_rows})
    notes.append("One fresh process per model, one intra-op thread; eager, program, program preparing every call "
                 "and step walk alternate in rounds, so the ratios share the machine's load. program: the generated "
                 "program with the calls the nodes' kernels were prepared with for the signature "
                 "(interpreter/prepared.py); preparing every call: the same program running each node's prepare "
                 "phase on every call; step walk: the pre-program executor loop reproduced in this script. All "
                 "three run the same compiled graph.")
    notes.append("clock: wall (perf_counter) and CPU (the calling thread's CPU time, time.thread_time, with one "
                 "intra-op thread: what the call computes, barely changed by other processes' load).")
    notes.append("Profiler times are inflated by the profiler and are for comparing ops, not calls.")
    return {"name": "ge_profile", "title": "Steady call per GE type against eager's aten ops",
            "config": {"models (name, batch, length)": cfg["models"], "rounds": cfg["rounds"],
                       "calls per round": cfg["calls_per_round"], "profiled calls": cfg["profile_calls"]},
            "figures": figures, "tables": tables, "goals": [], "notes": notes}


def main() -> None:
    cli("ge_profile", __doc__.splitlines()[0], run, child)


if __name__ == "__main__":
    main()

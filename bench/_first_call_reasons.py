"""The measured reasons of compile_time's missed goals, written from its figures (CPU clock)."""
from __future__ import annotations

GOAL = 1.15
PHASES = ("dynamo", "aot", "backend_setup", "torchair_lowering", "ge_load", "graphplan_compile", "first_run", "other")

NOTES = [
    "Each sample is a fresh interpreter; backends alternate sample by sample; medians over the repeats; one "
    "intra-op thread (on a shared 2-core machine the OpenMP workers' spin-waiting made the first run's CPU time "
    "bimodal, 0.05 or 0.4 s for the same 2-layer run).",
    "Wall and CPU clocks: the goal is evaluated on wall time as before; CPU time (time.process_time) is given beside "
    "it because on a shared machine the wall clock mostly measures the other jobs. GC CPU is the garbage "
    "collector's own time (gc.callbacks), inside the parts it interrupted: a full collection walks every object the "
    "process tracks, and when one falls is decided by allocation counts, not by the code being timed.",
    "The ranges show the spread over the samples; interference only adds time, so the ratio of the minima is a "
    "robustness check next to the ratio of the medians (the figure).",
    "npugraph's first call includes the first run on the simulator (GE load, GraphPlan compile, execution); "
    "aot_eager's first call includes its first eager run.",
    "The parts come from timers wrapped in the child around dynamo's convert_frame._compile, "
    "OutputGraph.call_user_compiler, aot_module_simplified (aot_eager's and TorchAir's), op_plugin's "
    "install_converters, TorchAir's _NpuFxCompiler._gen_compiled_gm, TorchNpuGraph.load, the executor's "
    "compile_graph and the first GraphPlan.run. dynamo = _compile minus call_user_compiler; AOT autograd = "
    "aot_module_simplified minus TorchAir's lowering inside it; backend set-up = the rest of call_user_compiler; "
    "'other' = the first call minus the parts (guards, TorchAir's runtime wrapper around the GE run).",
    "realpath calls: the fixed cost once in dynamo's window under npugraph (1587 calls when TorchAir was loaded "
    "before the first trace, against 451 under aot_eager): load_torchair imports "
    "torch.distributed.tensor.experimental._func_map before TorchAir, so it is 0 now (issue 28).",
]


def excess_detail(cfg: dict, figures: dict, cpu_ratios: list) -> str:
    """The goal row's reason: npugraph minus aot_eager per CPU part where the CPU ratio is worst."""
    layers = cfg["layers"][cpu_ratios.index(max(cpu_ratios))]
    part = lambda p: (figures[f"npugraph.L{layers}.{p}_cpu_s"] - figures[f"aot_eager.L{layers}.{p}_cpu_s"])  # noqa: E731
    gc_diff = figures[f"npugraph.L{layers}.gc_cpu_s"] - figures[f"aot_eager.L{layers}.gc_cpu_s"]
    return (f"; excess at L{layers}, CPU: TorchAir lowering {part('torchair_lowering'):+.3f} s, GE load + plan "
            f"{part('ge_load') + part('graphplan_compile'):+.3f} s, AOT {part('aot'):+.3f} s, dynamo "
            f"{part('dynamo'):+.3f} s, set-up {part('backend_setup'):+.3f} s, first run {part('first_run'):+.3f} s "
            f"(GC inside {gc_diff:+.3f} s)")


def why_missed(cfg: dict, figures: dict, ratios: list, cpu_ratios: list, startup: dict, load_parts: dict) -> list:
    """The measured reason of each missed goal, from the CPU-clock parts at the worst layer count."""
    notes = []
    if max(ratios) > GOAL:
        layers = cfg["layers"][cpu_ratios.index(max(cpu_ratios))]
        fig = lambda backend, part: figures[f"{backend}.L{layers}.{part}_cpu_s"]  # noqa: E731
        diff = {p: fig("npugraph", p) - fig("aot_eager", p) for p in PHASES}
        aot_first = figures[f"aot_eager.L{layers}.first_call_cpu_s"]
        excess = figures[f"npugraph.L{layers}.first_call_cpu_s"] - aot_first
        notes.append(
            f"Why the first-call goal is missed (CPU clock, {layers} layers, where the CPU ratio is worst): npugraph "
            f"takes {excess:+.3f} s over aot_eager's {aot_first:.3f} s (the goal allows {(GOAL - 1) * aot_first:.3f} "
            f"s). npugraph minus aot_eager per part: dynamo {diff['dynamo']:+.3f} s, AOT autograd {diff['aot']:+.3f} "
            f"s, backend set-up {diff['backend_setup']:+.3f} s (op_plugin's install_converters "
            f"{fig('npugraph', 'install_converters'):.3f} s: it imports TorchAir's ge_converter.custom package, "
            f"~125 converter modules TorchAir itself imports at its first converter lookup, and installs op_plugin's "
            f"converters), TorchAir lowering {diff['torchair_lowering']:+.3f} s, GE load + GraphPlan compile "
            f"{diff['ge_load'] + diff['graphplan_compile']:+.3f} s, first run {diff['first_run']:+.3f} s, other "
            f"{diff['other']:+.3f} s; GC inside the first call {figures[f'npugraph.L{layers}.gc_cpu_s']:.3f} s vs "
            f"{figures[f'aot_eager.L{layers}.gc_cpu_s']:.3f} s. The npugraph-only parts (TorchAir's lowering, the "
            f"GE graph's load, plan and first execution) are the work GE mode adds; dynamo's window is no longer "
            f"larger under npugraph.")
    first_layers = cfg["layers"][0]
    if max(figures[f"ratio_first_call_cold.L{layer}"] for layer in cfg["layers"]) > 1.5:
        load_cpu = startup["simulator_load_cpu_s"]
        times = load_cpu / figures[f"aot_eager.L{first_layers}.first_call_cpu_s"]
        notes.append(
            f"Why the cold goal is missed: the simulator load ({load_cpu:.2f} s CPU, split below) alone is "
            f"{times:.1f}x aot_eager's whole first call at {first_layers} layers; fresh_process measures the "
            f"issue's goal (fresh process to first result, where both backends' imports count).")
    if startup["simulator_load_s"] > 1.0:
        notes.append(
            f"Why the simulator-load goal is missed: load_torchair takes {startup['simulator_load_cpu_s']:.2f} s CPU "
            f"({startup['simulator_load_gc_cpu_s']:.2f} s of it in the garbage collector: TorchAir's import adds "
            f"~145,000 tracked objects to torch's ~316,000 and triggers full collections). Measured apart in one "
            f"process, after the imports an aot_eager compile makes too ({load_parts['shared_cpu']:.2f} s): the rest "
            f"of torch._inductor's pattern matcher and lowering, which torchair.patterns imports at TorchAir's "
            f"import and aot_eager does not, {load_parts['inductor_cpu']:.2f} s CPU (GC "
            f"{load_parts['inductor_gc_cpu']:.2f} s); the rest (~{load_parts['torchair_modules']} TorchAir modules, "
            f"op_plugin's hosting) {load_parts['rest_cpu']:.2f} s (GC {load_parts['rest_gc_cpu']:.2f} s). Both are "
            f"TorchAir's own imports, as on an Ascend host (where torch_npu imports TorchAir at import).")
    return notes

"""9. A fresh process to its first result: npugraph vs aot_eager, and what runs inside dynamo's window.

Each sample is a fresh interpreter that imports torch and op_plugin, compiles the decoder model
(bench/_model.py) with one backend and prints the first result; the parent times it from spawn to
the result line. Backends alternate pair by pair; the figure is the median over the pairs of the
npugraph / aot_eager ratio of a pair (both halves of a pair share the machine's load). Wall time on
a shared machine is noisy, so each child also reports its CPU time (time.process_time, which other
processes' load barely changes) to the first result, and the ratio of those is given beside.

Inside the child, for the first call: dynamo's share (`_compile.compile_inner` minus
`call_user_compiler`, torch's own counters) and how many `os.path.realpath` calls run in the first
call. The latter is the fixed cost found in dynamo's window under npugraph: dynamo's first trace
imports torch.distributed.tensor.experimental._func_map, whose custom ops' register_fake looks up
their source with inspect.getmodule, which resolves the path of every module imported since the
previous lookup (TorchAir's ~1100 modules when TorchAir was loaded before the first trace).
`load_torchair` now imports it before TorchAir. In a process whose first compile is npugraph's,
TorchAir loads inside the backend, after dynamo's trace, so the count is the same for both backends.
"""
from __future__ import annotations

if __name__ == "__main__" and not __package__:  # `python bench/fresh_process.py`
    import pathlib, sys  # noqa: E401
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))
    from bench._common import script_shim
    script_shim(__file__, "fresh_process")
    raise SystemExit

import json
import os
import subprocess
import sys

from ._common import RESULT_MARK, ROOT, cli, goal, median, perf

FULL = {"layers": [2, 12], "pairs": 5}
QUICK = {"layers": [1], "pairs": 1}
BACKENDS = ("aot_eager", "npugraph")
GOAL_FRESH, GOAL_FIRST = 1.5, 1.15


def child(payload: dict) -> dict:
    import time

    cpu0 = time.process_time()
    import torch

    import op_plugin  # noqa: F401
    from ._model import decoder_model, model_inputs

    model = decoder_model(payload["layers"])
    inputs = model_inputs()
    compiled = torch.compile(model, backend=payload["backend"])
    import os.path as os_path
    import posixpath

    realpaths = [0]
    original = posixpath.realpath

    def counting_realpath(*args, **kwargs):
        realpaths[0] += 1
        return original(*args, **kwargs)

    with torch.no_grad():
        start, cpu_start = perf(), time.process_time()
        posixpath.realpath = os_path.realpath = counting_realpath
        try:
            result = compiled(*inputs)
        finally:
            posixpath.realpath = os_path.realpath = original
        first, cpu_first = perf() - start, time.process_time() - cpu_start
    metrics = torch._dynamo.utils.compilation_time_metrics
    dynamo = sum(metrics.get("_compile.compile_inner", [])) - sum(metrics.get("OutputGraph.call_user_compiler", []))
    return {"first_call": first, "cpu_first_call": cpu_first, "dynamo": dynamo, "realpaths": realpaths[0],
            "cpu_to_result": time.process_time() - cpu0, "checksum": float(result.double().sum())}


def _spawn(payload: dict) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    cmd = [sys.executable, "-m", "bench.fresh_process", "--child", json.dumps(payload)]
    start = perf()
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    reply = None
    for line in proc.stdout:
        if line.startswith(RESULT_MARK):
            reply = json.loads(line[len(RESULT_MARK):])
            reply["wall_to_result"] = perf() - start
            break
    proc.stdout.read()
    if proc.wait(timeout=900) != 0 or reply is None:
        raise RuntimeError(f"bench child fresh_process {payload} failed (exit {proc.returncode})")
    return reply


def run(quick: bool = False) -> dict:
    cfg = QUICK if quick else FULL
    figures, rows, goals = {}, [], []
    for layers in cfg["layers"]:
        samples = {b: [] for b in BACKENDS}
        for _ in range(cfg["pairs"]):
            for backend in BACKENDS:
                samples[backend].append(_spawn({"backend": backend, "layers": layers}))
        pair = lambda key, s=samples: [n[key] / a[key] for a, n in zip(s["aot_eager"], s["npugraph"],  # noqa: E731
                                                                      strict=True)]
        wall, cpu, first, cpu_first = (median(pair(k)) for k in ("wall_to_result", "cpu_to_result", "first_call",
                                                                   "cpu_first_call"))
        med = {b: {k: median(s[k] for s in samples[b]) for k in samples[b][0]} for b in BACKENDS}
        figures[f"fresh_wall_ratio.L{layers}"] = wall
        figures[f"fresh_cpu_ratio.L{layers}"] = cpu
        figures[f"first_call_ratio.L{layers}"] = first
        for b in BACKENDS:
            rows.append([layers, b, med[b]["wall_to_result"], med[b]["cpu_to_result"], med[b]["first_call"],
                         med[b]["cpu_first_call"], med[b]["dynamo"], med[b]["realpaths"]])
        rows.append([layers, "npugraph / aot_eager (median of pair ratios)", wall, cpu, first, cpu_first,
                     median(pair("dynamo")), ""])
        goals.append(goal(f"fresh process to first result <= 1.5x aot_eager, {layers} layers (median of "
                          f"{cfg['pairs']} alternating pairs, wall)", wall, GOAL_FRESH, "x",
                          f"CPU-time ratio {cpu:.2f}x"))
    return {"name": "fresh_process", "title": "Fresh process to first result, npugraph vs aot_eager",
            "config": {"layers": cfg["layers"], "alternating pairs": cfg["pairs"]},
            "figures": figures, "goals": goals,
            "tables": [{"title": "Medians over the pairs (seconds; realpath calls counted in the first call)",
                        "columns": ["layers", "backend", "spawn to result s", "CPU to result s", "first call s",
                                    "first call CPU s", "dynamo share s", "realpath calls in the first call"],
                        "rows": rows}],
            "notes": ["Wall times include interpreter start-up and every import; on a shared machine the CPU-time "
                      "ratio is the steadier figure.",
                      "CPU to result: the child's CPU time (time.process_time) from its start, after the bare "
                      "interpreter start-up, through `import torch`, `import op_plugin`, the compile and the first "
                      "call."]}


def main() -> None:
    cli("fresh_process", __doc__.splitlines()[0], run, child)


if __name__ == "__main__":
    main()

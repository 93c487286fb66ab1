"""13. The virtual NPU's cost: eager on npu tensors against eager on CPU tensors, and a compiled call on npu
tensors against the same compiled call on CPU tensors (issue 33 item 7).

Each model (the zoo's and the project's examples, as in zoo_steady) runs in a fresh process with
OP_PLUGIN_VIRTUAL_NPU=1: the same module and inputs, a copy moved to `npu`; eager CPU, eager npu, npugraph on
CPU tensors and npugraph on npu tensors timed in alternating rounds (so drift hits them alike), medians.
On npu tensors eager pays the device's dispatch: the C++ fallback (csrc/cpu_fallback.cpp) for most ops, and
the GE kernel of ge_eager.py for the ops whose torch_npu eager kernel is the GE one (matmul family, softmax,
layer norm, gelu): those run CANN's semantics (float32 accumulation), which costs more than the CPU kernel.

Goals: eager on npu tensors within 1.3x CPU eager; the compiled call on npu tensors no slower than on CPU
tensors (1.05x, the rounds' noise).
"""
from __future__ import annotations

if __name__ == "__main__" and not __package__:  # `python bench/npu_eager.py`
    import pathlib, sys  # noqa: E401
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))
    from bench._common import script_shim
    script_shim(__file__, "npu_eager")
    raise SystemExit

import os

from ._common import cli, goal, median, perf, run_child

FULL = {"models": [("bert", 2, 12), ("bert", 16, 64), ("t5_encoder", 2, 12), ("gpt2", 2, 12),
                   ("example:bert_layer", 2, 7), ("example:llama_block", 2, 5)],
        "warmup": 3, "rounds": 6, "calls_per_round": 5}
QUICK = {"models": [("example:bert_layer", 2, 7)], "warmup": 1, "rounds": 1, "calls_per_round": 2}
WAYS = ("eager_cpu", "eager_npu", "npugraph_cpu", "npugraph_npu")
GOAL_EAGER, GOAL_COMPILED = 1.3, 1.05


def _to_npu(value):
    import torch

    return value.npu() if isinstance(value, torch.Tensor) else value


def child(payload: dict) -> dict:
    import copy

    import torch

    torch.set_num_threads(1)
    import op_plugin  # noqa: F401  (the npugraph backend)

    from .zoo_steady import _load

    cfg = payload["cfg"]
    module, args, kwargs = _load(*payload["model"])
    module.eval()
    on_npu = copy.deepcopy(module).npu()
    npu_args, npu_kwargs = [_to_npu(a) for a in args], {k: _to_npu(v) for k, v in kwargs.items()}
    torch._dynamo.reset()
    calls = {"eager_cpu": lambda: module(*args, **kwargs), "eager_npu": lambda: on_npu(*npu_args, **npu_kwargs)}
    compiled_cpu = torch.compile(module, backend="npugraph", dynamic=False)
    compiled_npu = torch.compile(on_npu, backend="npugraph", dynamic=False)
    calls["npugraph_cpu"] = lambda: compiled_cpu(*args, **kwargs)
    calls["npugraph_npu"] = lambda: compiled_npu(*npu_args, **npu_kwargs)
    times = {way: [] for way in WAYS}
    with torch.no_grad():
        for way in WAYS:
            for _ in range(cfg["warmup"]):
                calls[way]()
        for _ in range(cfg["rounds"]):
            for way in WAYS:
                start = perf()
                for _ in range(cfg["calls_per_round"]):
                    calls[way]()
                times[way].append((perf() - start) / cfg["calls_per_round"])
    return {"median": {way: median(times[way]) for way in WAYS}}


def run(quick: bool = False) -> dict:
    cfg = QUICK if quick else FULL
    os.environ["OP_PLUGIN_VIRTUAL_NPU"] = "1"  # the children inherit it: the device comes up in their import torch
    rows, figures, worst_eager, worst_compiled = [], {}, (0.0, ""), (0.0, "")
    for model in cfg["models"]:
        med = run_child("npu_eager", {"model": model, "cfg": cfg})["median"]
        key = f"{model[0]}.B{model[1]}xL{model[2]}"
        eager, compiled = med["eager_npu"] / med["eager_cpu"], med["npugraph_npu"] / med["npugraph_cpu"]
        figures[f"eager_npu_over_cpu.{key}"], figures[f"npugraph_npu_over_cpu.{key}"] = eager, compiled
        rows.append([key] + [med[way] * 1e3 for way in WAYS] + [eager, compiled])
        worst_eager, worst_compiled = max(worst_eager, (eager, key)), max(worst_compiled, (compiled, key))
    return {"name": "npu_eager", "title": "The virtual NPU's cost: npu tensors against CPU tensors",
            "config": dict(cfg), "figures": figures,
            "goals": [goal("eager on npu tensors within 1.3x CPU eager (worst model)", worst_eager[0], GOAL_EAGER,
                           "x", f"worst: {worst_eager[1]}"),
                      goal("npugraph on npu tensors no slower than on CPU tensors (worst model)", worst_compiled[0],
                           GOAL_COMPILED, "x", f"worst: {worst_compiled[1]}")],
            "tables": [{"title": "Median ms per call (one thread, static shapes) and ratios",
                        "columns": ["model", "eager cpu", "eager npu", "npugraph cpu", "npugraph npu",
                                    "eager npu / cpu", "npugraph npu / cpu"], "rows": rows}],
            "notes": ["eager on npu tensors runs the GE kernels of ge_eager.py for the matmul family, softmax, "
                      "layer norm and gelu (float32 accumulation of 16-bit inputs, as the NPU): part of its excess "
                      "is those kernels' own work, not dispatch."]}


def main() -> None:
    cli("npu_eager", __doc__.splitlines()[0], run, child)


if __name__ == "__main__":
    main()

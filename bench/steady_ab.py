"""Steady call npugraph / eager for two op_plugin trees, in alternating fresh processes (before/after a change).

    git archive <commit> op_plugin yaml | tar -x -C /tmp/old
    python bench/steady_ab.py /tmp/old /path/to/repo --pairs 3

Each process imports op_plugin from the given tree, compiles the zoo's BERT encoder, T5 encoder, ResNet and
EfficientNet (batch 2; tests/zoo/conftest.py of this repository) with npugraph and times eager and npugraph
calls in alternating rounds with the calling thread's CPU time (time.thread_time, one intra-op thread), which
another process's load changes far less than wall time. Prints the npugraph / eager ratio per model, per
process and the median over the pairs. Not part of `make bench` (it needs a second tree).
`--modes static,dynamic` compiles each model both ways (torch.compile's `dynamic`); `--threads 2` runs two
intra-op threads and times the process's CPU time (the pool's too) instead of the calling thread's.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODELS = [("bert", 2, 12), ("t5_encoder", 2, 12), ("resnet", 2, 0), ("efficientnet", 2, 0)]
# Beyond the zoo's small configs (--models): ResNet-18's own layout (basic blocks [2, 2, 2, 2], widths 64-512)
# on 2 x 3 x 64 x 64 images, the size class of issue 28's first ResNet-18 figure (eager ~8 ms); BERT on 16 x 64.
EXTRA = {"resnet18": ("resnet18", 2, 64), "bert16x64": ("bert", 16, 64)}
MARK = "STEADY-AB "


def _build(zoo, name: str, batch: int, length: int):
    """(model, kwargs) of a zoo model, or of ResNet-18 at its real widths."""
    import torch

    torch.manual_seed(0)
    if name == "resnet18":
        from transformers import ResNetConfig, ResNetModel

        model = ResNetModel(ResNetConfig(layer_type="basic", depths=[2, 2, 2, 2],
                                         hidden_sizes=[64, 128, 256, 512])).eval()
        return model, {"pixel_values": torch.randn(batch, 3, length, length)}
    entry = zoo.ZOO[name]
    return entry.build(), entry.inputs(batch, length)


def child(tree: str, rounds: int, models: list, modes: list, threads: int) -> None:
    import importlib.util
    import time

    sys.path.insert(0, tree)
    import torch

    torch.set_num_threads(threads)
    clock = time.thread_time if threads == 1 else time.process_time
    import op_plugin
    from op_plugin._simulator import load_simulated_torchair

    if not op_plugin.__file__.startswith(tree):
        raise RuntimeError(f"op_plugin came from {op_plugin.__file__}, not {tree}")
    load_simulated_torchair()
    spec = importlib.util.spec_from_file_location("steady_ab_zoo", ROOT / "tests" / "zoo" / "conftest.py")
    zoo = importlib.util.module_from_spec(spec)
    sys.modules["steady_ab_zoo"] = zoo
    spec.loader.exec_module(zoo)
    out = {}
    for (model_label, (name, batch, length)), mode in [(m, mode) for m in models for mode in modes]:
        label = model_label if modes == ["static"] else f"{model_label}.{mode}"
        torch._dynamo.reset()
        model, kwargs = _build(zoo, name, batch, length)
        fns = {"eager": model, "npugraph": torch.compile(model, backend="npugraph", dynamic=mode == "dynamic")}
        times = {k: [] for k in fns}
        with torch.no_grad():
            for _ in range(5):
                for fn in fns.values():
                    fn(**kwargs)
            for _ in range(rounds):
                for key, fn in fns.items():
                    for _ in range(4):
                        start = clock()
                        fn(**kwargs)
                        times[key].append(clock() - start)
        med = {k: statistics.median(v) for k, v in times.items()}
        out[label] = {"eager_ms": med["eager"] * 1e3, "npugraph_ms": med["npugraph"] * 1e3,
                     "ratio": med["npugraph"] / med["eager"]}
    print(MARK + json.dumps(out), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trees", nargs="*", help="two op_plugin source trees (before, after)")
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--models", default=",".join(name for name, _, _ in MODELS),
                        help=f"comma-separated: zoo models {[m[0] for m in MODELS]} and/or {list(EXTRA)}")
    parser.add_argument("--modes", default="static", help="comma-separated: static and/or dynamic")
    parser.add_argument("--threads", type=int, default=1, help="intra-op threads")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    known = {name: (name, (name, batch, length)) for name, batch, length in MODELS}
    known.update({label: (label, spec) for label, spec in EXTRA.items()})
    models = [known[name] for name in args.models.split(",")]
    if args.child:
        child(args.child, args.rounds, models, args.modes.split(","), args.threads)
        return
    if len(args.trees) != 2:
        parser.error("give two trees: before and after")
    ratios = {tree: {} for tree in args.trees}
    for _ in range(args.pairs):
        for tree in args.trees:
            proc = subprocess.run([sys.executable, __file__, "--child", str(Path(tree).resolve()),
                                   "--rounds", str(args.rounds), "--models", args.models, "--modes", args.modes,
                                   "--threads", str(args.threads)],
                                  capture_output=True, text=True, cwd="/")
            line = next((x for x in proc.stdout.splitlines() if x.startswith(MARK)), None)
            if line is None:
                raise RuntimeError(f"child for {tree} failed:\n{proc.stderr[-3000:]}")
            for name, figures in json.loads(line[len(MARK):]).items():
                ratios[tree].setdefault(name, []).append(figures["ratio"])
                print(f"{tree}: {name} eager {figures['eager_ms']:.2f} ms, npugraph {figures['npugraph_ms']:.2f} ms, "
                      f"ratio {figures['ratio']:.2f}", flush=True)
    for tree in args.trees:
        for name, values in ratios[tree].items():
            print(f"{tree}: {name} npugraph/eager per pair {[round(v, 2) for v in values]}, "
                  f"median {statistics.median(values):.2f}")


if __name__ == "__main__":
    main()

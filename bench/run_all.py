"""Run every benchmark and write docs/benchmarks.md and docs/benchmarks-lowering.png.

    make bench                      # = make setup, then this
    python -m bench.run_all         # or: python bench/run_all.py
    python -m bench.run_all --quick --out /tmp/bench.md    # tiny configuration, figures meaningless
    python -m bench.run_all --skip suite_time               # without the fresh-clone CI timing (~20 min)

Each benchmark runs in its own fresh interpreter (`python -m bench.<name> --json ...`), so one
benchmark's imports, caches and TorchAir patches never affect another's figures.
"""
from __future__ import annotations

if __name__ == "__main__" and not __package__:  # `python bench/run_all.py`
    import pathlib, sys  # noqa: E401
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))
    from bench._common import script_shim
    script_shim(__file__, "run_all")
    raise SystemExit

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ._common import ROOT, machine_info, versions
from ._report import fmt, render_markdown

MODULES = ("compile_time", "lowering_scaling", "steady_state", "recompiles", "dispatch", "registration", "zoo_steady",
           "ge_profile", "fresh_process", "npu_tiers", "distributed_tier", "npu_eager", "startup", "suite_time")


def run_module(name: str, quick: bool, folder: Path) -> dict:
    out = folder / f"{name}.json"
    cmd = [sys.executable, "-m", f"bench.{name}", "--json", str(out)] + (["--quick"] if quick else [])
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    print(f"\n### bench.{name}", flush=True)
    start, load_before = time.perf_counter(), os.getloadavg()[0]
    subprocess.run(cmd, cwd=ROOT, env=env, check=True)
    result = json.loads(out.read_text(encoding="utf-8"))
    result.setdefault("config", {})["wall_s"] = round(time.perf_counter() - start, 1)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout
    result["measured"] = {"at": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "commit": commit.strip(),
                          "load": f"{load_before:.1f} -> {os.getloadavg()[0]:.1f}"}
    out.write_text(json.dumps(result, indent=1), encoding="utf-8")  # with its stamp, for a later --reuse
    return result


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.run_all", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny configuration (smoke test)")
    parser.add_argument("--out", default=str(ROOT / "docs" / "benchmarks.md"), help="markdown file to write")
    parser.add_argument("--only", help="comma-separated subset of " + ",".join(MODULES))
    parser.add_argument("--skip", default="", help="comma-separated benchmarks not to run (e.g. suite_time, "
                                                   "which runs CI's steps in a fresh clone: about 20 minutes)")
    parser.add_argument("--results", metavar="DIR", help="keep each benchmark's JSON in DIR (default: a temporary "
                                                         "directory)")
    parser.add_argument("--reuse", action="store_true", help="with --results: the page also shows the benchmarks "
                        "not run now from their JSON in DIR, each section stamped with when and at which commit "
                        "it was measured")
    args = parser.parse_args(argv)
    names = [n for n in MODULES if (not args.only or n in args.only.split(",")) and n not in args.skip.split(",")]
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)

    start = time.perf_counter()
    load_before = os.getloadavg()
    results = {}
    with tempfile.TemporaryDirectory(prefix="op_plugin_bench_") as tmp:
        folder = Path(args.results) if args.results else Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        for name in names:
            results[name] = run_module(name, args.quick, folder)
        if args.reuse and args.results:
            for name in MODULES:
                saved = folder / f"{name}.json"
                if name not in results and saved.exists():
                    results[name] = json.loads(saved.read_text(encoding="utf-8"))
    results = [results[n] for n in MODULES if n in results]
    wall = time.perf_counter() - start
    load_after = os.getloadavg()

    plots = {}
    for result in results:
        if result["name"] == "lowering_scaling":
            from .lowering_scaling import plot

            png = out.with_name(out.stem + "-lowering.png")
            plot(result, png)
            plots["lowering_scaling"] = png.name
    machine = machine_info()
    machine["load average (1 min) before / after the run"] = f"{load_before[0]:.2f} / {load_after[0]:.2f}"
    command = "make bench" if not args.quick else "python -m bench.run_all --quick"
    if args.reuse and len(results) > len(names):  # some sections come from earlier runs: say so, with their time
        command = "python -m bench.run_all --results DIR --reuse (sections from separate runs, stamped below)"
        wall = sum(r.get("config", {}).get("wall_s", 0) for r in results)
    text = render_markdown(results, machine=machine, versions=versions(), plots=plots, wall_s=wall, command=command)
    out.write_text(text, encoding="utf-8")
    print(f"\nwrote {out}" + (f" and {out.with_name(plots['lowering_scaling'])}" if plots else "")
          + f" in {wall:.0f} s")
    for result in results:
        for g in result.get("goals", []):
            print(f"  {'met   ' if g['met'] else 'MISSED'} {g['goal']}: {fmt(g['value'])}{g.get('unit', '')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

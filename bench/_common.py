"""Shared helpers of the benchmarks: command line, fresh-process runs, timing, machine facts.

Every benchmark module exposes `run(quick: bool) -> dict` (a *result*, below) and `main()`.
`python -m bench.<module> [--quick] [--json PATH]` prints the result's tables and figures.
A module that measures in fresh processes re-runs itself with `--child JSON`; the child
prints one line `BENCH-RESULT <json>` that `run_child` returns.

A result is a plain dict (JSON-serialisable):

    name     module name
    title    one line
    config   the counts used (repeats, sizes, calls), reported verbatim
    figures  flat {key: number}: the figures (the smoke test checks these keys)
    tables   [{title, columns, rows}]
    goals    [{goal, value, target, met, unit, detail}]
    notes    [str]: method, caveats
    profile  optional text: top profile entries where a goal is missed
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULT_MARK = "BENCH-RESULT "

perf = time.perf_counter


def median(values):
    values = list(values)
    return statistics.median(values) if values else float("nan")


def run_child(module: str, payload: dict, timeout: float = 900) -> dict:
    """Run `python -m bench.<module> --child JSON` in a fresh interpreter and return its result dict. The child's
    npugraph compile cache is an empty folder of its own: its compiles are first compiles (a miss), whatever an
    earlier run or the user's cache holds (bench/fresh_process.py measures the warm cache on purpose)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    env.pop("OP_PLUGIN_COMPILE_CACHE", None)
    cmd = [sys.executable, "-m", f"bench.{module}", "--child", json.dumps(payload)]
    with tempfile.TemporaryDirectory(prefix="op_plugin_bench_cache_") as cache_dir:
        env["OP_PLUGIN_CACHE_DIR"] = cache_dir
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout, env=env)
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith(RESULT_MARK):
            if proc.returncode != 0:
                break
            return json.loads(line[len(RESULT_MARK):])
    raise RuntimeError(f"bench child {module} {payload} failed (exit {proc.returncode}):\n"
                       f"{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")


def child_reply(result: dict) -> None:
    sys.stdout.flush()
    print(RESULT_MARK + json.dumps(result), flush=True)


def cli(name: str, description: str, run, child=None) -> None:
    """The command line of a benchmark module: --quick, --json PATH, --child JSON (internal)."""
    parser = argparse.ArgumentParser(prog=f"python -m bench.{name}", description=description)
    parser.add_argument("--quick", action="store_true",
                        help="tiny configuration (smoke test); figures are not meaningful")
    parser.add_argument("--json", metavar="PATH", help="also write the result as JSON")
    parser.add_argument("--child", metavar="JSON", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        child_reply(child(json.loads(args.child)))
        return
    start = perf()
    result = run(quick=args.quick)
    result.setdefault("config", {})["wall_s"] = round(perf() - start, 1)
    from ._report import print_result

    print_result(result)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1), encoding="utf-8")


def script_shim(file: str, module: str) -> None:
    """`python bench/<module>.py` runs like `python -m bench.<module>` (call before relative imports)."""
    import runpy

    sys.path.insert(0, str(Path(file).resolve().parent.parent))
    runpy.run_module(f"bench.{module}", run_name="__main__", alter_sys=True)


def goal(text: str, value: float, target: float, unit: str = "", detail: str = "",
         higher_is_better: bool = False) -> dict:
    met = value >= target if higher_is_better else value <= target
    return {"goal": text, "value": value, "target": target, "met": bool(met), "unit": unit, "detail": detail}


def time_per_call(fn, calls: int) -> list[float]:
    """Seconds of each of `calls` calls of fn()."""
    out = []
    for _ in range(calls):
        t = perf()
        fn()
        out.append(perf() - t)
    return out


def top_profile(profile, limit: int = 25, sort: str = "cumulative", filters: tuple = ()) -> str:
    """The first `limit` lines of a cProfile.Profile's stats (optionally restricted by regex filters)."""
    import io
    import pstats

    stream = io.StringIO()
    stats = pstats.Stats(profile, stream=stream)
    stats.sort_stats(sort)
    stats.print_stats(*filters, limit)
    text = stream.getvalue()
    # keep the table only, with paths shortened to the interesting part
    lines = [line for line in text.splitlines() if line.strip()]
    start = next((i for i, line in enumerate(lines) if line.lstrip().startswith("ncalls")), 0)
    return "\n".join(_shorten(line) for line in lines[start:])


def _shorten(line: str) -> str:
    for marker in ("site-packages/", "torch-npu-2.13.0/torch_npu/dynamo/", str(ROOT) + "/"):
        index = line.find(marker)
        if index >= 0:
            start = line.rfind(" ", 0, index) + 1
            line = line[:start] + line[index + len(marker):]
    return line


# --- machine and versions ------------------------------------------------------------------------

def machine_info() -> dict:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    memory = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                memory = f"{int(line.split()[1]) / 1024 ** 2:.1f} GiB"
    except OSError:
        pass
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count()
    return {
        "cpu": cpu,
        "cores": f"{os.cpu_count()} logical CPUs ({usable} usable by this process)",
        "memory": memory or "unknown",
        "os": f"{platform.system()} {platform.release()}",
    }


def versions() -> dict:
    from importlib import metadata

    def version(dist):
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            return "not installed"

    torch_npu = "not unpacked"
    try:
        from op_plugin._base import wheel as _install

        folder = _install.simulator_dir()
        found = _install._unpacked_version(folder)
        if found:
            torch_npu = f"{found} (unpacked for the CPU simulator, TorchAir from its wheel)"
    except Exception as error:  # pragma: no cover - reported, not fatal
        torch_npu = f"unknown ({error})"
    import op_plugin

    return {
        "python": platform.python_version(),
        "torch": version("torch"),
        "torch-npu": torch_npu,
        "op_plugin": getattr(op_plugin, "__version__", version("op_plugin")),
        "protobuf": version("protobuf"),
    }


def profile_seconds(profile, patterns: dict) -> dict:
    """Cumulative seconds per label from a cProfile.Profile; patterns: {label: [(path substring, function)]}.

    A label's figure is the sum of the cumulative times of the matching functions, so its patterns must
    not nest inside each other. Also returns "total": the profile's total own time.
    """
    import pstats

    stats = pstats.Stats(profile).stats
    out = {"total": sum(tt for (_, _, tt, _, _) in stats.values())}
    for label, wanted in patterns.items():
        out[label] = sum(ct for (path, _, func), (_, _, _, ct, _) in stats.items()
                         if any(sub in path and func == name for sub, name in wanted))
    return out

"""14. Start-up: `import op_plugin` against `import torch`, and the `op-plugin` command line's first line.

Every sample is a fresh process, timed by the parent from spawn to a line of output (a selector on the
child's stdout and stderr pipes); each round spawns, in an order rotated round by round:

* `python -c "import torch; print(MARK)"`, the baseline of both goals (interpreter start-up included);
* `python -c "import torch; import op_plugin; print(MARK)"`: a CPU host with the simulator installed,
  as a user's program imports them;
* the `op-plugin` console script with a few command lines (help, --version, and commands that load
  torch and op_plugin): spawn to the first line on either stream, and to the first line on stdout.

The figures are medians over the rounds of the per-round differences against that round's
`import torch`, so both sides of a difference share the machine's load; beside the wall clock, the
child's own CPU time when the line arrives (/proc): the steadier clock on a shared machine, the goals' one.
`OP_PLUGIN_PROGRESS=1` is set for every child: the CLI then prints its first line (`op-plugin
COMMAND: loading torch and op_plugin ...`, on stderr) as it does at a terminal; stderr is a pipe here.
"""
from __future__ import annotations

if __name__ == "__main__" and not __package__:  # `python bench/startup.py`
    import pathlib, sys  # noqa: E401
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))
    from bench._common import script_shim
    script_shim(__file__, "startup")
    raise SystemExit

import json
import os
import selectors
import subprocess
import sys
from pathlib import Path

from ._common import ROOT, cli, goal, median, perf

VALIDATED = ROOT / "yaml" / "elementwise_ops.yaml"  # a shipped YAML file, checked by `op-plugin validate`
COMMANDS = {"--help": ["--help"], "--version": ["--version"], "validate": ["validate", str(VALIDATED)],
            "list": ["list"], "demo": ["demo"]}  # demo: its first line comes before its compiles (seconds)
FULL = {"rounds": 7, "commands": tuple(COMMANDS)}
QUICK = {"rounds": 1, "commands": ("--help", "--version", "validate")}
GOAL_IMPORT_S, GOAL_CLI_S = 0.3, 1.0
SAMPLE_FIGURES = ("first_line", "first_stdout", "cpu_first_stdout", "cpu_to_exit")
MARK = "STARTUP-IMPORTED "
_REPORT = (f"import json, sys; print({MARK!r} + json.dumps([m for m in ('torch._dynamo', 'torch._inductor', "
           "'torchair') if m in sys.modules]), flush=True)")  # the heavy modules imported
IMPORTS = {"import torch": "import torch; " + _REPORT,
           "import torch; import op_plugin": "import torch; import op_plugin; " + _REPORT}


def console_script() -> Path:
    script = Path(sys.executable).with_name("op-plugin")
    if not script.is_file():
        raise RuntimeError(f"bench.startup: no `op-plugin` console script next to {sys.executable}; install "
                           "op_plugin into this interpreter's environment (`make setup`, or `pip install -e .`)")
    return script


def _env() -> dict:
    env = dict(os.environ)
    env["OP_PLUGIN_PROGRESS"] = "1"  # the CLI's first line, as at a terminal
    return env


def cpu_so_far(pid: int) -> float:
    """CPU seconds (user + system, every thread) process `pid` has used so far, from Linux's /proc."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError as error:
        raise RuntimeError(f"bench.startup reads a child's CPU time from /proc/{pid}/stat (Linux): {error}") from None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime: fields 14, 15


def spawn(label: str, cmd: list[str]) -> dict:
    """Run cmd: from spawn to its first line (on either stream) and to its first stdout line, wall seconds and
    the child's CPU seconds at that moment; its CPU seconds to exit."""
    start = perf()
    proc = subprocess.Popen(cmd, cwd=ROOT, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    first = {}  # stream -> (wall s, cpu s, line)
    buffers = {"stdout": b"", "stderr": b""}
    with selectors.DefaultSelector() as selector:
        selector.register(proc.stdout, selectors.EVENT_READ, "stdout")
        selector.register(proc.stderr, selectors.EVENT_READ, "stderr")
        while selector.get_map():
            for key, _ in selector.select():
                chunk = os.read(key.fileobj.fileno(), 65536)
                now = perf() - start
                if not chunk:
                    selector.unregister(key.fileobj)
                    continue
                buffers[key.data] += chunk
                if key.data not in first and b"\n" in buffers[key.data]:  # not reaped yet: /proc has it
                    line = buffers[key.data].split(b"\n", 1)[0].decode(errors="replace")
                    first[key.data] = (now, cpu_so_far(proc.pid), line)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    proc.stdout.close()
    proc.stderr.close()
    if proc.returncode != 0 or "stdout" not in first:
        raise RuntimeError(f"bench.startup: {label} ({' '.join(cmd)}) exited with {proc.returncode} "
                           f"(first stdout line: {'stdout' in first}):\n{buffers['stderr'].decode()[-3000:]}")
    stream = min(first, key=lambda s: first[s][0])
    sample = {"first_line": first[stream][0], "stream": stream, "first_stdout": first["stdout"][0],
              "cpu_first_stdout": first["stdout"][1], "cpu_to_exit": usage.ru_utime + usage.ru_stime}
    if first["stdout"][2].startswith(MARK):
        sample["loaded"] = json.loads(first["stdout"][2][len(MARK):])
    return sample


def processes(commands=tuple(COMMANDS)) -> dict[str, list[str]]:
    """Label -> command line of every process a round spawns."""
    if not VALIDATED.is_file():
        raise RuntimeError(f"bench.startup: {VALIDATED} (the shipped YAML `op-plugin validate` checks) is missing; "
                           "run the benchmark from a checkout of the repository")
    script = str(console_script())
    out = {label: [sys.executable, "-c", code] for label, code in IMPORTS.items()}
    out.update({f"op-plugin {name}": [script] + COMMANDS[name] for name in commands})
    return out


def import_time_profile(label: str, cmd: list[str], after: str | None, limit: int = 15) -> str:
    """`python -X importtime` of cmd: the modules with the most own import time (those imported after the
    top-level module `after` finished, when given)."""
    if cmd[0] != sys.executable:
        cmd = [sys.executable] + cmd  # the console script, run by this interpreter
    proc = subprocess.run([sys.executable, "-X", "importtime"] + cmd[1:], cwd=ROOT, env=_env(), capture_output=True,
                          text=True, timeout=300)
    rows = [line.split("|") for line in proc.stderr.splitlines() if line.startswith("import time:")]
    rows = [(int(own.split(":")[1]), int(total), name.rstrip()) for own, total, name in rows[1:]]  # [0]: header
    if after is not None:
        ends = [i for i, (_, _, name) in enumerate(rows) if name == f" {after}"]
        rows = rows[ends[0] + 1:] if ends else rows
    rows.sort(reverse=True)
    lines = [f"{label}: python -X importtime, the modules with the most own time (ms: own, cumulative)"]
    lines += [f"{own / 1000:8.1f} {total / 1000:8.1f} {name}" for own, total, name in rows[:limit]]
    return "\n".join(lines)


def run(quick: bool = False) -> dict:
    cfg = QUICK if quick else FULL
    commands = processes(cfg["commands"])
    labels = list(commands)
    samples = {label: [] for label in labels}
    for round_index in range(cfg["rounds"]):
        shift = round_index % len(labels)  # rotated: no process always runs first or after the same one
        for label in labels[shift:] + labels[:shift]:
            samples[label].append(spawn(label, commands[label]))
    torch_runs = samples["import torch"]

    def after_torch(label: str, key: str = "first_line", base: str = "first_line") -> float:
        return median(s[key] - t[base] for s, t in zip(samples[label], torch_runs, strict=True))

    stdout_wall = lambda label: after_torch(label, "first_stdout")  # noqa: E731
    stdout_cpu = lambda label: after_torch(label, "cpu_first_stdout", "cpu_first_stdout")  # noqa: E731
    figures, rows = {}, []
    for label in labels:
        med = {key: median(s[key] for s in samples[label]) for key in SAMPLE_FIGURES}
        rows.append([label, med["first_line"], "/".join(sorted({s["stream"] for s in samples[label]})),
                     med["first_stdout"], stdout_wall(label), med["cpu_first_stdout"], stdout_cpu(label),
                     med["cpu_to_exit"]])
        if label.startswith("op-plugin "):
            name = label.removeprefix("op-plugin ")
            figures[f"cli_first_line_s.{name}"] = med["first_line"]
            figures[f"cli_first_line_after_torch_s.{name}"] = after_torch(label)
            figures[f"cli_first_stdout_after_torch_s.{name}"] = stdout_wall(label)
            figures[f"cli_first_stdout_after_torch_cpu_s.{name}"] = stdout_cpu(label)
    both = "import torch; import op_plugin"
    figures["import_torch_s"] = median(s["first_stdout"] for s in torch_runs)
    figures["import_torch_cpu_s"] = median(s["cpu_first_stdout"] for s in torch_runs)
    figures["import_op_plugin_s"] = median(s["first_stdout"] for s in samples[both])
    figures["import_op_plugin_cpu_s"] = median(s["cpu_first_stdout"] for s in samples[both])
    figures["op_plugin_over_torch_s"] = stdout_wall(both)
    figures["op_plugin_over_torch_cpu_s"] = stdout_cpu(both)
    loaded = sorted({m for s in samples[both] for m in s["loaded"]})

    cli_labels = [label for label in labels if label.startswith("op-plugin ")]
    worst = max(cli_labels, key=stdout_cpu)
    figures["cli_first_stdout_after_torch_cpu_worst_s"] = stdout_cpu(worst)
    figures["cli_first_stdout_after_torch_worst_s"] = max(stdout_wall(label) for label in cli_labels)
    rounds = f"median over {cfg['rounds']} round(s) of the difference"
    goals = [
        goal(f"`import op_plugin` <= `import torch` + {GOAL_IMPORT_S} s (CPU host, simulator installed; fresh "
             f"processes, {rounds}, CPU)", figures["op_plugin_over_torch_cpu_s"], GOAL_IMPORT_S, " s",
             f"wall {figures['op_plugin_over_torch_s']:+.2f} s; import torch {figures['import_torch_cpu_s']:.2f} s CPU "
             f"/ {figures['import_torch_s']:.2f} s wall, with op_plugin {figures['import_op_plugin_cpu_s']:.2f} s / "
             f"{figures['import_op_plugin_s']:.2f} s; heavy modules imported: {', '.join(loaded) or 'none'}"),
        goal(f"any `op-plugin` command's first line on stdout within {GOAL_CLI_S} s of `import torch` finishing "
             f"(worst command; {rounds}, CPU)", figures["cli_first_stdout_after_torch_cpu_worst_s"], GOAL_CLI_S, " s",
             f"worst: {worst}; CPU / wall: " + ", ".join(
                 f"{label.removeprefix('op-plugin ')} {stdout_cpu(label):+.2f} / {stdout_wall(label):+.2f} s"
                 for label in cli_labels)
             + "; the first line on either stream (a command's progress line on stderr), worst wall "
             + f"{max(after_torch(label) for label in cli_labels):+.2f} s"),
    ]
    profile = []
    if not goals[0]["met"]:
        profile.append(import_time_profile(both, commands[both], after="torch"))
    if not goals[1]["met"]:
        profile.append(import_time_profile(worst, commands[worst], after=None))
    return {"name": "startup", "title": "Start-up: import op_plugin and the CLI's first line, against import torch",
            "config": {"rounds": cfg["rounds"], "commands": ", ".join(cfg["commands"]),
                       "validated file": VALIDATED.name,
                       "OP_PLUGIN_PROGRESS": "1 (the CLI's progress line, as at a terminal)"},
            "figures": figures, "goals": goals,
            "tables": [{"title": "Fresh processes, medians over the rounds (seconds; '- import torch': median of the "
                                 "per-round differences against that round's `python -c \"import torch\"`)",
                        "columns": ["process", "first line, wall", "its stream", "first stdout line, wall",
                                    "- import torch", "first stdout line, CPU", "- import torch", "CPU to exit"],
                        "rows": rows}],
            "notes": ["Times run from the spawn to the moment the parent reads the line: wall on the parent's clock, "
                      "CPU the child's own at that moment (user + system, every thread, from /proc; interpreter "
                      "start-up included). The import children print their line right after the imports. The CLI's "
                      "first line is its progress line on stderr for a command that loads torch, its answer on "
                      "stdout for help and --version (answered before torch is imported: op_plugin/_cli_entry.py).",
                      "The goals take the CPU figures: on a shared machine a wall difference grows with the load "
                      "(each process gets a share of the cores) where the CPU one does not; imports and the CLI's "
                      "start are single-threaded work, so on a quiet machine the two agree (compare the columns).",
                      "The CLI goal takes the first line on stdout (a command's answer: what a script or a pipe "
                      "waits for, and all a command prints without a terminal or OP_PLUGIN_PROGRESS=1); the first "
                      "line on either stream is in the detail and the table."],
            "profile": "\n\n".join(profile)}


def main() -> None:
    cli("startup", __doc__.splitlines()[0], run)


if __name__ == "__main__":
    main()

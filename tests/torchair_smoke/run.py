"""TorchAir's own smoke tests under op_plugin's virtual NPU, as a tier (issue 33; `make torchair-smoke`).

TorchAir's smoke folder (Ascend/torchair, `tests/smoke/*_test.py` and `*_st.py`, unittest-style) is run
unmodified: each file with pytest in its own process, in a fresh copy of the folder (the tests write caches
and dumps into their working directory), with OP_PLUGIN_VIRTUAL_NPU=1 and a hard timeout. Each test's outcome
is compared with `expected.toml` beside this script; any difference, in either direction, fails the tier.

The folder: `--source DIR` (TorchAir's checkout or its smoke folder), else $TORCHAIR_SMOKE_DIR, else a clone of
https://github.com/Ascend/torchair at PIN into a cache folder ($TORCHAIR_SMOKE_CACHE, else
~/.cache/op_plugin/torchair-smoke), with 60 s for the network. Without the folder the tier says it was skipped
and why, and exits 2 (0 with `--allow-offline`). No file of TorchAir's is kept in this repository.

expected.toml: one table per smoke file, test id (`Class::test`, `(collection)` for a file that does not
import) -> one of
  "pass"
  "skipped: <part of the skip reason>"
  "refused: <part of the text naming what the virtual NPU does not provide>"  (the error, the test's captured
      log or a warning it raised; an Ascend-only feature: CANN's op compiler for static kernels, core limits...)
  "gap: <reason>"           a gap on op_plugin's side that is known and not closed yet
  "torchair-bug: <reason>"  TorchAir's side: a bug, Ascend-only behaviour, or a test written for another
                            TorchAir or torch than the ones hosted
"gap" and "torchair-bug" may be an inline table `{ expect = "gap: ...", match = "<part of the failure>" }`, and a
gap whose outcome depends on memory contents `flaky = true` (then it may also pass).

This file is also the pytest plugin loaded into each child (its pytest_* hooks write one JSON line per event).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

PIN = "fced8842d149f16b587c2c867d427e4b766831ca"  # Ascend/torchair master, 2026-06-01
REPO_URL = "https://github.com/Ascend/torchair"
HERE = Path(__file__).resolve().parent
EXPECTED = HERE / "expected.toml"
CLONE_SECONDS = 60
FILE_TIMEOUT = 1800  # a guard against hangs: hcom_st.py takes 2-12 minutes on a loaded 2-core host
COLLECTION = "(collection)"
KINDS = ("pass", "skipped", "refused", "gap", "torchair-bug")
_LOG_VAR = "TORCHAIR_SMOKE_LOG"
_TEXT_LIMIT = 4_000_000


class SourceUnavailable(Exception):
    """TorchAir's smoke folder could not be found or fetched."""


# --- the pytest plugin (runs inside each child) ---------------------------------------------------------------

def _emit(record: dict) -> None:
    with open(os.environ[_LOG_VAR], "a", encoding="utf-8") as log:
        log.write(json.dumps(record) + "\n")


def _report_text(report) -> str:
    parts = [report.longreprtext or ""] + [f"--- {title}\n{content}" for title, content in report.sections]
    return "\n".join(parts)[-_TEXT_LIMIT:]


def _crash_message(report) -> str:
    crash = getattr(report.longrepr, "reprcrash", None)
    if crash is not None:
        return crash.message
    if isinstance(report.longrepr, tuple):  # a skip: (file, line, reason)
        return str(report.longrepr[2])
    lines = (report.longreprtext or "").strip().splitlines()
    return lines[-1] if lines else ""


def pytest_runtest_logstart(nodeid, location):
    _emit({"event": "start", "id": nodeid})


def pytest_runtest_logreport(report):
    record = {"event": "report", "id": report.nodeid, "when": report.when, "outcome": report.outcome}
    if not report.passed:
        record.update(text=_report_text(report), message=_crash_message(report))
    _emit(record)


def pytest_collectreport(report):
    if report.failed:
        _emit({"event": "collect", "id": report.nodeid, "text": _report_text(report),
               "message": _crash_message(report)})


def pytest_warning_recorded(warning_message, when, nodeid, location):
    if nodeid:
        _emit({"event": "warning", "id": nodeid, "text": str(warning_message.message)})


# --- expectations ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Expectation:
    kind: str
    text: str = ""
    match: str = ""
    flaky: bool = False

    def __str__(self) -> str:
        return self.kind if not self.text else f"{self.kind}: {self.text}"


def parse_expectation(where: str, value) -> Expectation:
    """One value of expected.toml; `where` (file::test) names it in errors."""
    match, flaky = "", False
    if isinstance(value, dict):
        unknown = set(value) - {"expect", "match", "flaky"}
        if "expect" not in value or unknown:
            raise ValueError(f"{where}: an inline table takes `expect`, `match` and `flaky`, got {sorted(value)}")
        value, match, flaky = value["expect"], str(value.get("match", "")), value.get("flaky", False) is True
    if not isinstance(value, str):
        raise ValueError(f"{where}: expected a string, got {value!r}")
    kind, _, text = value.partition(":")
    kind, text = kind.strip(), text.strip()
    if kind not in KINDS:
        raise ValueError(f"{where}: {value!r} is none of {', '.join(KINDS)}")
    if (kind == "pass") == bool(text) or (match and kind not in ("gap", "torchair-bug")) or (flaky and kind != "gap"):
        raise ValueError(f"{where}: {value!r}: 'pass' takes no text, the other kinds need one; only gap and "
                         "torchair-bug take a `match`, only gap `flaky`")
    return Expectation(kind, text, match, flaky)


def load_expected(path: Path) -> dict[str, dict[str, Expectation]]:
    with open(path, "rb") as handle:
        data = tomllib.load(handle)
    expected = {}
    for file, tests in data.items():
        if not isinstance(tests, dict):
            raise ValueError(f"{path}: [{file}] must be a table of test id -> expectation")
        expected[file] = {key: parse_expectation(f"{file}::{key}", value) for key, value in tests.items()}
    return expected


# --- the smoke folder -----------------------------------------------------------------------------------------

def smoke_folder(root: Path) -> Path:
    """TorchAir's smoke folder given its checkout or the folder itself."""
    for candidate in (root, root / "tests" / "smoke"):
        if candidate.is_dir() and any(candidate.glob("*_test.py")):
            return candidate
    raise SourceUnavailable(f"{root} holds no TorchAir smoke tests (*_test.py, nor tests/smoke/*_test.py)")


def _git(step: str, args: list[str], deadline: float) -> None:
    """One git command of the clone, within what is left of its time; `step` names it in errors."""
    left = deadline - time.monotonic()
    if left <= 0:
        raise SourceUnavailable(f"git {step}: no time left of the {CLONE_SECONDS} s for the clone")
    try:
        done = subprocess.run(["git", *args], capture_output=True, text=True, timeout=left)
    except subprocess.TimeoutExpired:
        raise SourceUnavailable(f"git {step} took more than the {CLONE_SECONDS} s for the clone") from None
    except FileNotFoundError:
        raise SourceUnavailable("git is not installed") from None
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["(no message)"])[-1]
        raise SourceUnavailable(f"git {step} of {PIN[:12]} failed: {last}")


def clone_pinned(cache: Path, url: str) -> Path:
    """TorchAir's smoke folder at PIN, fetched once into `cache` (only tests/smoke is checked out)."""
    target = cache / PIN[:12]
    if (target / "tests" / "smoke").is_dir():
        return target
    cache.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="clone-", dir=cache))
    deadline = time.monotonic() + CLONE_SECONDS
    try:
        _git("init", ["init", "-q", str(work)], deadline)
        _git(f"fetch {url}", ["-C", str(work), "fetch", "-q", "--depth", "1", "--filter=blob:none", url, PIN],
             deadline)
        _git("checkout", ["-C", str(work), "checkout", "-q", "FETCH_HEAD", "--", "tests/smoke"], deadline)
        work.rename(target)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return target


def find_source(option: str | None) -> Path:
    if option:
        return smoke_folder(Path(option))
    if os.environ.get("TORCHAIR_SMOKE_DIR"):
        return smoke_folder(Path(os.environ["TORCHAIR_SMOKE_DIR"]))
    cache = Path(os.environ.get("TORCHAIR_SMOKE_CACHE") or Path.home() / ".cache" / "op_plugin" / "torchair-smoke")
    url = os.environ.get("TORCHAIR_SMOKE_REPO_URL") or REPO_URL
    return smoke_folder(clone_pinned(cache, url))


def smoke_files(folder: Path) -> list[str]:
    return sorted({p.name for p in folder.glob("*_test.py")} | {p.name for p in folder.glob("*_st.py")})


# --- running one file -----------------------------------------------------------------------------------------

@dataclass
class Result:
    outcome: str  # passed, failed, error, skipped, timeout, crashed
    message: str = ""
    text: str = ""


@dataclass
class FileRun:
    results: dict[str, Result] = field(default_factory=dict)
    seconds: float = 0.0
    note: str = ""


def child_env() -> dict[str, str]:
    env = dict(os.environ, OP_PLUGIN_VIRTUAL_NPU="1")
    env.pop("PYTEST_ADDOPTS", None)
    return env


def preflight(python: str) -> str | None:
    """None when the virtual NPU comes up in a child, else the reason it does not."""
    probe = "import torch; torch.ones(1, device='npu').cpu()"
    try:
        done = subprocess.run([python, "-c", probe], env=child_env(), capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired:
        return f"the virtual NPU does not come up in 300 s (`{python} -c \"{probe}\"`)"
    if done.returncode == 0:
        return None
    lines = done.stderr.strip().splitlines() or ["(no message)"]
    return f"the virtual NPU does not come up (`{python} -c \"{probe}\"`): {lines[-1]}"


def _bootstrap(file: str) -> str:
    """The child's program: pytest on `file` with this script loaded as a plugin under a name of its own."""
    return ("import importlib.util, sys, pytest\n"
            f"spec = importlib.util.spec_from_file_location('_torchair_smoke_plugin', {str(Path(__file__))!r})\n"
            "plugin = sys.modules[spec.name] = importlib.util.module_from_spec(spec)\n"
            "spec.loader.exec_module(plugin)\n"
            f"sys.exit(pytest.main(['-q', '-p', 'no:cacheprovider', {file!r}], plugins=[plugin]))\n")


def _launch(python: str, file: str, cwd: Path, log: Path, timeout: float) -> tuple[float, bool]:
    """Run the child in its own process group; kill the group at the timeout. (seconds, timed out)."""
    env = dict(child_env(), **{_LOG_VAR: str(log)})
    start = time.monotonic()
    with open(cwd / "pytest.out", "wb") as out:
        child = subprocess.Popen([python, "-c", _bootstrap(file)], cwd=cwd, env=env, stdout=out,
                                 stderr=subprocess.STDOUT, start_new_session=True)
        try:
            child.wait(timeout=timeout)
            timed_out = False
        except subprocess.TimeoutExpired:
            timed_out = True
        try:
            os.killpg(child.pid, signal.SIGKILL)  # also the ranks a test spawned and left behind
        except ProcessLookupError:
            pass
        child.wait()
    return time.monotonic() - start, timed_out


def _test_key(nodeid: str, file: str) -> str:
    prefix = f"{file}::"
    return nodeid[len(prefix):] if nodeid.startswith(prefix) else COLLECTION


def _fold(result: Result | None, record: dict) -> Result:
    """A test's result after one more of its phase reports (setup, call, teardown)."""
    outcome, when = record["outcome"], record["when"]
    if outcome == "passed":  # setup and teardown passing leave the test as it is (running until its call)
        return Result("passed") if when == "call" else result or Result("running")
    if outcome == "skipped":
        return Result("skipped", record.get("message", ""), record.get("text", ""))
    if result is not None and result.outcome in ("failed", "error"):
        result.text += "\n" + record.get("text", "")
        return result
    return Result("failed" if when == "call" else "error", record.get("message", ""), record.get("text", ""))


def read_log(log: Path, file: str, timed_out: bool) -> dict[str, Result]:
    results: dict[str, Result] = {}
    warnings: dict[str, list[str]] = {}
    events = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()] if log.exists() else []
    for record in events:
        key = _test_key(record["id"], file)
        if record["event"] == "start":
            results[key] = Result("running")
        elif record["event"] == "report":
            results[key] = _fold(results.get(key), record)
        elif record["event"] == "collect":
            results[COLLECTION] = Result("error", record["message"], record["text"])
        elif record["event"] == "warning":
            warnings.setdefault(key, []).append(record["text"])
    for key, result in results.items():
        if result.outcome == "running":
            result.outcome = "timeout" if timed_out else "crashed"
            result.message = "the hard timeout ended it" if timed_out else "its process died during the test"
        result.text += "".join(f"\n--- warning\n{text}" for text in warnings.get(key, []))
    return results


def run_file(python: str, folder: Path, file: str, timeout: float, keep: bool) -> FileRun:
    work = Path(tempfile.mkdtemp(prefix=f"torchair-smoke-{file[:-3]}-"))
    copy = work / "smoke"
    shutil.copytree(folder, copy, ignore=shutil.ignore_patterns(".torchair_cache", "__pycache__", "compiled_cache"))
    log = work / "events.jsonl"
    seconds, timed_out = _launch(python, file, copy, log, timeout)
    run = FileRun(read_log(log, file, timed_out), seconds)
    if timed_out:
        run.note = f"{file}: the hard timeout of {timeout:.0f} s ended it"
    elif not run.results:
        run.note = f"{file}: pytest reported nothing (see {copy / 'pytest.out'})"
        keep = True
    if keep:
        run.note += f" [kept: {work}]"
    else:
        shutil.rmtree(work, ignore_errors=True)
    return run


# --- comparing ------------------------------------------------------------------------------------------------

def agrees(expect: Expectation, result: Result) -> bool:
    if expect.kind == "pass":
        return result.outcome == "passed"
    if expect.kind == "skipped":
        return result.outcome == "skipped" and expect.text in result.text + result.message
    if expect.flaky and result.outcome == "passed":
        return True
    if result.outcome not in ("failed", "error"):
        return False
    if expect.kind == "refused":
        return expect.text in result.text + result.message
    return expect.match in result.text + result.message


def compare(file: str, expected: dict[str, Expectation], run: FileRun) -> list[tuple[str, str, str]]:
    """(file::test, expected, got) for every test whose outcome is not the expected one; one line for a file
    that reported nothing."""
    if not run.results and run.note:
        return [(f"{file}::*", f"{len(expected)} test(s) in expected.toml", run.note)]
    if COLLECTION in run.results and COLLECTION not in expected:
        result = run.results[COLLECTION]
        return [(f"{file}::*", f"{len(expected)} test(s) in expected.toml",
                 f"the file does not import, no test ran: {result.outcome}: {result.message}")]
    differences = []
    for key in sorted(set(expected) | set(run.results)):
        expect, result = expected.get(key), run.results.get(key)
        if expect is not None and result is not None and agrees(expect, result):
            continue
        got = "not run" if result is None else f"{result.outcome}: {result.message}".rstrip(": ")
        differences.append((f"{file}::{key}", str(expect) if expect else "(not in expected.toml)", got))
    return differences


def tally(expected: dict[str, Expectation], run: FileRun, differing: set[str]) -> dict[str, int]:
    """Agreeing tests by kind (a flaky gap that passed counts as a pass), and the differing ones."""
    counts = dict.fromkeys(KINDS, 0)
    for key, expect in expected.items():
        if key in run.results and key not in differing:
            counts["pass" if run.results[key].outcome == "passed" else expect.kind] += 1
    counts["differ"] = len(differing)
    return counts


def _short(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 3] + "..."


def print_table(rows: list[tuple[str, dict[str, int], float]], differences: list[tuple[str, str, str]],
                expected: Path) -> None:
    columns = ("pass", "refused", "gap", "torchair-bug", "skipped", "differ")
    print(f"{'file':<34}" + "".join(f"{c:>13}" for c in columns) + f"{'seconds':>9}")
    totals = dict.fromkeys(columns, 0)
    for file, counts, seconds in rows:
        print(f"{file:<34}" + "".join(f"{counts[c]:>13}" for c in columns) + f"{seconds:>9.0f}")
        for c in columns:
            totals[c] += counts[c]
    print(f"{'total':<34}" + "".join(f"{totals[c]:>13}" for c in columns))
    if differences:
        print(f"\n{len(differences)} test(s) differ from {expected}:")
        for test, expect, got in differences:
            print(f"  {test}\n      expected {_short(expect, 150)}\n      got      {_short(got, 150)}")


# --- main -----------------------------------------------------------------------------------------------------

def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="TorchAir's smoke tests under op_plugin's virtual NPU")
    parser.add_argument("--source", help="TorchAir's checkout or its smoke folder (default: $TORCHAIR_SMOKE_DIR, "
                                         "else a clone at the pinned commit)")
    parser.add_argument("--expected", type=Path, default=EXPECTED)
    parser.add_argument("--timeout", type=float, default=FILE_TIMEOUT, help="hard timeout per file, seconds")
    parser.add_argument("--allow-offline", action="store_true",
                        help="exit 0 (not 2) when the smoke folder cannot be found or fetched")
    parser.add_argument("--keep", action="store_true", help="keep each file's working copy and pytest output")
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("files", nargs="*", help="only these smoke files (default: all)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        folder = find_source(args.source)
    except SourceUnavailable as reason:
        print(f"torchair-smoke: skipped: TorchAir's smoke tests are not available ({reason})")
        return 0 if args.allow_offline else 2
    expected = load_expected(args.expected)
    reason = preflight(args.python)
    if reason:
        print(f"torchair-smoke: not run: {reason}")
        return 2
    files = args.files or sorted(set(smoke_files(folder)) | set(expected))
    print(f"torchair-smoke: {folder} (TorchAir {PIN[:12]} expected), {len(files)} file(s), "
          f"{args.timeout:.0f} s each at most", flush=True)
    start, rows, differences = time.monotonic(), [], []
    for file in files:
        row, found = check_file(args, folder, file, expected.get(file, {}))
        rows.append(row)
        differences += found
    print()
    print_table(rows, differences, args.expected)
    print(f"\nwall time {time.monotonic() - start:.0f} s")
    return 1 if differences else 0


def check_file(args: argparse.Namespace, folder: Path, file: str, expected: dict[str, Expectation]):
    """Run one smoke file and compare it: its table row and its differences."""
    if (folder / file).exists():
        run = run_file(args.python, folder, file, args.timeout, args.keep)
    else:
        run = FileRun(note=f"{file}: no such file in {folder}")
    found = compare(file, expected, run)
    differing = {test.split("::", 1)[1] for test, _, _ in found}
    if "*" in differing:  # the file as a whole: none of its tests ran
        differing = set(expected)
    print(f"  {file}: {len(run.results)} test(s), {len(found)} differ, {run.seconds:.0f} s"
          + (f"; {run.note}" if run.note else ""), flush=True)
    return (file, tally(expected, run, differing), run.seconds), found


if __name__ == "__main__":
    sys.exit(main())

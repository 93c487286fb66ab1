"""A pool of guarded worker processes that run declared cases: a crash, hang or OOM costs one case.

Each worker is `python -m op_plugin._tools.declared.pool --worker` (TorchAir loaded once per
worker). The parent sends one case id per line on the worker's stdin and reads one JSON result
per line from a private copy of the worker's stdout (the worker's fd 1 is pointed at its stderr
log, so a print from torch or TorchAir cannot corrupt the protocol). A worker that exits, or
does not answer within the timeout (killed), costs the case it was running; the next case starts
a fresh worker. Workers run under an address-space limit, so a runaway allocation is a
MemoryError (the case is a crash) rather than the host's OOM killer.
"""
from __future__ import annotations

import json
import os
import queue
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable

from ..._base.processes import PARENT_VARIABLE, die_with_parent_from_environment
from .cases import CaseResult

STARTUP_SECONDS = 300  # loading torch + TorchAir, on a loaded 2-core machine
DEFAULT_MEMORY_LIMIT_GB = 8.0
_READY = "ready"
WORKER_ENV = "OP_PLUGIN_DECLARED_CASES_WORKER"  # set in the workers, so a setup module can tell it runs in one


class _Worker:
    def __init__(self, setup: list[str], memory_limit_gb: float | None):
        self.log = tempfile.TemporaryFile(mode="w+b")
        command = [sys.executable, "-m", "op_plugin._tools.declared.pool", "--worker"]
        for module in setup:
            command += ["--setup", module]
        if memory_limit_gb:
            command += ["--memory-limit-gb", str(memory_limit_gb)]
        # Its own session (a Ctrl-C in the terminal reaches the parent only, which stops it and its ranks); it
        # ends with this process however that ends (the parent's pid lets it check: _worker_main).
        self.proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log,
                                     start_new_session=True,
                                     env={**os.environ, WORKER_ENV: "1", PARENT_VARIABLE: str(os.getpid())})
        self.ready = False

    def ask(self, line: str | None, timeout: float) -> str | None:
        """Send `line` (None: just wait) and return the answer; None on timeout, "" on exit."""
        if line is not None:
            try:
                self.proc.stdin.write((line + "\n").encode())
                self.proc.stdin.flush()
            except (BrokenPipeError, OSError):
                return ""
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        if not ready:
            return None
        return self.proc.stdout.readline().decode()

    def log_tail(self, lines: int = 3) -> str:
        self.log.seek(0)
        text = self.log.read().decode(errors="replace").strip().splitlines()
        return " | ".join(text[-lines:])

    def stop(self) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)  # the worker's own session: it and its children
            except ProcessLookupError:
                pass
        self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout):
            stream.close()
        self.log.close()


def run_cases(case_ids: list[str], *, workers: int = 2, timeout: float = 120.0, setup: list[str] = (),
              memory_limit_gb: float | None = DEFAULT_MEMORY_LIMIT_GB,
              on_result: Callable[[CaseResult], None] | None = None,
              case_timeouts: dict[str, float] | None = None) -> list[CaseResult]:
    """Run the cases in `workers` guarded processes; results in the order of `case_ids`.

    setup: modules each worker imports first (they may `plant_case`). timeout: seconds per case;
    case_timeouts: longer ones for some cases (a case on N ranks runs N processes on the same cores).
    """
    case_timeouts = case_timeouts or {}
    todo: queue.Queue = queue.Queue()
    for case_id in case_ids:
        todo.put(case_id)
    results: dict[str, CaseResult] = {}
    lock = threading.Lock()
    failures: list[BaseException] = []
    live: set[_Worker] = set()  # killed if the caller is interrupted (workers run in their own sessions)
    stopping = threading.Event()  # the caller was interrupted: no slot starts another case or worker

    def record(result: CaseResult) -> None:
        with lock:
            results[result.case_id] = result
        if on_result is not None:
            on_result(result)

    def retire(worker: _Worker) -> None:
        with lock:
            live.discard(worker)
        worker.stop()

    def slot() -> None:
        worker = None
        try:
            while not stopping.is_set():
                try:
                    case_id = todo.get_nowait()
                except queue.Empty:
                    return
                if worker is None:
                    with lock:  # a worker exists only in `live`, where an interruption finds it
                        if stopping.is_set():
                            return
                        worker = _Worker(list(setup), memory_limit_gb)
                        live.add(worker)
                    _await_ready(worker)
                started = time.monotonic()
                limit = case_timeouts.get(case_id, timeout)
                answer = worker.ask(case_id, limit)
                if answer:
                    record(CaseResult(**json.loads(answer)))
                    continue
                if stopping.is_set():
                    return  # its worker was stopped by the interruption, not by the case
                if answer is None:
                    result = CaseResult(case_id, "timeout", f"no result within {limit:g} s (worker killed)")
                else:
                    worker.proc.wait()
                    result = CaseResult(case_id, "crash", _exit_reason(worker))
                result.seconds = round(time.monotonic() - started, 3)
                retire(worker)
                worker = None
                record(result)
        except BaseException as error:  # reported by the caller
            failures.append(error)
        finally:
            if worker is not None:
                retire(worker)

    threads = [threading.Thread(target=slot, daemon=True) for _ in range(max(1, min(workers, len(case_ids))))]
    for thread in threads:
        thread.start()
    try:
        for thread in threads:
            thread.join()
    except BaseException:  # Ctrl-C, SIGTERM, SIGHUP (processes.Terminated): no worker outlives the run
        stopping.set()
        with lock:
            running = list(live)
        for worker in running:
            worker.stop()
        raise
    if failures:
        raise failures[0]
    return [results[case_id] for case_id in case_ids]


def _await_ready(worker: _Worker) -> None:
    answer = worker.ask(None, STARTUP_SECONDS)
    if not answer or answer.strip() != _READY:
        tail = worker.log_tail(10)
        worker.stop()
        raise RuntimeError(f"declared-cases worker did not start: {tail or 'no output'}")


def _exit_reason(worker: _Worker) -> str:
    code = worker.proc.returncode
    how = f"killed by signal {signal.Signals(-code).name}" if code < 0 else f"exit code {code}"
    tail = worker.log_tail()
    return f"worker died ({how})" + (f": {tail}" if tail else "")


def _worker_main(setup: list[str], memory_limit_gb: float | None) -> int:
    die_with_parent_from_environment()  # SIGKILL when the declared-cases run ends, however it ends
    if memory_limit_gb:
        import resource

        limit = int(memory_limit_gb * 2**30)
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    protocol = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # anything else printed goes to the log
    from .cases import enumerate_cases, import_setup, run_case

    for module in setup:
        import_setup(module)
    cases = {case.case_id: case for case in enumerate_cases()}
    protocol.write(_READY + "\n")
    for line in sys.stdin:
        case_id = line.strip()
        case = cases.get(case_id)
        if case is None:
            result = CaseResult(case_id, "crash", f"unknown case id {case_id!r}")
        else:
            try:
                result = run_case(case)
            except MemoryError as error:
                result = CaseResult(case_id, "crash", f"out of memory: {error}")
            except Exception as error:  # the tool itself failed on this case
                result = CaseResult(case_id, "crash", f"declared-cases runner raised {type(error).__name__}: {error}")
        protocol.write(json.dumps(result.as_dict()) + "\n")
    return 0


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description="declared-cases worker (started by run_cases)")
    parser.add_argument("--worker", action="store_true", required=True)
    parser.add_argument("--setup", action="append", default=[])
    parser.add_argument("--memory-limit-gb", type=float)
    options = parser.parse_args()
    sys.exit(_worker_main(options.setup, options.memory_limit_gb))

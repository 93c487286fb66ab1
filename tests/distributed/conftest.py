"""The distributed tier: N gloo ranks on 127.0.0.1, spawned once per rank count and reused by the
cases of the session, each case under a hard timeout.

A case is a module-level function of a test module, `case(*args) -> value`, run on every rank of a
group (`ranks(n).run(case, *args)` returns the value of each rank, in rank order); it finds its
rank with `torch.distributed.get_rank()`. Each rank process imports op_plugin, then initialises
gloo (the order a user script has), and resets dynamo before each case. A rank process ends with the
process that started it (`op_plugin._base.processes.die_with_parent`), so no rank outlives an
interrupted or killed pytest. A case that raises on any
rank fails the test with that rank's traceback; a case that does not finish within its timeout
kills the group's processes (which this fixture started, by their handles) and fails; a later case
starts a new group. Collective waits inside the ranks are bounded by $OP_PLUGIN_COLLECTIVE_TIMEOUT,
set here to a value below the case timeout, so a rank-divergent graph surfaces as an error first.

The tier runs only when asked for: `pytest tests/distributed` (naming the folder or a file in it),
or with $OP_PLUGIN_DISTRIBUTED_TESTS=1; a plain `pytest` (make test) skips it. docs/distributed.md.

The rank processes run this file as a script (`runpy.run_path`, run name `__rank_worker__`), so
nothing but this file and the case's own module is imported into them.
"""
from __future__ import annotations

import datetime
import importlib.util
import os
import queue
import runpy
import socket
import sys
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
CASE_TIMEOUT = float(os.environ.get("OP_PLUGIN_DISTRIBUTED_CASE_TIMEOUT", "150"))
START_TIMEOUT = float(os.environ.get("OP_PLUGIN_DISTRIBUTED_START_TIMEOUT", "300"))
COLLECTIVE_TIMEOUT = "30"  # seconds, per collective wait inside the ranks (below CASE_TIMEOUT)
_OPT_IN = "OP_PLUGIN_DISTRIBUTED_TESTS"


# ---- the rank process -------------------------------------------------------------------------------

def _serve(rank: int, world: int, port: int, tasks, results, parent: int | None = None) -> None:
    """A rank: join the gloo group, then run cases from `tasks` until told to stop (None). It ends when the
    process that started it ends, however that ends (SIGTERM, SIGINT, SIGHUP, a timeout's SIGKILL)."""
    from op_plugin._base.processes import die_with_parent

    die_with_parent(parent)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), OMP_NUM_THREADS="1",
                      OP_PLUGIN_COLLECTIVE_TIMEOUT=COLLECTIVE_TIMEOUT)
    os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    import op_plugin  # noqa: F401  (before the process group, as a user script has it)

    dist.init_process_group("gloo", rank=rank, world_size=world, timeout=datetime.timedelta(seconds=120))
    results.put((None, rank, "ready", "torchair" in sys.modules))
    modules: dict[str, object] = {}
    while True:
        task = tasks.get()
        if task is None:
            break
        case_id, path, name, args = task
        try:
            module = modules.get(path)
            if module is None:
                spec = importlib.util.spec_from_file_location(f"_distributed_case_{Path(path).stem}", path)
                module = importlib.util.module_from_spec(spec)
                spec.loader.exec_module(module)
                modules[path] = module
            torch._dynamo.reset()
            value = getattr(module, name)(*args)
            results.put((case_id, rank, "ok", value))
        except BaseException:  # reported to the parent with its traceback
            results.put((case_id, rank, "error", traceback.format_exc()))
    dist.destroy_process_group()
    results.close()
    results.join_thread()
    os._exit(0)  # every answer is flushed; the interpreter's shutdown (TorchAir's atexit hooks) is not needed


if __name__ == "__rank_worker__":
    _serve(RANK, WORLD, PORT, TASKS, RESULTS, PARENT)  # noqa: F821  (given by runpy.run_path's init_globals)


# ---- the parent (pytest) side -----------------------------------------------------------------------

import pytest  # noqa: E402  here, not at the top: the rank processes do not need it


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class RankGroup:
    """`world` spawned rank processes sharing a gloo process group, running cases on request."""

    def __init__(self, world: int):
        import multiprocessing

        self.world = world
        context = multiprocessing.get_context("spawn")
        port = _free_port()
        self.results = context.Queue()
        self.tasks = [context.Queue() for _ in range(world)]
        self.processes = []
        for rank in range(world):
            init = {"RANK": rank, "WORLD": world, "PORT": port, "TASKS": self.tasks[rank], "RESULTS": self.results,
                    "PARENT": os.getpid()}
            process = context.Process(target=runpy.run_path, args=(str(Path(__file__)),),
                                      kwargs={"init_globals": init, "run_name": "__rank_worker__"},
                                      name=f"distributed-rank-{rank}", daemon=True)
            process.start()
            self.processes.append(process)
        self._next_case = 0
        self.torchair_loaded_at_start = []
        ready = self._collect(None, START_TIMEOUT, f"starting {world} ranks")
        self.torchair_loaded_at_start = [value for _, value in sorted(ready.items())]

    @property
    def alive(self) -> bool:
        return all(process.is_alive() for process in self.processes)

    def run(self, case, *args, timeout: float = CASE_TIMEOUT, grace: float = 10.0) -> list:
        """Run `case(*args)` on every rank; its value on each rank, in rank order. After a rank fails the others
        get `grace` seconds to answer."""
        self._next_case += 1
        case_id = self._next_case
        path = str(Path(case.__code__.co_filename).resolve())
        for tasks in self.tasks:
            tasks.put((case_id, path, case.__name__, args))
        values = self._collect(case_id, timeout, f"case {case.__name__}{args}", grace)
        return [values[rank] for rank in range(self.world)]

    def _collect(self, case_id, timeout: float, what: str, grace_seconds: float = 10.0) -> dict:
        deadline = time.monotonic() + timeout
        values, errors = {}, {}
        grace = None  # after the first error the others get a short while to report
        while len(values) + len(errors) < self.world:
            remaining = min(deadline, grace or deadline) - time.monotonic()
            if remaining <= 0:
                break
            try:
                got_id, rank, status, value = self.results.get(timeout=min(remaining, 1.0))
            except queue.Empty:
                dead = [rank for rank, process in enumerate(self.processes) if not process.is_alive()]
                for rank in dead:
                    if rank not in values and rank not in errors:
                        errors[rank] = f"the rank process exited (exit code {self.processes[rank].exitcode})"
                if errors and grace is None:
                    grace = time.monotonic() + grace_seconds
                continue
            if got_id != case_id and status != "ready":
                continue  # a late answer to a case that already failed
            if status == "error":
                errors[rank] = value
                grace = grace or time.monotonic() + grace_seconds
            else:
                values[rank] = value
        if len(values) == self.world:
            return values
        self.close(wait=0.0)  # a rank may be stuck in a collective: no goodbye
        silent = sorted(set(range(self.world)) - set(values) - set(errors))
        report = [f"{what} failed on {len(errors)} rank(s) of {self.world}"]
        if silent:
            waited = f"{timeout:g} s" if not errors else f"{grace_seconds:g} s after the first error"
            report.append(f"rank(s) {silent} gave no answer within {waited} (killed)")
        report += [f"--- rank {rank} ---\n{text}" for rank, text in sorted(errors.items())]
        pytest.fail("\n".join(report), pytrace=False)
        return {}

    def close(self, wait: float = 10.0) -> None:
        """Ask the ranks to leave, give them `wait` seconds, then kill those still running."""
        for tasks in self.tasks:
            try:
                tasks.put(None)
            except (OSError, ValueError):
                pass
        deadline = time.monotonic() + wait
        for process in self.processes:
            process.join(timeout=max(deadline - time.monotonic(), 0.1))
        for process in self.processes:
            if process.is_alive():
                process.kill()
                process.join(timeout=5)


@pytest.fixture(scope="session")
def ranks():
    """`ranks(n)`: the session's group of n gloo ranks, started on first use and restarted after a
    failed case."""
    groups: dict[int, RankGroup] = {}

    def get(world: int) -> RankGroup:
        group = groups.get(world)
        if group is None or not group.alive:
            group = groups[world] = RankGroup(world)
        return group

    yield get
    for group in groups.values():
        group.close()


@pytest.fixture
def fresh_ranks():
    """`fresh_ranks(n)`: a group of n new rank processes for this test alone (closed after it), for
    what must be seen in a process that has not compiled anything yet."""
    started: list[RankGroup] = []

    def start(world: int) -> RankGroup:
        started.append(RankGroup(world))
        return started[-1]

    yield start
    for group in started:
        group.close()


def pytest_collection_modifyitems(config, items):
    if os.environ.get(_OPT_IN) == "1":
        return
    named = [Path(str(arg).split("::")[0]).resolve() for arg in config.args]
    if any(path == HERE or HERE in path.parents for path in named):
        return
    skip = pytest.mark.skip(reason="the distributed tier runs when asked for: pytest tests/distributed "
                                   f"(or ${_OPT_IN}=1); docs/distributed.md")
    for item in items:
        if HERE in Path(str(item.fspath)).resolve().parents:
            item.add_marker(skip)

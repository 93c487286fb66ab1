"""The ranks agree on a collective on every call, not only a plan's first run: a later call whose shapes
differ between the ranks (a dynamic graph run with other sizes on one rank, or a graph one rank recompiled
while the other reuses its own) fails on every rank with the node and both shapes named, instead of
aborting a rank inside gloo; the next call with matching shapes runs again. A rank whose process has
ended before the first call is named within seconds, not at the collective timeout, and every time a
message gives is measured. Each case uses a process group of its own, so the session's group stays in step.
"""
import os
import re
import subprocess
import sys
import time

import pytest
import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol

from op_plugin._simulator.interpreter.errors import GeExecutionError


def _message(call):
    """The GeExecutionError a call raises (TorchAir may wrap it), or None when it returns."""
    try:
        call()
    except Exception as error:
        cause = error
        while cause is not None and not isinstance(cause, GeExecutionError):
            cause = cause.__cause__
        return str(cause if cause is not None else error)
    return None


# ---- cases (run on every rank) ----------------------------------------------------------------------

def later_call_differs_case(dynamic):
    """Call 1: both ranks all-reduce [4]. Call 2: rank 0 [4] again (its verified signature: the generated
    program), rank 1 [6]. Call 3: both [5]."""
    group = dist.new_group([0, 1])
    rank = dist.get_rank()

    def fn(x):
        return funcol.all_reduce(x * 2, "sum", group)

    compiled = torch.compile(fn, backend="npugraph", dynamic=dynamic, fullgraph=True)
    first = compiled(torch.ones(4))
    started = time.monotonic()
    second = _message(lambda: compiled(torch.ones(4 if rank == 0 else 6)))
    seconds = time.monotonic() - started
    third = compiled(torch.full((5,), float(rank + 1)))
    return first.tolist(), second, seconds, third.tolist()


def peer_dead_before_first_call_case(path):
    """Rank 1 ends before any call (a second after the case starts, as a rank failing to load its model
    would); rank 0 then runs a compiled all_reduce and writes what it gets."""
    group = dist.new_group([0, 1])
    if dist.get_rank() == 1:
        time.sleep(1.0)
        os._exit(3)
    time.sleep(3.0)  # rank 1 has certainly ended by now

    def fn(x):
        return funcol.all_reduce(x + 1, "sum", group)

    started = time.monotonic()
    message = _message(lambda: torch.compile(fn, backend="npugraph", fullgraph=True)(torch.ones(3)))
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(f"{time.monotonic() - started:.2f}\n{message}")
    return message


# ---- tests (parent side) ---------------------------------------------------------------------------

@pytest.mark.parametrize("dynamic", [True, False])
def test_a_later_call_with_other_shapes_fails_on_both_ranks_and_the_next_runs(ranks, dynamic):
    group = ranks(2)
    results = group.run(later_call_differs_case, dynamic)
    assert group.alive  # no rank aborted
    for rank, (first, second, seconds, third) in enumerate(results):
        assert first == [4.0] * 4
        assert second is not None and "another element count" in second, second
        assert "HcomAllReduce (node 'HcomAllReduce" in second and "rank-divergent" in second, second
        mine, theirs = ([4], [6]) if rank == 0 else ([6], [4])
        assert f"runs HcomAllReduce float32 {mine}" in second and f"runs HcomAllReduce float32 {theirs}" in second
        assert seconds < 20, seconds  # at once, not at the 30 s collective timeout
        assert third == [6.0] * 5  # (1 + 2) * 2: the group is in step again


def test_a_peer_dead_before_the_first_call_is_named_within_seconds(fresh_ranks, tmp_path):
    group = fresh_ranks(2)
    path = tmp_path / "rank0.txt"
    with pytest.raises(pytest.fail.Exception, match=r"rank process exited \(exit code 3\)"):
        group.run(peer_dead_before_first_call_case, str(path), timeout=120, grace=90)
    seconds, message = path.read_text(encoding="utf-8").split("\n", 1)
    assert "HcomAllReduce (node 'HcomAllReduce" in message, message
    assert "rank 1 has ended (its process (pid " in message, message
    waited = float(re.search(r"waited (\d+\.\d) s", message).group(1))
    assert waited < 10 and float(seconds) < 60, (waited, seconds)  # the collective timeout in the ranks is 30 s


FORKED_CHILD = """
import datetime, json, os, sys, time
import torch.distributed as dist
import op_plugin  # noqa: F401  (starts the liveness thread)
from op_plugin._simulator.interpreter import liveness

store = dist.TCPStore("127.0.0.1", 0, 1, True, timeout=datetime.timedelta(seconds=30))
dist.init_process_group("gloo", store=store, rank=0, world_size=1)
time.sleep(1.0)  # the thread publishes within a tenth of a second
record = lambda: json.loads(liveness._world()[1].get("op_plugin/hcom/process/0").decode())
assert record()["pid"] == os.getpid(), record()
pid = os.fork()
if pid == 0:  # a DataLoader worker, say: it inherits the world, which stays its parent's
    time.sleep(1.5)
    os._exit(0)
os.waitpid(pid, 0)
assert record()["pid"] == os.getpid(), ("a forked child published over its parent's record", record())
assert liveness.ended([0]) == {}
print("ok")
"""


def test_a_forked_child_leaves_its_parents_record_alone(tmp_path):
    """A process forked from a rank (a DataLoader worker) shares the rank's world and store connection: its
    liveness thread neither publishes its own pid under the rank (its exit would then read as the rank's)
    nor talks to that store."""
    done = subprocess.run([sys.executable, "-c", FORKED_CHILD], capture_output=True, text=True, timeout=300,
                          cwd=tmp_path)
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), done.stderr[-3000:]


def test_a_gloo_failure_says_how_long_it_took():
    """gloo failing at once (a peer gone) said "did not complete within 40 s" after 0 s: the time is measured."""
    from op_plugin._simulator.interpreter.errors import KernelError
    from op_plugin._simulator.interpreter.kernels.hccl import collectives as hccl

    def closed():
        raise RuntimeError("[pair.cc:553] Connection closed by peer [127.0.0.1]:1234. This is typically caused by a "
                           "remote worker crashing.\nmore")

    with pytest.raises(KernelError) as info:
        hccl._wait(closed, "HcomAllReduce(sum)", "tag=ptd:0;rank_list=0,1")
    text = str(info.value)
    assert text.startswith("HcomAllReduce(sum) on group 'tag=ptd:0;rank_list=0,1' failed after 0.0 s: "), text
    assert "another rank failed or left the group (gloo: [pair.cc:553] Connection closed by peer" in text
    assert "within" not in text and "\n" not in text

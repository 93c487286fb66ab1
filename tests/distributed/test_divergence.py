"""A rank-divergent graph is an error naming the node on the ranks that run it, never a hang: ranks
that run different collectives, or the same one on different shapes, fail at once when they agree
on it; a rank waiting for a peer whose graph has no collective fails when its bounded wait ends;
and a case stuck past its timeout is killed by the fixture.
Each case uses a process group of its own, so the session's group stays in step."""
import os
import re
import time

import pytest
import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol

from op_plugin._simulator.interpreter.errors import GeExecutionError


def _run_expecting_error(fn, x):
    try:
        torch.compile(fn, backend="npugraph", fullgraph=True)(x)
    except Exception as error:  # TorchAir may wrap it; the message is what counts
        cause = error
        while cause is not None and not isinstance(cause, GeExecutionError):
            cause = cause.__cause__
        return str(cause if cause is not None else error)
    return None


# ---- cases (run on every rank) ----------------------------------------------------------------------

def different_collectives_case():
    group = dist.new_group([0, 1])
    rank = dist.get_rank()

    def fn(x):
        if rank == 0:
            return funcol.all_reduce(x + 1, "sum", group)
        return funcol.all_gather_tensor(x + 1, 0, group)

    return _run_expecting_error(fn, torch.ones(2, 3))


def different_shapes_case():
    group = dist.new_group([0, 1])
    rank = dist.get_rank()

    def fn(x):
        return funcol.all_reduce(x * 2, "max", group)

    return _run_expecting_error(fn, torch.ones(2, 3 + rank))


def same_count_other_shape_case():
    """HCCL moves elements: a [2, 3] tensor on one rank and a [3, 2] on the other all-reduce as 6 elements."""
    group = dist.new_group([0, 1])
    rank = dist.get_rank()
    shape = (2, 3) if rank == 0 else (3, 2)

    def fn(x):
        return funcol.all_reduce(x * 2, "sum", group)

    x = torch.arange(6.0).reshape(shape) + 10 * rank
    return torch.compile(fn, backend="npugraph", fullgraph=True)(x).reshape(-1).tolist()


def missing_collective_case():
    group = dist.new_group([0, 1])
    rank = dist.get_rank()

    def fn(x):
        if rank == 0:
            return funcol.all_reduce(x + 1, "sum", group)
        return x + 1

    os.environ["OP_PLUGIN_COLLECTIVE_TIMEOUT"] = "3"
    try:
        return _run_expecting_error(fn, torch.ones(4))
    finally:
        os.environ["OP_PLUGIN_COLLECTIVE_TIMEOUT"] = "30"


# ---- tests (parent side) ---------------------------------------------------------------------------

def test_different_collectives_fail_on_both_ranks(ranks):
    messages = ranks(2).run(different_collectives_case)
    assert all(m is not None and "rank-divergent" in m for m in messages), messages
    assert "HcomAllReduce (node 'HcomAllReduce" in messages[0] and "runs HcomAllGather" in messages[0], messages[0]
    assert "HcomAllGather (node 'HcomAllGather" in messages[1] and "runs HcomAllReduce" in messages[1], messages[1]


def test_different_counts_fail_on_both_ranks(ranks):
    messages = ranks(2).run(different_shapes_case)
    for rank, message in enumerate(messages):
        assert message is not None and "another element count" in message, message
        assert f"float32 [2, {3 + rank}]" in message and f"float32 [2, {4 - rank}]" in message, message


def test_the_same_count_in_another_shape_agrees(ranks):
    results = ranks(2).run(same_count_other_shape_case)
    want = [2 * (i + i + 10) for i in range(6)]  # both ranks' flat elements, doubled and summed
    assert results == [want, want], results


def test_missing_collective_fails_when_the_wait_ends(ranks):
    messages = ranks(2).run(missing_collective_case, timeout=60)
    assert messages[1] is None  # its graph has no collective: it runs
    assert "HcomAllReduce (node 'HcomAllReduce" in messages[0] and "rank(s) [1]" in messages[0], messages[0]
    assert "did not reach" in messages[0] and "($OP_PLUGIN_COLLECTIVE_TIMEOUT: 3 s)" in messages[0], messages[0]
    waited = float(re.search(r"within (\d+\.\d) s", messages[0]).group(1))  # measured, not the bound printed
    assert 3.0 <= waited < 10, messages[0]


# ---- the fixture's own bound -----------------------------------------------------------------------

def stuck_case():
    """Rank 1 sleeps instead of joining an (eager) all_reduce: both outlast the case's timeout."""
    if dist.get_rank() == 1:
        time.sleep(600)
    dist.all_reduce(torch.ones(1))


def test_a_stuck_case_is_killed_at_its_timeout(fresh_ranks):
    group = fresh_ranks(2)
    start = time.monotonic()
    with pytest.raises(pytest.fail.Exception, match=r"rank\(s\) \[0, 1\] gave no answer within 3 s \(killed\)"):
        group.run(stuck_case, timeout=3)
    assert time.monotonic() - start < 20
    assert not group.alive

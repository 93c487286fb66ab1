"""What the Hcom kernels (`kernels/hccl/collectives.py`) run on: torch.distributed process groups, bounded waits,
and the check that the ranks of a group run the same collectives.

On a CPU host TorchAir names a gloo group ``tag=<pg tag>;rank_list=<global ranks>``
(`torchair/_ge_concrete_graph/hcom_utils.py`, `encode_pg_tag_ranklist`: its CPU branch, taken when
the group's default device is the CPU); `process_group` resolves that name back to the process group
of this process. On an Ascend host the name is an HCCL communicator name, which no process group here
answers to: such a graph is refused with a clear error.

Every wait is bounded by `timeout()` ($OP_PLUGIN_COLLECTIVE_TIMEOUT seconds, 300 unless set): the gloo
operations get it as their timeout, and so does the agreement below. A wait that expires is an error,
never a hang, and says how long it waited (measured, never the bound printed as if it had elapsed).

Agreement (`agree`): on every call, before each collective node runs, the ranks of its group exchange
what they are about to run (type, dtype, shape, reduction, root, counts; for AllReduce, AllGather and
ReduceScatter the element count, which is what HCCL moves, not the shape) through the group's store, and
each rank checks the others' against its own. Every call, because a rank's shapes can change from one
call to the next (a dynamic graph, a graph one rank recompiled, counts computed from the data) while its
peer's do not: a rank-divergent call (one rank all-reduces where another all-gathers, or reduces a
different shape) is then an error naming the node on every rank, instead of a gloo call that hangs,
mixes up buffers or aborts the process. Each rank keeps one entry per group in the store (overwritten:
nothing accumulates), numbered by its collectives on the group and carrying the previous one; a peer one
collective ahead has either checked this rank's entry or given that collective up (its previous entry
says what it ran there). It costs two store round trips per collective call (a group of one rank:
none). A rank whose graph has fewer collectives on the group never publishes; its peers' wait expires
with an error that says so. While waiting, a rank looks every second whether the peers it waits for
still run (`liveness`: a peer on this host whose process has ended is named within about a second).
Point-to-point nodes (HcomSend/HcomReceive) pair two different types and are not part of it; their
shapes are checked by the header HcomSend sends first, as HCCL's graph kernel does.
"""
from __future__ import annotations

import datetime
import json
import math
import os
import re
import time

import torch

from . import liveness
from .errors import GeExecutionError, refuse

TIMEOUT_VARIABLE = "OP_PLUGIN_COLLECTIVE_TIMEOUT"
_DEFAULT_TIMEOUT = 300.0
_GROUP_NAME = re.compile(r"tag=(?P<tag>[^;]*);rank_list=(?P<ranks>\d+(?:,\d+)*)")

# GE types whose ranks must agree before they run (every one of a group's ranks runs them).
GROUP_COLLECTIVES = frozenset({"HcomAllReduce", "HcomAllGather", "HcomReduceScatter", "HcomBroadcast",
                               "HcomAllToAllV", "HcomAllToAll", "HcomAllGatherV", "HcomReduceScatterV",
                               # MC2: a matmul fused with a collective (kernels/mc2/matmul_comm.py)
                               "MatmulAllReduce", "AllGatherMatmul", "MatmulReduceScatter",
                               "AllGatherMatmulV2", "MatmulReduceScatterV2",  # (kernels/mc2/matmul_comm.py)
                               # MoE expert parallelism over the EP group (kernels/mc2/moe_distribute.py)
                               "MoeDistributeDispatch", "MoeDistributeCombine", "MoeDistributeDispatchV2",
                               "MoeDistributeCombineV2"})
POINT_TO_POINT = frozenset({"HcomSend", "HcomReceive"})
COLLECTIVE_TYPES = GROUP_COLLECTIVES | POINT_TO_POINT


def timeout() -> datetime.timedelta:
    """The bound on every collective wait: $OP_PLUGIN_COLLECTIVE_TIMEOUT seconds (default 300)."""
    text = os.environ.get(TIMEOUT_VARIABLE, "").strip()
    if not text:
        return datetime.timedelta(seconds=_DEFAULT_TIMEOUT)
    try:
        seconds = float(text)
    except ValueError:
        seconds = -1.0
    if not seconds > 0:
        raise GeExecutionError(f"${TIMEOUT_VARIABLE} must be a positive number of seconds, got {text!r}")
    return datetime.timedelta(seconds=seconds)


def _distributed():
    if not torch.distributed.is_available():
        refuse("collectives run over torch.distributed, which this torch build does not include")
    if not torch.distributed.is_initialized():
        refuse("collectives run over torch.distributed: call torch.distributed.init_process_group "
               "(backend 'gloo' on a CPU host) on every rank before running the graph")
    return torch.distributed.distributed_c10d


def parse_group_name(group: str) -> tuple[str, list[int]]:
    """(pg tag, global ranks) of a group name TorchAir writes on a CPU host; refuses any other name."""
    match = _GROUP_NAME.fullmatch(group or "")
    if match is None:
        refuse(f"group {group!r} is not a name TorchAir gives a gloo process group on a CPU host "
               "('tag=<pg tag>;rank_list=<ranks>'): the graph was built for HCCL (an HCCL communicator "
               "name from an Ascend host). Build the graph on this host, with gloo process groups")
    return match.group("tag"), [int(r) for r in match.group("ranks").split(",")]


def process_group(group: str):
    """The process group a graph's `group` attr names, from this process's torch.distributed."""
    tag, ranks = parse_group_name(group)
    c10d = _distributed()
    key = tag if not tag or tag.startswith(("ptd:", "user:")) else f"user:{tag}"
    for pg in c10d._world.tags_to_pg.get(key, []):
        if c10d.get_process_group_ranks(pg) == ranks:
            if c10d.get_rank() not in ranks:
                refuse(f"this rank ({c10d.get_rank()}) is not in group {group!r}")
            return pg
    refuse(f"no process group of this process has tag {tag!r} and ranks {ranks} (group {group!r}); "
           "the graph must run in the process group setup it was compiled in")
    return None  # unreachable


# The group a kernel hands its CPU tensors to, for a group whose own backend takes device tensors only: the
# virtual NPU's hccl groups (their gloo serves npu tensors; device/hccl.py registers the CPU companion it builds).
_cpu_companion = None


def set_cpu_companion(resolver) -> None:
    """Register `resolver(pg) -> group for CPU tensors` (device/hccl.py, at activation)."""
    global _cpu_companion
    _cpu_companion = resolver


def for_cpu_tensors(pg):
    """`pg`, or the group that runs its collectives on CPU tensors (the kernels' tensors are CPU tensors)."""
    return pg if _cpu_companion is None else _cpu_companion(pg)


def group_store(pg):
    """The store of `pg` (a PrefixStore of its own for a subgroup)."""
    return torch.distributed.distributed_c10d._world.pg_map[pg][1]


# ---- agreement --------------------------------------------------------------------------------------

_AGREEMENT_KEY = "op_plugin/hcom/agree/{rank}"  # in the group's store, per group rank: the latest entry
_FIRST_POLL, _LAST_POLL = 0.0001, 0.02  # seconds between looks at the peers' entries (doubling up to the last)
_LIVENESS_EVERY = 1.0  # seconds between looks at whether the peers waited for still run


class _Group:
    """What the agreement keeps per group name: the process group resolved once (again when the world
    changes), this rank's key and its peers', and the number of collectives this rank ran on it."""

    __slots__ = ("pg", "ranks", "me", "store", "my_key", "peers", "peer_keys", "number", "verified", "seen_all",
                 "last")

    def __init__(self, pg):
        c10d = torch.distributed.distributed_c10d
        self.pg = pg
        self.ranks = c10d.get_process_group_ranks(pg)  # group rank -> global rank
        self.me = pg.rank()
        self.store = group_store(pg)
        self.my_key = _AGREEMENT_KEY.format(rank=self.me)
        self.peers = [r for r in range(pg.size()) if r != self.me]
        self.peer_keys = [_AGREEMENT_KEY.format(rank=r) for r in self.peers]
        self.number = 0  # the number of this rank's next collective on the group
        self.verified = -1  # the last number this rank agreed on with every peer
        self.seen_all = False  # every peer has published an entry (multi_get needs no check first)
        self.last = None  # this rank's previous entry, carried in the next one (a peer may not have read it)


_groups: dict[str, _Group] = {}


def _drop_stale_groups() -> None:
    """Forget the groups of a world that is gone. Their state holds the process group, and through it the
    world's store, whose server (in the process that served it) runs threads: kept alive, a fork copies
    whatever lock they hold into the child (the declared-cases tool forks ranks from a process that ran
    earlier worlds), so they are let go as soon as they are stale, and at the latest before a fork."""
    if not _groups:
        return
    live = torch.distributed.distributed_c10d._world.pg_map
    for name in [name for name, state in _groups.items() if state.pg not in live]:
        del _groups[name]


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_drop_stale_groups)


def _group_state(group: str) -> _Group:
    state = _groups.get(group)
    if state is not None and state.pg in torch.distributed.distributed_c10d._world.pg_map:
        return state
    _drop_stale_groups()
    state = _groups[group] = _Group(process_group(group))
    try:
        liveness.publish()  # normally done already by the liveness thread
    except Exception:  # a store that fails here fails the agreement too, with a better message
        pass
    return state


def _dtype(tensor) -> str:
    return str(tensor.dtype).replace("torch.", "") if isinstance(tensor, torch.Tensor) else "-"


def _shape(tensor) -> list[int]:
    return list(tensor.shape) if isinstance(tensor, torch.Tensor) else []


def _ints(tensor) -> list[int] | None:
    if tensor is None:
        return None
    return [int(v) for v in tensor.reshape(-1).tolist()]


def describe(op, attrs: dict, args: list) -> dict:
    """What a rank publishes about one collective node: the fields its peers must agree on."""
    kind = op.type
    first = args[0] if args else None
    entry = {"node": op.name, "type": kind}
    if kind == "HcomBroadcast":
        entry.update(dtype=[_dtype(t) for t in args], shape=[_shape(t) for t in args], root_rank=attrs.get("root_rank"))
        return entry
    entry.update(dtype=_dtype(first), shape=_shape(first))
    if kind in ("HcomAllReduce", "HcomReduceScatter", "HcomReduceScatterV"):
        entry["reduction"] = attrs.get("reduction")
    if kind in ("HcomAllGather", "HcomReduceScatter", "AllGatherMatmul", "MatmulReduceScatter", "AllGatherMatmulV2",
                "MatmulReduceScatterV2"):
        entry["rank_size"] = attrs.get("rank_size")
    if kind == "HcomAllToAllV":
        entry.update(send_counts=_ints(args[1]), recv_counts=_ints(args[3]))
    elif kind == "HcomAllGatherV":
        entry["recv_counts"] = _ints(args[2])
    elif kind == "HcomReduceScatterV":
        entry["send_counts"] = _ints(args[2])
    return entry


def _summary(entry: dict) -> str:
    extras = [f"{k}={entry[k]}" for k in ("reduction", "root_rank", "rank_size", "send_counts", "recv_counts")
              if entry.get(k) is not None]
    return f"{entry['type']} {entry['dtype']} {entry['shape']}" + (f" ({', '.join(extras)})" if extras else "")


def _disagreement(mine: dict, theirs: dict, me: int, peer: int) -> str | None:
    """Why `theirs` (group rank `peer`) cannot run together with `mine` (group rank `me`), or None. Symmetric:
    a peer that agreed with this rank's entry would have found no reason either."""
    if mine["type"] != theirs["type"]:
        return "a different collective"
    if mine["dtype"] != theirs["dtype"]:
        return "another dtype"
    for key in ("reduction", "root_rank", "rank_size"):
        if mine.get(key) != theirs.get(key):
            return f"another {key}"
    kind = mine["type"]
    if kind == "HcomAllToAllV":
        sends, recvs = mine["send_counts"], mine["recv_counts"]
        their_sends, their_recvs = theirs["send_counts"], theirs["recv_counts"]
        if max(me, peer) >= min(len(sends), len(recvs), len(their_sends), len(their_recvs)):
            return "counts that do not cover the group"
        if sends[peer] != their_recvs[me] or recvs[peer] != their_sends[me]:
            return (f"counts that do not match: this rank sends {sends[peer]} and expects {recvs[peer]} elements, "
                    f"rank {peer} expects {their_recvs[me]} and sends {their_sends[me]}")
        return None
    if kind == "HcomAllGatherV":
        return None if mine["recv_counts"] == theirs["recv_counts"] else "other recv_counts"
    if kind == "HcomReduceScatterV":
        return None if mine["send_counts"] == theirs["send_counts"] else "other send_counts"
    if kind in _COUNTED:  # HCCL moves elements: the same count in another shape is the same call
        if math.prod(mine["shape"]) != math.prod(theirs["shape"]):
            return "another element count"
        return None
    if mine["shape"] != theirs["shape"]:
        return "another shape"
    return None


# Collectives HCCL runs on a count of elements, whatever each rank's shape (torch_npu's all_gather of a [2, 2] and a
# [1, 4] tensor): their ranks agree on the count.
_COUNTED = frozenset({"HcomAllReduce", "HcomAllGather", "HcomReduceScatter"})


def agree(op, attrs: dict, args: list) -> None:
    """Check, before `op` runs (on every call), that every rank of its group is about to run the same
    collective: the same type, dtype and shape (and reduction, root, counts). Raises GeExecutionError naming
    the node otherwise, when a peer's process has ended (within about a second), when the group's store
    cannot be reached, or when the peers have not arrived within the timeout (the time waited is measured)."""
    group = attrs.get("group", attrs.get("group_ep"))  # the MoE ops name their EP group group_ep
    where = f"{op.type} (node {op.name!r})"
    try:
        state = _group_state(group)
    except Exception as error:  # a refusal; the kernel would give the same one
        raise GeExecutionError(f"{where}: {error}") from error
    if not state.peers:
        return  # a group of one rank
    number = state.number
    state.number += 1
    mine = describe(op, attrs, args)
    mine["n"], mine["ok"] = number, state.verified
    text = json.dumps({**mine, "prev": state.last})
    state.last = mine
    entries = _peer_entries(state, number, text, where, group, mine)
    problems, gave_up = [], []
    for r, (theirs, current) in zip(state.peers, entries, strict=True):
        if theirs is None:
            continue  # already one collective further: it agreed with this rank's entry
        why = _disagreement(mine, theirs, state.me, r)
        if why is not None:
            problems.append(f"rank {state.ranks[r]} runs {_summary(theirs)} (node {theirs['node']!r}): {why}")
        elif not current:
            gave_up.append(state.ranks[r])
    me = state.ranks[state.me]
    if problems:
        raise GeExecutionError(
            f"{where}: the ranks of group {group!r} disagree on collective #{number} of the group, a rank-divergent "
            f"graph (it would hang or mix up data on a cluster): this rank (rank {me}) runs {_summary(mine)}; "
            + "; ".join(problems))
    if gave_up:
        raise GeExecutionError(
            f"{where}: rank(s) {gave_up} of group {group!r} stopped collective #{number} of the group with an error "
            f"(their own message says which) and went on, where this rank (rank {me}) runs {_summary(mine)}")
    state.verified = number


def _peer_entries(state: _Group, number: int, text: str, where: str, group: str, mine: dict) -> list:
    """Publish this rank's entry for collective `number` and return each peer's (entry, still at it) for it
    (`_current`), polling the store until every peer has published; refuses a group out of step, a peer
    whose process ended, an unreachable store, and the timeout."""
    limit = timeout().total_seconds()
    start = time.monotonic()
    next_look = start + _LIVENESS_EVERY
    delay = _FIRST_POLL
    me = state.ranks[state.me]
    try:
        state.store.set(state.my_key, text)
        while True:
            waiting = None  # the group ranks not there yet, when known
            if state.seen_all or state.store.check(state.peer_keys):
                state.seen_all = True
                entries = [json.loads(value) for value in state.store.multi_get(state.peer_keys)]
                waiting = [r for r, e in zip(state.peers, entries, strict=True) if e["n"] < number]
                if not waiting:
                    return [_current(e, number, state.ranks[r], me, group, where) for r, e in
                            zip(state.peers, entries, strict=True)]
            now = time.monotonic()
            if now >= next_look or now - start >= limit:
                if waiting is None:  # some peer has never published: which
                    waiting = [r for r, key in zip(state.peers, state.peer_keys, strict=True)
                               if not state.store.check([key])]
                global_waiting = [state.ranks[r] for r in waiting]
                ended = liveness.ended(global_waiting)
                if ended:
                    raise GeExecutionError(
                        f"{where}: collective #{number} of group {group!r} cannot run: "
                        + "; ".join(f"rank {r} has ended ({why})" for r, why in sorted(ended.items()))
                        + f"; this rank (rank {me}) waited {now - start:.1f} s for it, to run {_summary(mine)}")
                if now - start >= limit:
                    raise GeExecutionError(
                        f"{where}: rank(s) {global_waiting} of group {group!r} did not reach collective #{number} "
                        f"of the group within {now - start:.1f} s (${TIMEOUT_VARIABLE}: {limit:g} s), where this "
                        f"rank (rank {me}) runs {_summary(mine)}. Their graph has fewer collectives on this group "
                        "(a rank-divergent graph), they stopped with an error, or they are still compiling (raise "
                        f"${TIMEOUT_VARIABLE})")
                next_look = now + _LIVENESS_EVERY
            time.sleep(delay)
            delay = min(delay * 2, _LAST_POLL)
    except torch.distributed.DistError as error:  # the store itself: its server is gone, or refuses
        ended = liveness.ended(state.ranks[r] for r in state.peers)
        known = "; ".join(f"rank {r} has ended ({why})" for r, why in sorted(ended.items()))
        raise GeExecutionError(
            f"{where}: collective #{number} of group {group!r} cannot run: the group's store cannot be reached "
            f"after {time.monotonic() - start:.1f} s ({_first_line(error)}); "
            + (known if known else "the process that serves it (normally global rank 0's) has likely ended")
            ) from error


def _current(entry: dict, number: int, rank: int, me: int, group: str, where: str) -> tuple:
    """(a peer's entry for collective `number`, whether the peer is still at it): (its entry, True); (None,
    True) when it is one further and agreed with this rank's entry (it read it); (its entry for `number`,
    False) when it is one further after giving that one up (a disagreement or another error there); an
    error when the two ranks are further out of step."""
    if entry["n"] == number:
        return entry, True
    previous = entry.get("prev")
    if entry["n"] == number + 1 and previous is not None and previous["n"] == number:
        return (None, True) if entry["ok"] == number else (previous, False)
    raise GeExecutionError(
        f"{where}: the ranks of group {group!r} are out of step: rank {rank} is at collective #{entry['n']} of "
        f"the group, this rank (rank {me}) at #{number}. An earlier collective failed on one of them, or their "
        "graphs ran a different number of collectives on this group before")


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def peers_ended(group: str) -> dict[int, str]:
    """The peers of `group` whose process has ended (global rank -> how it is known): for a kernel whose
    gloo call failed, to name them."""
    try:
        pg = process_group(group)
        ranks = torch.distributed.distributed_c10d.get_process_group_ranks(pg)
        mine = torch.distributed.get_rank()
        return liveness.ended([r for r in ranks if r != mine])
    except Exception:  # only for a message: nothing known
        return {}


__all__ = ["COLLECTIVE_TYPES", "GROUP_COLLECTIVES", "POINT_TO_POINT", "TIMEOUT_VARIABLE", "agree", "describe",
           "group_store", "parse_group_name", "peers_ended", "process_group", "timeout"]

liveness.watch()  # each process publishes, once per world, what lets its peers see that it ended

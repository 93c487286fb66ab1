"""What the Hcom kernels (`kernels/hccl/collectives.py`) run on: torch.distributed process groups, bounded waits,
and the check that the ranks of a group run the same collectives.

On a CPU host TorchAir names a gloo group ``tag=<pg tag>;rank_list=<global ranks>``
(`torchair/_ge_concrete_graph/hcom_utils.py`, `encode_pg_tag_ranklist`: its CPU branch, taken when
the group's default device is the CPU); `process_group` resolves that name back to the process group
of this process. On an Ascend host the name is an HCCL communicator name, which no process group here
answers to: such a graph is refused with a clear error.

Every wait is bounded by `timeout()` ($OP_PLUGIN_COLLECTIVE_TIMEOUT seconds, 300 unless set): the gloo
operations get it as their timeout, and so does the agreement below. A wait that expires is an error,
never a hang.

Agreement (`agree`): on the first run of each plan, before each collective node runs, the ranks of
its group exchange what they are about to run (type, dtype, shape, reduction, root, counts) through
the group's store, and each rank checks the others' against its own. A rank-divergent graph (one rank
all-reduces where another all-gathers, or reduces a different shape) is then an error naming the
node on every rank, instead of a gloo call that hangs or mixes up buffers. A rank whose graph has
fewer collectives on the group never publishes; its peers' wait expires with an error that says so.
Point-to-point nodes (HcomSend/HcomReceive) pair two different types and are not part of it; their
shapes are checked by the header HcomSend sends first, as HCCL's graph kernel does.
"""
from __future__ import annotations

import datetime
import json
import os
import re

import torch

from .errors import GeExecutionError, refuse

TIMEOUT_VARIABLE = "OP_PLUGIN_COLLECTIVE_TIMEOUT"
_DEFAULT_TIMEOUT = 300.0
_GROUP_NAME = re.compile(r"tag=(?P<tag>[^;]*);rank_list=(?P<ranks>\d+(?:,\d+)*)")
_AGREEMENT_PREFIX = "op_plugin/hcom/agree"

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

# (group name, id of its process group) -> number of agreements this rank has made on it.
_sequence: dict[tuple[str, int], int] = {}


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
    """Why `theirs` (group rank `peer`) cannot run together with `mine` (group rank `me`), or None."""
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
    if mine["shape"] != theirs["shape"]:
        return "another shape"
    return None


def agree(op, attrs: dict, args: list) -> None:
    """Check, before `op` runs for the first time in its plan, that every rank of its group is about
    to run the same collective (raises GeExecutionError naming the node otherwise; bounded wait)."""
    group = attrs.get("group", attrs.get("group_ep"))  # the MoE ops name their EP group group_ep
    where = f"{op.type} (node {op.name!r})"
    try:
        pg = process_group(group)
    except Exception as error:  # a refusal; the kernel would give the same one
        raise GeExecutionError(f"{where}: {error}") from error
    c10d = torch.distributed.distributed_c10d
    ranks = c10d.get_process_group_ranks(pg)
    me = pg.rank()
    key = (group, id(pg))
    number = _sequence.get(key, 0)
    _sequence[key] = number + 1
    store = group_store(pg)
    prefix = f"{_AGREEMENT_PREFIX}/{number}/"
    mine = describe(op, attrs, args)
    store.set(prefix + str(me), json.dumps(mine))
    peers = [r for r in range(pg.size()) if r != me]
    limit = timeout()
    try:
        store.wait([prefix + str(r) for r in peers], limit)
    except Exception as error:  # the store's timeout error: say what it means here
        missing = [ranks[r] for r in peers if not store.check([prefix + str(r)])]
        raise GeExecutionError(
            f"{where}: rank(s) {missing or '?'} of group {group!r} did not reach collective #{number} of the group "
            f"within {limit.total_seconds():g} s, where this rank (rank {ranks[me]}) runs {_summary(mine)}. Their "
            "graph has fewer collectives on this group (a rank-divergent graph), they stopped with an error, they "
            f"are still compiling (raise ${TIMEOUT_VARIABLE}), or they reuse a graph this rank recompiled "
            "(mark the sizes that differ between calls dynamic)") from error
    problems = []
    for r in peers:
        theirs = json.loads(store.get(prefix + str(r)).decode())
        why = _disagreement(mine, theirs, me, r)
        if why is not None:
            problems.append(f"rank {ranks[r]} runs {_summary(theirs)} (node {theirs['node']!r}): {why}")
    if problems:
        raise GeExecutionError(
            f"{where}: the ranks of group {group!r} disagree on collective #{number} of the group, a rank-divergent "
            f"graph (it would hang or mix up data on a cluster): this rank (rank {ranks[me]}) runs {_summary(mine)}; "
            + "; ".join(problems))


__all__ = ["COLLECTIVE_TYPES", "GROUP_COLLECTIVES", "POINT_TO_POINT", "TIMEOUT_VARIABLE", "agree", "describe",
           "group_store", "parse_group_name", "process_group", "timeout"]

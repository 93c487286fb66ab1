"""A gloo process group for the declared cases of ops that take a communicator name.

TorchAir declares cases of its MC2 converters with a placeholder communicator name
(`npu_mm_all_reduce_base(x1, x2, "group", ...)`, `hcom="94430305206192"`): its own test only builds
the GE graph. To run such an op, on an Ascend host as here, a process group must exist and the op
must be given its name (on an NPU `get_hccl_comm_name(rank)` of an HCCL group). So a case whose op
takes a `str` argument named `hcom` or `group*` runs inside `case_group(case)`: a world of gloo ranks
on 127.0.0.1 (a free port), torn down after the case, and `with_group_names` replaces the case's
placeholder string by the name TorchAir gives that group (`hccl_comm_name()`), which the simulator
resolves back to it.

The world has the case's `world_size` ranks when the op takes that argument (TorchAir declares
`world_size=8` for npu_all_gather_quant_mm and npu_quant_mm_reduce_scatter: their outputs' shapes
depend on it), else one. Rank 0 is this process; ranks 1.. are forked from it (torch and TorchAir
already loaded, so they start at once; one OpenMP thread each), build the same inputs (seeded by the
case id), run the same case (compiled, then eager, so their collectives pair up with rank 0's) and
report their own result through a pipe; the case passes only when every rank's does. Every wait is
bounded (the ranks have STARTUP_BASE_SECONDS + STARTUP_SECONDS_PER_RANK per rank to join, each collective
COLLECTIVE_SECONDS_PER_RANK per rank), and the peers
are killed by pid when the case ends, and by the kernel when the worker that forked them ends
(`_base.processes.die_with_parent`). A case asking for more than MAX_RANKS ranks is refused.
"""
from __future__ import annotations

import contextlib
import datetime
import json
import os
import re
import select
import signal
import socket
import time

import torch

from ..._base.processes import die_with_parent
from .result import CaseResult

_GROUP_ARGUMENT = re.compile(r"hcom|group(_\w+)?")
# Per rank of the case's world: the ranks are processes sharing the host's cores, so 8 ranks compiling on 2 loaded
# cores take several times one rank's time to reach a collective or to join (a fixed 60 s / 120 s timed out).
COLLECTIVE_SECONDS_PER_RANK = 30  # each collective wait (gloo, the simulator's agreement)
STARTUP_SECONDS_PER_RANK = 30  # for every rank to join, on top of STARTUP_BASE_SECONDS
STARTUP_BASE_SECONDS = 60
MAX_RANKS = 8
_TIMEOUT_VARIABLE = "OP_PLUGIN_COLLECTIVE_TIMEOUT"  # read by the simulator's collectives

_active_name: str | None = None


def _startup_seconds(size: int) -> int:
    return STARTUP_BASE_SECONDS + STARTUP_SECONDS_PER_RANK * size  # the group's name while a case group is open


def group_arguments(target) -> tuple[str, ...]:
    """The names of `target`'s communicator-name arguments (`str hcom`, `str group_ep`, ...), if it is an op."""
    schema = getattr(target, "_schema", None)
    if schema is None:
        return ()
    return tuple(a.name for a in schema.arguments
                 if str(a.type) in ("str", "Optional[str]", "str?") and _GROUP_ARGUMENT.fullmatch(a.name))


def needs_group(target) -> bool:
    return isinstance(target, torch._ops.OpOverload) and bool(group_arguments(target))


def world_size(case) -> int:
    """The ranks the case asks for: its op's `world_size` argument if it has one (>= 1), else 1."""
    arguments = [a.name for a in case.target._schema.arguments]
    if "world_size" not in arguments:
        return 1
    index = arguments.index("world_size")
    value = case.support.args[index] if index < len(case.support.args) else case.support.kwargs.get("world_size")
    return value if isinstance(value, int) and value > 1 else 1


def rank_scaled_timeouts(cases, timeout: float) -> dict[str, float]:
    """Per-case timeouts for cases on more than one rank: `timeout` per rank, since the ranks are processes
    sharing the host's cores (8 ranks on 2 cores under a loaded run outlast one case's timeout)."""
    return {c.case_id: timeout * world_size(c) for c in cases if needs_group(c.target) and world_size(c) > 1}


@contextlib.contextmanager
def _joined(store, rank: int, size: int):
    """This process as `rank` of a gloo world of `size` over `store`; sets the group's name for the case."""
    global _active_name
    import torch.distributed as dist

    from ..._simulator.npu.collective_matmul import hccl_comm_name

    if dist.is_initialized():
        raise RuntimeError("declared case: the op takes a communicator name but torch.distributed is already "
                           "initialised in this process; its case group cannot be created")
    previous = os.environ.get(_TIMEOUT_VARIABLE)
    os.environ[_TIMEOUT_VARIABLE] = str(COLLECTIVE_SECONDS_PER_RANK * size)
    dist.init_process_group("gloo", store=store, rank=rank, world_size=size,
                            timeout=datetime.timedelta(seconds=_startup_seconds(size)))
    try:
        _active_name = hccl_comm_name()
        yield _active_name
    finally:
        _active_name = None
        dist.destroy_process_group()
        if previous is None:
            os.environ.pop(_TIMEOUT_VARIABLE, None)
        else:
            os.environ[_TIMEOUT_VARIABLE] = previous


def _store(port: int, size: int, master: bool, listening: socket.socket | None = None):
    """The case's store; a master given `listening` serves on that socket and owns it from then on (the
    store closes the descriptor when it is destroyed)."""
    import torch.distributed as dist

    return dist.TCPStore("127.0.0.1", port, size, master, timeout=datetime.timedelta(seconds=_startup_seconds(size)),
                         wait_for_workers=False,  # the master starts the peers after it listens
                         master_listen_fd=None if listening is None else listening.detach())


def _listening_socket() -> socket.socket:
    """A socket bound to a free port of 127.0.0.1 and listening: the peers connect to it (the kernel queues
    them) before the store's server, and its threads, exist in rank 0."""
    listening = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listening.bind(("127.0.0.1", 0))
    listening.listen(MAX_RANKS * 4)
    return listening


@contextlib.contextmanager
def one_rank_group():
    """A world of one gloo rank for the duration of the block; yields its communicator name."""
    store = _store(0, 1, True)  # port 0: the OS picks a free one
    with _joined(store, 0, 1) as name:
        yield name


class _Peers:
    """Ranks 1.. of a case's world: forked from this process (torch and TorchAir already loaded, so a peer
    starts at once), each running the case and writing its result to a pipe; killed by pid when the case ends."""

    def __init__(self, case, size: int, port: int, run, listening: socket.socket):
        self.run = run  # run(case) -> CaseResult, on each peer
        self.peers = []  # (rank, pid, read end of its result pipe)
        parent = os.getpid()
        for rank in range(1, size):
            read, write = os.pipe()
            pid = os.fork()
            if pid == 0:  # the peer: never returns
                die_with_parent(parent)  # a worker killed mid-case (its run ended) takes its ranks along
                os.close(read)
                listening.close()
                _peer(case, self.run, rank, size, port, write)
            os.close(write)
            self.peers.append((rank, pid, read))

    def fold(self, result):
        """Rank 0's result, or the first other rank's where rank 0 passed and it did not."""
        # one bound for all peers (they run side by side): joining, then a collective's wait, twice
        deadline = time.monotonic() + _startup_seconds(len(self.peers) + 1) + 2 * COLLECTIVE_SECONDS_PER_RANK * (
            len(self.peers) + 1)
        for rank, _, read in self.peers:
            ready, _, _ = select.select([read], [], [], max(0.0, deadline - time.monotonic()))
            line = _read_all(read) if ready else b""
            theirs = CaseResult(**json.loads(line)) if line.strip() else CaseResult(
                result.case_id, "crash", f"rank {rank} of {len(self.peers) + 1} gave no result (it died or hung)")
            if result.cls == "pass" and theirs.cls != "pass":
                theirs.reason = f"rank {rank}: {theirs.reason}"
                theirs.seconds = result.seconds
                return theirs
        return result

    def stop(self) -> None:
        for _, pid, read in self.peers:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)  # a peer that answered has exited already
            os.waitpid(pid, 0)
            os.close(read)
        self.peers = []


def _read_all(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, 65536):
        chunks.append(chunk)
    return b"".join(chunks)


def _peer(case, run, rank: int, size: int, port: int, write: int) -> None:
    """A forked peer rank: join the world, run the case, write its result as JSON, exit without cleanup
    (the parent's objects, its store server among them, are not this process's to tear down)."""
    code = 1
    try:
        torch.set_num_threads(1)  # OpenMP's thread pool does not survive fork; one thread needs none
        with _joined(_store(port, size, False), rank, size):
            try:
                result = run(case)
            except Exception as error:  # reported to rank 0
                result = CaseResult(case.case_id, "crash", f"declared-cases runner raised {type(error).__name__}: "
                                                           f"{error}")
        os.write(write, (json.dumps(result.as_dict()) + "\n").encode())
        code = 0
    finally:
        os._exit(code)


@contextlib.contextmanager
def case_group(case, run):
    """The case's world (rank 0 here, forked peers for the other ranks, each running `run(case)`); yields
    the peers, whose `fold` combines the ranks' results."""
    size = world_size(case)
    if size > MAX_RANKS:
        raise RuntimeError(f"declared case {case.case_id}: world_size={size}; the tool runs at most {MAX_RANKS} "
                           "ranks")
    # Fork first, then start the store's server: a fork while its threads serve the first peers can copy a
    # lock one of them holds into the last peer, which then never joins (seen on a loaded 2-core CI run).
    listening = _listening_socket()
    peers = _Peers(case, size, listening.getsockname()[1], run, listening)
    try:
        store = _store(listening.getsockname()[1], size, True, listening)
        with _joined(store, 0, size):
            yield peers
    finally:
        peers.stop()
        listening.close()  # a no-op once the store owns it


def with_group_names(target, args: list, kwargs: dict) -> tuple[list, dict]:
    """The case's arguments with each communicator-name string replaced by the open group's name
    (unchanged when no case group is open or the op takes none)."""
    if _active_name is None:
        return args, kwargs
    names = group_arguments(target)
    if not names:
        return args, kwargs
    positions = {a.name: i for i, a in enumerate(target._schema.arguments)}
    args = list(args)
    for name in names:
        index = positions[name]
        if index < len(args) and isinstance(args[index], str):
            args[index] = _active_name
        elif isinstance(kwargs.get(name), str):
            kwargs = {**kwargs, name: _active_name}
    return args, kwargs

"""Whether the peer ranks of a collective still run: a dead peer is named within seconds, not at the timeout.

A rank that waits for its peers (the agreement in `collectives`, a gloo call) cannot tell a peer that is
slow (compiling, a long first call) from one whose process has ended: both are silent. So each process
publishes once per torch.distributed world, under its global rank in the world's store, what identifies
its process: the host (the kernel's boot id and the pid namespace, so pids compare only where they mean the
same process), its pid and the pid's start time (so a reused pid is not taken for it). A waiting rank
reads the records of the peers it waits for and looks their processes up in /proc: a peer on the same host
whose process is gone (or a zombie, or another process under its pid) has ended, and the wait stops with
an error naming it. A peer on another host, or one that has not published (a process that ended within
a tenth of a second of joining the world, or a host without /proc), is waited for up to the timeout.

When to publish: a rank that dies before its first collective (an error while loading a model) must have
published already, so publishing cannot wait for op_plugin's first collective. torch.distributed has no hook
for a new world, so `watch()` starts one daemon thread per process (at `import op_plugin` on a CPU host:
hosting/collectives_trace.py; and at import of `collectives`) that checks ten times a second whether a world
is initialised (no store operation while none is) and publishes once for each new one, then asks the store
every few seconds whether its record is still there; it does nothing else. After a fork it is started again
in the child (`os.register_at_fork`), for the worlds the child
initialises itself: a world it inherits (a DataLoader worker forked from a rank) stays its parent's.
"""
from __future__ import annotations

import json
import os
import threading
import time

import torch

_RECORD = "op_plugin/hcom/process/{rank}"
_POLL_SECONDS = 0.1  # how soon a new world is noticed (no store operation while there is none)
_CHECK_SECONDS = 5.0  # how often the store is asked whether the record is still there (a new world reusing ids)

_lock = threading.Lock()
_thread: threading.Thread | None = None
_published: tuple | None = None  # (id of the world's group, id of its store, rank) last published for
_inherited: tuple | None = None  # in a forked child: the parent's world, never touched (its store's socket is shared)
_records: dict[tuple, dict] = {}  # (id of the world's store, global rank) -> that rank's record, once read


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="ascii", errors="replace") as handle:
            return handle.read()
    except OSError:
        return None


def _host() -> str | None:
    """What makes two pids comparable: the same kernel boot and pid namespace (None without /proc)."""
    boot = _read("/proc/sys/kernel/random/boot_id")
    try:
        namespace = os.readlink("/proc/self/ns/pid")
    except OSError:
        return None
    return None if boot is None else f"{boot.strip()}/{namespace}"


def _start_time(pid: int) -> str | None:
    """The pid's start time (field 22 of /proc/<pid>/stat), None when there is no such process; "Z" for a
    zombie or a dead process (ended, not yet reaped)."""
    text = _read(f"/proc/{pid}/stat")
    if text is None:
        return None
    fields = text[text.rfind(")") + 2:].split()  # after the command name, which may hold spaces
    if not fields or fields[0] in ("Z", "X", "x"):
        return "Z"
    return fields[19] if len(fields) > 19 else None


def _world():
    """(world group, its store, this rank), or None when no world is initialised."""
    dist = torch.distributed
    if not dist.is_available() or not dist.is_initialized():
        return None
    c10d = dist.distributed_c10d
    world = c10d.GroupMember.WORLD
    entry = c10d._world.pg_map.get(world)
    if world is None or entry is None:
        return None
    return world, entry[1], dist.get_rank()


def _world_ident() -> tuple | None:
    current = _world()
    return None if current is None else (id(current[0]), id(current[1]), current[2])


def publish() -> None:
    """Publish this process's record in the current world's store (no-op without a world). Cheap when it is
    there already: one `check` (a world's objects may reuse the ids of the previous one's, so the store is
    asked rather than trusted)."""
    with _lock:  # the thread and a collective's first call may both publish
        _publish()


def _publish() -> None:
    global _published
    current = _world()
    if current is None:
        return
    world, store, rank = current
    key = _RECORD.format(rank=rank)
    ident = (id(world), id(store), rank)
    if ident == _inherited:
        return  # the world of the process this one was forked from: its record is the parent's
    if ident == _published and store.check([key]):
        return
    if ident != _published:
        _records.clear()
    record = {"host": _host(), "pid": os.getpid(), "start": _start_time(os.getpid())}
    store.set(key, json.dumps(record))
    _published = ident


def _watch_loop() -> None:
    checked = 0.0
    while True:
        time.sleep(_POLL_SECONDS)
        try:
            if not torch.distributed.is_initialized():
                continue
            now = time.monotonic()
            ident = _world_ident()
            if ident == _inherited or (ident == _published and now - checked < _CHECK_SECONDS):
                continue  # a parent's world (a forked DataLoader worker), or published and asked lately
            checked = now
            publish()
        except Exception:  # a world being torn down, a store gone: try again at the next world
            pass


def watch() -> None:
    """Start the publishing thread of this process (idempotent)."""
    global _thread
    if not torch.distributed.is_available():
        return
    if _thread is not None and _thread.is_alive():
        return
    _thread = threading.Thread(target=_watch_loop, name="op_plugin-rank-liveness", daemon=True)
    _thread.start()


def _after_fork() -> None:
    """In a forked child: a world it inherits is its parent's (a DataLoader worker forked from a rank), never
    published for nor asked (the child shares the parent's store connection); a world it initialises itself
    (the declared-cases tool's ranks) is published as any other."""
    global _thread, _lock, _inherited
    _lock = threading.Lock()  # the parent's thread may have held it
    _thread = None
    _records.clear()
    try:
        _inherited = _world_ident()
    except Exception:  # a world being torn down: nothing to keep away from
        _inherited = None
    watch()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)


def ended(global_ranks) -> dict[int, str]:
    """Of `global_ranks`, those whose process has certainly ended, each with how that is known. A rank
    without a record, or on another host, is never reported (it may be alive)."""
    current = _world()
    if current is None:
        return {}
    _, store, _ = current
    me = _host()
    found = {}
    for rank in global_ranks:
        record = _record(store, rank)
        if record is None or me is None or record.get("host") != me:
            continue
        pid = record.get("pid")
        started = _start_time(pid) if isinstance(pid, int) else None
        if started is None:
            found[rank] = f"its process (pid {pid}) has ended"
        elif started == "Z":
            found[rank] = f"its process (pid {pid}) has ended (not yet reaped by its parent)"
        elif record.get("start") is not None and started != record["start"]:
            found[rank] = f"its process (pid {pid}) has ended (the pid now belongs to another process)"
    return found


def _record(store, rank: int) -> dict | None:
    """The rank's record as the store has it now; the one read last when the store cannot be reached (its
    server ran in a process that has ended)."""
    key = _RECORD.format(rank=rank)
    try:
        if not store.check([key]):
            return None
        record = json.loads(store.get(key).decode())
    except (RuntimeError, ValueError):  # the store is unreachable, or the record is not one of ours
        return _records.get((id(store), rank))
    _records[(id(store), rank)] = record
    return record


def remember(global_ranks) -> None:
    """Read and keep the records of `global_ranks` (where published), so that a peer can still be looked
    up once the store is gone with the process that served it."""
    current = _world()
    if current is None:
        return
    for rank in global_ranks:
        _record(current[1], rank)


__all__ = ["ended", "publish", "remember", "watch"]

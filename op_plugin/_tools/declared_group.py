"""A one-rank gloo process group for the declared cases of ops that take a communicator name.

TorchAir declares cases of its MC2 converters with a placeholder communicator name
(`npu_mm_all_reduce_base(x1, x2, "group", ...)`): its own test only builds the GE graph. To run
such an op, on an Ascend host as here, a process group must exist and the op must be given its
name (on an NPU `get_hccl_comm_name(rank)` of an HCCL group). So a case whose op takes a `str`
argument named `hcom` or `group*` runs inside `one_rank_group()`: a world of one gloo rank on
127.0.0.1 (a free port, bounded waits), torn down after the case, and `with_group_names`
replaces the case's placeholder string by the name TorchAir gives that group
(`hccl_comm_name()`), which the simulator resolves back to it. Nothing else about the case changes:
a case that declares `world_size=8` still asks for 8 ranks, and the kernels refuse it naming the
mismatch (the group has one rank).
"""
from __future__ import annotations

import contextlib
import datetime
import os
import re

import torch

_GROUP_ARGUMENT = re.compile(r"hcom|group(_\w+)?")
_TIMEOUT_SECONDS = 60  # every wait of the group (store, gloo, the simulator's collective agreement)
_TIMEOUT_VARIABLE = "OP_PLUGIN_COLLECTIVE_TIMEOUT"  # read by the simulator's collectives

_active_name: str | None = None  # the group's name while one_rank_group() is open


def group_arguments(target) -> tuple[str, ...]:
    """The names of `target`'s communicator-name arguments (`str hcom`, `str group_ep`, ...), if it is an op."""
    schema = getattr(target, "_schema", None)
    if schema is None:
        return ()
    return tuple(a.name for a in schema.arguments
                 if str(a.type) in ("str", "Optional[str]", "str?") and _GROUP_ARGUMENT.fullmatch(a.name))


@contextlib.contextmanager
def one_rank_group():
    """A world of one gloo rank for the duration of the block; yields its communicator name.

    Refuses when torch.distributed is already initialised in this process (a setup module made its
    own world): the case's op would then run over a group it does not expect."""
    global _active_name
    import torch.distributed as dist

    from .._simulator.npu.collective_matmul import hccl_comm_name

    if not dist.is_available():
        raise RuntimeError("declared case: the op takes a communicator name, and this torch has no torch.distributed")
    if dist.is_initialized():
        raise RuntimeError("declared case: the op takes a communicator name but torch.distributed is already "
                           "initialised in this worker; the one-rank group for it cannot be created")
    timeout = datetime.timedelta(seconds=_TIMEOUT_SECONDS)
    store = dist.TCPStore("127.0.0.1", 0, 1, True, timeout=timeout)  # port 0: the OS picks a free one
    previous = os.environ.get(_TIMEOUT_VARIABLE)
    os.environ[_TIMEOUT_VARIABLE] = str(_TIMEOUT_SECONDS)
    dist.init_process_group("gloo", store=store, rank=0, world_size=1, timeout=timeout)
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
        del store


def with_group_names(target, args: list, kwargs: dict) -> tuple[list, dict]:
    """The case's arguments with each communicator-name string replaced by the open group's name
    (unchanged when no one_rank_group() is open or the op takes none)."""
    if _active_name is None:
        return args, kwargs
    names = group_arguments(target)
    if not names:
        return args, kwargs
    positions = {a.name: i for i, a in enumerate(target._schema.arguments)}  # pylint: disable=protected-access
    args = list(args)
    for name in names:
        index = positions[name]
        if index < len(args) and isinstance(args[index], str):
            args[index] = _active_name
        elif isinstance(kwargs.get(name), str):
            kwargs = {**kwargs, name: _active_name}
    return args, kwargs


def needs_group(target) -> bool:
    return bool(group_arguments(target)) and isinstance(target, torch._ops.OpOverload)

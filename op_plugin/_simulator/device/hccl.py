"""`init_process_group("hccl")` on the virtual NPU: collectives on npu tensors run on gloo over host memory.

An npu tensor's storage is host memory, so gloo can move its bytes as they are: each collective hands gloo
CPU aliases of the npu tensors (`native.cpu_alias`: a CPU tensor over the same memory, no copy), and the
results gloo writes land in the npu tensors themselves.

How it plugs into c10d (torch 2.13, measured):
- `install()` (at activation) registers the backend "hccl" for the device "npu" with
  `Backend.register_backend(..., extended_api=True, devices=["npu"])`, as torch_npu registers its own; so
  `init_process_group("hccl")`, `backend="hccl"`, `init_process_group(device_id=torch.device("npu", i))` (npu's
  default backend) and `new_group` build an ordinary c10d ProcessGroup whose npu backend `create_backend` makes:
  a `ProcessGroupGloo` over the group's store, with the user's timeout.
- Gloo refuses npu tensors ("ProcessGroupGloo::allreduce: unsupported device type npu"). c10d runs every
  collective through a dispatcher op (`c10d::allreduce_`, ...) whose PrivateUse1 kernel calls the group's npu
  backend; the first hccl group replaces those kernels with `_run_on_gloo`: npu tensors become their CPU
  aliases, the group becomes a CPU-only companion group holding the same gloo backend, and the op runs again,
  now reaching c10d's CPU kernel and gloo. The group stays c10d's own, so its name, bound device,
  `new_group`, `dist._functional_collectives`, object collectives and DDP work as with any backend.
- Rejected: a Python subclass of c10d's `Backend` (torch 2.13 gives it no Python constructor: "No constructor
  defined"); a Python `ProcessGroup` subclass returned by the creator (c10d then uses it as the whole group:
  the group name is lost, so functional collectives fail with "ProcessGroup name not set", and
  `bound_device_id` and `_device_types`, hence the barrier's and object collectives' device, are lost too).

TorchAir asks an hccl group's npu backend for `get_hccl_comm_name` whenever it builds a GE graph: the first hccl
group gives the gloo class one (`hccl_comm_name`).

Refused: CPU tensors on an hccl group, as on hardware (hccl serves npu only; c10d's own "No backend type
associated with device type cpu"); tensors on two devices in one call; what gloo cannot do (`ReduceOp.PREMUL_SUM`,
a send to oneself): errors that start with "hccl on the virtual NPU:" and name the call. `ReduceOp.AVG` is gloo's
average, as torch_npu's ProcessGroupHCCL computes it (a sum, then a division). An error gloo meets after the
call (a peer that never comes: the group's timeout) surfaces at `wait()` in gloo's words.
"""
from __future__ import annotations

import functools
import warnings
import weakref

import torch
from torch.utils._pytree import tree_flatten, tree_map

BACKEND = "hccl"
PREFIX = "hccl on the virtual NPU"
_PROCESS_GROUP = "__torch__.torch.classes.c10d.ProcessGroup"
_REDUCE_OP = "__torch__.torch.classes.c10d.ReduceOp"
# The torch.distributed call behind each c10d op, for the errors.
_CALLS = {
    "allreduce_": "dist.all_reduce", "allreduce_coalesced_": "dist.all_reduce_coalesced",
    "allgather_": "dist.all_gather", "_allgather_base_": "dist.all_gather_into_tensor",
    "allgather_coalesced_": "dist.all_gather_coalesced",
    "allgather_into_tensor_coalesced_": "dist.all_gather_into_tensor (coalesced)",
    "reduce_scatter_": "dist.reduce_scatter", "_reduce_scatter_base_": "dist.reduce_scatter_tensor",
    "reduce_scatter_tensor_coalesced_": "dist.reduce_scatter_tensor (coalesced)",
    "broadcast_": "dist.broadcast", "reduce_": "dist.reduce", "gather_": "dist.gather", "scatter_": "dist.scatter",
    "alltoall_": "dist.all_to_all", "alltoall_base_": "dist.all_to_all_single", "barrier": "dist.barrier",
    "send": "dist.send", "recv_": "dist.recv", "recv_any_source_": "dist.recv (any source)",
    "monitored_barrier_": "dist.monitored_barrier",
}
_INSTALLED = False
_KERNELS = None  # the torch.library.Library holding the c10d kernels, kept for the process
# hccl group -> its CPU-only companion (`cpu_group`).
_COMPANIONS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def is_hccl_available() -> bool:
    """True: torch_npu adds `torch.distributed.is_hccl_available`, which multi-rank code asks before choosing hccl."""
    return True


def install() -> None:
    """Register the "hccl" backend for npu (once per process, at activation). `import torch` has imported
    torch.distributed before its device backends load, so this adds no import; the c10d kernels are replaced
    only when a first hccl group is created."""
    global _INSTALLED
    if _INSTALLED:
        return
    import torch.distributed as dist

    if not dist.is_available():
        return
    if BACKEND.upper() not in dist.Backend._plugins:
        dist.Backend.register_backend(BACKEND, create_backend, extended_api=True, devices=["npu"])
    if not hasattr(dist, "is_hccl_available"):
        dist.is_hccl_available = is_hccl_available
    from ..interpreter.collectives import set_cpu_companion

    set_cpu_companion(_companion_for_cpu_tensors)  # the GE interpreter's Hcom kernels run on CPU views
    _INSTALLED = True


def _companion_for_cpu_tensors(group):
    """For the GE interpreter's Hcom kernels: an hccl group's CPU companion, any other group itself."""
    if torch.device("npu") in getattr(group, "_device_types", ()) and torch.device("cpu") not in group._device_types:
        return cpu_group(group, "a GE graph's collective")
    return group


def create_backend(options, backend_options=None):
    """c10d's creator for an hccl group: a gloo backend over the group's store, with the user's timeout (so a
    missing peer fails after it, as an HCCL timeout would). `backend_options` (torch_npu's
    ProcessGroupHCCL.Options on hardware) has nothing gloo could use and is ignored."""
    del backend_options
    from torch.distributed import ProcessGroupGloo, is_gloo_available

    if not is_gloo_available():
        raise RuntimeError(f"{PREFIX}: init_process_group('hccl') runs on gloo, and this torch has no gloo "
                           f"(torch.distributed.is_gloo_available() is False): use a torch build with gloo")
    _install_kernels()
    if not hasattr(ProcessGroupGloo, "get_hccl_comm_name"):
        ProcessGroupGloo.get_hccl_comm_name = hccl_comm_name
    gloo = ProcessGroupGloo(options.store, options.group_rank, options.group_size, options.timeout)
    gloo.options.global_ranks_in_group = list(options.global_ranks_in_group)
    gloo.options.group_name = options.group_id
    return gloo


def hccl_comm_name(backend, rank: int, init_comm: bool = True) -> str:
    """torch_npu's `ProcessGroupHCCL.get_hccl_comm_name(rank, init_comm)`, set on the gloo class by the first
    hccl group: TorchAir asks it of every hccl group's npu backend whenever it builds a GE graph
    (`hcom_utils.record_pg_to_graph`), so without it any npugraph compile fails once an hccl group exists. The
    answer is the name TorchAir gives a gloo group on a CPU host, `tag=<pg tag>;rank_list=<ranks>`, which the
    simulator's Hcom kernels resolve back to the group; "" for a backend of no live group."""
    from torch.distributed import distributed_c10d as c10d

    del rank, init_comm
    for group in c10d._world.pg_map:
        if group.group_name == backend.options.group_name:
            ranks = ",".join(str(r) for r in c10d.get_process_group_ranks(group))
            return f"tag={c10d._get_group_tag(group)};rank_list={ranks}"
    return ""


def _install_kernels() -> None:
    """Replace the PrivateUse1 kernel of every c10d op taking a process group with `_run_on_gloo` (once).
    Replacing c10d's own kernels makes the dispatcher warn once; that warning is expected and silenced."""
    global _KERNELS
    if _KERNELS is not None:
        return
    library = torch.library.Library("c10d", "IMPL")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name in _c10d_ops():
            library.impl(name, functools.partial(_run_on_gloo, getattr(torch.ops.c10d, name).default),
                         "PrivateUse1")
    _KERNELS = library


def _c10d_ops() -> list[str]:
    """The c10d ops that take a process group (every collective, barrier, send and recv), read from the
    dispatcher so that an op a later torch adds is covered too."""
    names = [full.split("::", 1)[1] for full in torch._C._dispatch_get_all_op_names() if full.startswith("c10d::")]
    return sorted(name for name in names if any(
        str(argument.type).endswith("ProcessGroup")
        for argument in getattr(torch.ops.c10d, name).default._schema.arguments))


def _call_name(op) -> str:
    name = op._schema.name.split("::", 1)[1]
    return f"{_CALLS.get(name, 'torch.ops.c10d.' + name)} (c10d::{name})"


def _npu_tensors(call: str, args) -> list[torch.Tensor]:
    """The npu tensors of a collective; refuses tensors on two devices (HCCL reads one device's memory)."""
    tensors = [leaf for leaf in tree_flatten(args)[0] if isinstance(leaf, torch.Tensor)]
    devices = sorted({str(tensor.device) for tensor in tensors})
    if len(devices) > 1:
        raise RuntimeError(f"{PREFIX}: {call} got tensors on {' and '.join(devices)}: every tensor of an hccl "
                           f"collective must be on this rank's npu device; move them with tensor.to('npu:<rank>')")
    return [tensor for tensor in tensors if tensor.device.type == "npu"]


def cpu_group(group, call: str = "a collective"):
    """The CPU-only process group holding `group`'s npu backend (its gloo): c10d's CPU kernels run hccl's
    collectives on it. Public for code that holds CPU views of npu tensors for an hccl group (the GE
    interpreter's Hcom kernels). Cached per group, weakly: a destroyed group takes its companion along."""
    from torch.distributed import ProcessGroup

    companion = _COMPANIONS.get(group)
    if companion is None:
        try:
            backend = group._get_backend(torch.device("npu"))
        except RuntimeError:
            raise RuntimeError(
                f"{PREFIX}: {call} got npu tensors on a process group without an npu backend: create the group "
                f"with backend 'hccl' (init_process_group('hccl'), new_group(backend='hccl')) or "
                f"'cpu:gloo,npu:hccl'") from None
        companion = ProcessGroup(group.rank(), group.size())
        companion._register_backend(torch.device("cpu"), ProcessGroup.BackendType.CUSTOM, backend)
        _COMPANIONS[group] = companion
    return companion


def cpu_alias(tensor: torch.Tensor) -> torch.Tensor:
    """A CPU tensor over an npu tensor's own memory (no copy): what gloo reads and writes."""
    from .native import load_native

    return load_native().cpu_alias(tensor)


def _check_reduce_op(call: str, boxed) -> None:
    """Refuse PREMUL_SUM here: gloo refuses it only when the work is waited on, in a message naming neither the
    call nor hccl."""
    from torch.distributed import ReduceOp

    if boxed.op() == ReduceOp.RedOpType.PREMUL_SUM.value:
        raise ValueError(f"{PREFIX}: {call} with ReduceOp.PREMUL_SUM: gloo, which runs hccl's collectives here, has "
                         f"no PREMUL_SUM; multiply the tensor by the factor first and use ReduceOp.SUM")


def _run_on_gloo(op, *args, **kwargs):
    """The PrivateUse1 kernel of c10d op `op`: the op again with npu tensors as their CPU aliases and the group as
    its CPU companion, so c10d's CPU kernel runs it on gloo; returned tensors are npu views of the same memory."""
    call = _call_name(op)
    npu = _npu_tensors(call, (args, kwargs))

    def to_host(value):
        if isinstance(value, torch.Tensor) and value.device.type == "npu":
            return cpu_alias(value)
        if isinstance(value, torch.ScriptObject) and value._type().qualified_name() == _PROCESS_GROUP:
            return cpu_group(torch.distributed.ProcessGroup.unbox(value), call).boxed()
        if isinstance(value, torch.ScriptObject) and value._type().qualified_name() == _REDUCE_OP:
            _check_reduce_op(call, value)
        return value

    host_args, host_kwargs = tree_map(to_host, (args, kwargs))
    host_args = _flat_layout(op, host_args)
    unequal, adapted = _UNEQUAL.get(op._schema.name, (None, None))
    run = adapted if unequal is not None and unequal(host_args) else op
    try:
        result = run(*host_args, **host_kwargs)
    except (RuntimeError, ValueError) as error:
        raise _named(error, f"{PREFIX}: {call} runs on gloo over host memory, which refused it: {error}") from error
    return _back_to_npu(result, npu)


# c10d op -> (index of the per-rank-stacked tensor, index of the one-rank tensor) in its arguments
_STACKABLE = {"c10d::_allgather_base_": (0, 1), "c10d::_reduce_scatter_base_": (1, 0)}


def _flat_layout(op, host_args: tuple) -> tuple:
    """all_gather_into_tensor's output and reduce_scatter_tensor's input hold one block per rank, in any shape: stacked
    ([world, *shape]), concatenated ([world * shape[0], *shape[1:]]) or another of the same size; HCCL and NCCL read
    the bytes, gloo takes the concatenated shape only (`invalid tensor size at index 0`). A contiguous tensor of
    another shape goes to gloo as its concatenated view, the same memory."""
    where = _STACKABLE.get(op._schema.name)
    if where is None:
        return host_args
    big, small = host_args[where[0]], host_args[where[1]]
    if small.dim() == 0 or small.numel() == 0 or not big.is_contiguous() or big.numel() % small.numel():
        return host_args
    blocks = big.numel() // small.numel()
    concatenated = (blocks * small.shape[0], *small.shape[1:])
    if tuple(big.shape) == concatenated:
        return host_args
    flat = list(host_args)
    flat[where[0]] = big.view(concatenated)
    return tuple(flat)


# Collectives whose tensors may differ in size per peer on HCCL (AllToAllV, AllGatherV), where gloo takes one
# size (`invalid tensor size at index 1`): c10d op -> (whether a call's host args differ, how to run it on gloo).
def _unequal_alltoall(host_args: tuple) -> bool:
    return len(host_args) >= 2 and len({tuple(t.shape) for t in [*host_args[0], *host_args[1]]}) > 1


def _unequal_allgather(host_args: tuple) -> bool:
    if len(host_args) < 2 or len(host_args[0]) != 1 or len(host_args[1]) != 1:
        return False
    return len({tuple(t.shape) for t in [*host_args[0][0], host_args[1][0]]}) > 1


def _alltoall_by_splits(output_tensors, input_tensors, process_group, async_op=True, timeout=-1):
    """c10d::alltoall_ with unequal sizes, as gloo's all_to_all_single with split sizes: the inputs flattened and
    concatenated, each peer's share its element count, the received bytes copied into the outputs."""
    flat_in = torch.cat([t.reshape(-1) for t in input_tensors])
    flat_out = flat_in.new_empty(sum(t.numel() for t in output_tensors))
    work = torch.ops.c10d.alltoall_base_(flat_out, flat_in, process_group, [t.numel() for t in output_tensors],
                                         [t.numel() for t in input_tensors], True, timeout)
    work.wait()  # the copies below need the data; the work returned is complete
    start = 0
    for target in output_tensors:
        target.copy_(flat_out[start:start + target.numel()].view(target.shape))
        start += target.numel()
    return output_tensors, work


def _allgather_by_padding(output_tensors, input_tensors, process_group, async_op=True, timeout=-1):
    """c10d::allgather_ (dist.all_gather) with peers' tensors of different shapes or sizes (HCCL reads the bytes):
    each input flattened and padded to the largest peer's element count, gathered at one size, each peer's elements
    copied into its output."""
    (outputs,), (mine,) = output_tensors, input_tensors
    rank = torch.distributed.ProcessGroup.unbox(process_group).rank()
    if outputs[rank].numel() != mine.numel() or any(t.dtype != mine.dtype for t in outputs):
        raise ValueError(f"this rank's input ({mine.dtype}, {mine.numel()} elements) must match its output "
                         f"({outputs[rank].dtype}, {outputs[rank].numel()} elements), and every output its dtype")
    widest = max(t.numel() for t in outputs)
    padded = mine.new_zeros(widest)
    padded[:mine.numel()] = mine.reshape(-1)
    gathered = mine.new_empty(widest * len(outputs))
    work = torch.ops.c10d._allgather_base_(gathered, padded, process_group, True, timeout)[1]
    work.wait()  # the copies below need the data; the work returned is complete
    for peer, target in enumerate(outputs):
        target.copy_(gathered[peer * widest:peer * widest + target.numel()].view(target.shape))
    return output_tensors, work


_UNEQUAL = {"c10d::alltoall_": (_unequal_alltoall, _alltoall_by_splits),
            "c10d::allgather_": (_unequal_allgather, _allgather_by_padding)}


def _named(error: Exception, message: str) -> Exception:
    """`error` again with `message`, of the same type where it takes a message (DistBackendError does), so code
    catching torch.distributed's error types still catches it."""
    try:
        return type(error)(message)
    except TypeError:
        return RuntimeError(message)


def _back_to_npu(result, npu: list[torch.Tensor]):
    from .native import load_native

    native = load_native()
    device = npu[0].device.index if npu else native.current_device()

    def back(value):
        if isinstance(value, torch.Tensor) and value.device.type == "cpu":
            return native.to_npu(value, npu, device)
        return value

    return tree_map(back, result)

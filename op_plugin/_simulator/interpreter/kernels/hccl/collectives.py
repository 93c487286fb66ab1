"""Collective GE ops (CANN's hccl: ``hcom_ops.h``) run over torch.distributed (gloo on a CPU host).

HcomAllReduce (sum, prod, max, min), HcomAllGather, HcomReduceScatter, HcomBroadcast, HcomAllToAllV,
HcomAllToAll, HcomAllGatherV, HcomReduceScatterV, HcomSend and HcomReceive, each bound to its REG_OP
prototype. The `group` attr is resolved to a process group of this process (`..collectives`: TorchAir
names a gloo group ``tag=<pg tag>;rank_list=<ranks>`` on a CPU host; a graph built for HCCL is
refused); ranks in attrs (root_rank, dest_rank, src_rank) are ranks within that group, as HCCL's are
(TorchAir writes `_canonicalize_group_rank`'s group rank). Every gloo call is bounded by
$OP_PLUGIN_COLLECTIVE_TIMEOUT, and a failure says after how long it failed (measured) and which peers
have ended. The executor never folds these nodes, and on every call it has the ranks of each group agree
on them before they run (`..collectives.agree`).

Counts and displacements are in elements, as CANN's prototypes document, and a displacement input
left empty means the packed layout (prefix sums of the counts). HCCL's graph-mode launch kernels
(hicann/hccl ``hcom_launch_kernel.cc``) read AllGatherV's `recv_counts` and ReduceScatterV's
`send_counts` in rows of the tensor instead (they scale them by the elements per row), and TorchAir's
uneven all-gather / reduce-scatter converters write row counts; so those two kernels take the counts
in rows when the count of this rank's own piece (AllGatherV's `send_count`, ReduceScatterV's
`recv_count`) equals its row count rather than its element count. For a 1-D tensor both read alike.

Output shapes: AllGather stacks along dim 0 and ReduceScatter splits dim 0 (CANN's infershape). The
variable-size outputs (AllToAllV, AllGatherV, ReduceScatterV), which CANN's infershape gives as 1-D,
keep the trailing dims of the input when their element count allows, as the FX node TorchAir lowers
them from declares (its Meta function: dim 0 from the counts, the rest from the input).

Numerics: a reduction is gloo's, in the tensor's own dtype, as eager torch.distributed over gloo
computes it; HCCL's reduction order for fp16/bf16 on NPUs is not reproduced (docs/distributed.md).
"""
from __future__ import annotations

import math
import time

import torch
from torch.distributed import distributed_c10d as c10d
from ....._ge.values import ge_dtype_to_torch
from ...collectives import for_cpu_tensors, peers_ended, process_group, timeout
from ...registry import ge_kernel, refuse

_FUSION = {"fusion": "fuses several collectives into one buffer: a schedule, not a value",
           "fusion_id": "names the fusion bucket: a schedule, not a value"}
# HCCL's reductions (HcclReduceOp: sum, prod, max, min); the graph names them in lower case.
_REDUCTIONS = {"sum": c10d.ReduceOp.SUM, "prod": c10d.ReduceOp.PRODUCT, "max": c10d.ReduceOp.MAX,
               "min": c10d.ReduceOp.MIN}


def _options(kind):
    opts = kind()
    opts.timeout = timeout()
    return opts


def _wait(issue, what: str, group: str, p2p: bool = False) -> None:
    """Run `issue()` (a gloo call, which returns its work) and wait for it; a failure names the collective, the
    group, the time it took (measured) and the peers known to have ended."""
    start = time.monotonic()
    try:
        work = issue()
        if p2p:
            work.wait(timeout())
        else:
            work.wait()
    except RuntimeError as error:  # gloo's timeout, a peer gone, or gloo refusing: say which, and after how long
        elapsed = time.monotonic() - start
        limit = timeout().total_seconds()
        ended = peers_ended(group)
        if ended:
            why = "; ".join(f"rank {r} has ended ({how})" for r, how in sorted(ended.items()))
        elif elapsed >= 0.9 * limit:
            why = (f"it did not complete within {limit:g} s: " + ("the peer did not post the matching receive/send"
                   if p2p else "another rank did not run it") + ", or is stuck")
        else:
            why = "another rank failed or left the group"
        refuse(f"{what} on group {group!r} failed after {elapsed:.1f} s: {why} (gloo: {_first_line(error)})")


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def _reduce_op(reduction: str):
    op = _REDUCTIONS.get(reduction)
    if op is None:
        refuse(f"reduction {reduction!r} is not one of HCCL's {sorted(_REDUCTIONS)}")
    return op


def _check_no_complex(x, name="x"):
    if x.is_complex():
        refuse(f"{name} is {x.dtype}: HCCL has no complex data type")


def _group(group: str, rank_size: int | None = None):
    """The group named `group`, as the kernels' CPU tensors are handed to it (`for_cpu_tensors`)."""
    pg = process_group(group)
    if rank_size is not None and rank_size != pg.size():
        refuse(f"rank_size {rank_size} but group {group!r} has {pg.size()} ranks")
    return for_cpu_tensors(pg)


def _group_rank(pg, rank: int, name: str, group: str) -> int:
    if not 0 <= rank < pg.size():
        refuse(f"{name} {rank} is not a rank of group {group!r} (group ranks 0..{pg.size() - 1})")
    return rank


def _row(x: torch.Tensor) -> int:
    """Elements per dim-0 row of x (1 for a 0-d or 1-D tensor)."""
    return math.prod(x.shape[1:]) if x.dim() >= 1 else 1


def _keep_trailing(flat: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """A 1-D result laid out with `like`'s trailing dims when its size allows (see the module doc)."""
    row = _row(like)
    if like.dim() >= 2 and row > 0 and flat.numel() % row == 0:
        return flat.reshape(-1, *like.shape[1:])
    return flat


def _counts(tensor, name: str, size: int) -> list[int]:
    values = [int(v) for v in tensor.reshape(-1).tolist()]
    if len(values) != size:
        refuse(f"{name} has {len(values)} entries; the group has {size} ranks")
    if any(v < 0 for v in values):
        refuse(f"{name} {values} has a negative count")
    return values


def _displacements(tensor, name: str, counts: list[int], unit: int = 1) -> list[int]:
    """The displacements input in elements, or the packed layout when it is absent or empty."""
    if tensor is None or tensor.numel() == 0:
        return [sum(counts[:i]) for i in range(len(counts))]
    values = _counts(tensor, name, len(counts))
    return [v * unit for v in values]


def _gather_pieces(flat: torch.Tensor, counts: list[int], displs: list[int], what: str) -> torch.Tensor:
    """The pieces flat[displs[i]:displs[i]+counts[i]], one after another."""
    if any(d + c > flat.numel() for c, d in zip(counts, displs, strict=True)):
        refuse(f"{what}: counts {counts} at displacements {displs} reach past the {flat.numel()} elements")
    packed = [sum(counts[:i]) for i in range(len(counts))]
    if displs == packed and sum(counts) == flat.numel():
        return flat
    return torch.cat([flat[d:d + c] for c, d in zip(counts, displs, strict=True)]) if counts else flat[:0]


def _place_pieces(packed: torch.Tensor, counts: list[int], displs: list[int]) -> torch.Tensor:
    """The pieces of `packed` (one after another) placed at `displs` of a buffer just large enough."""
    total = max((d + c for c, d in zip(counts, displs, strict=True)), default=0)
    if displs == [sum(counts[:i]) for i in range(len(counts))] and total == packed.numel():
        return packed
    out = packed.new_zeros(total)
    start = 0
    for c, d in zip(counts, displs, strict=True):
        out[d:d + c] = packed[start:start + c]
        start += c
    return out


# ---- reductions and gathers over a whole group -------------------------------------------------------

@ge_kernel("HcomAllReduce", layout_only=_FUSION)
def hcom_all_reduce(x, *, reduction, group):
    """y = x reduced elementwise over the ranks of `group` (every rank gets the result)."""
    op = _reduce_op(reduction)
    _check_no_complex(x)
    pg = _group(group)
    y = x.contiguous().clone()
    opts = _options(c10d.AllreduceOptions)
    opts.reduceOp = op
    _wait(lambda: pg.allreduce([y], opts), f"HcomAllReduce({reduction})", group)
    return y


@ge_kernel("HcomAllGather", layout_only=_FUSION)
def hcom_all_gather(x, *, rank_size, group):
    """y = the x of every rank of `group`, in group-rank order, stacked along dim 0."""
    pg = _group(group, rank_size)
    if x.dim() == 0:
        refuse("x is 0-d; HcomAllGather stacks along dim 0")
    y = x.new_empty((rank_size * x.shape[0], *x.shape[1:]))
    _wait(lambda: pg._allgather_base(y, x.contiguous(), _options(c10d.AllgatherOptions)),
          "HcomAllGather", group)
    return y


@ge_kernel("HcomReduceScatter", layout_only=_FUSION)
def hcom_reduce_scatter(x, *, reduction, group, rank_size):
    """x reduced over the ranks of `group`, split in rank_size pieces along dim 0; group rank r gets piece r."""
    op = _reduce_op(reduction)
    _check_no_complex(x)
    pg = _group(group, rank_size)
    if x.dim() == 0 or x.shape[0] % rank_size:
        refuse(f"dim 0 of x {list(x.shape)} does not split in {rank_size} equal pieces")
    y = x.new_empty((x.shape[0] // rank_size, *x.shape[1:]))
    opts = _options(c10d.ReduceScatterOptions)
    opts.reduceOp = op
    _wait(lambda: pg._reduce_scatter_base(y, x.contiguous(), opts),
          f"HcomReduceScatter({reduction})", group)
    return y


@ge_kernel("HcomBroadcast", layout_only=_FUSION)
def hcom_broadcast(x, *, root_rank, group):
    """Each y[i] = x[i] of group rank `root_rank`."""
    pg = _group(group)
    _group_rank(pg, root_rank, "root_rank", group)
    outputs = []
    for tensor in x:
        y = tensor.contiguous().clone()
        opts = _options(c10d.BroadcastOptions)
        opts.rootRank = root_rank
        opts.rootTensor = 0
        _wait(lambda y=y, opts=opts: pg.broadcast([y], opts), "HcomBroadcast", group)
        outputs.append(y)
    return tuple(outputs)


# ---- all-to-all ----------------------------------------------------------------------------------------

@ge_kernel("HcomAllToAllV")
def hcom_all_to_all_v(send_data, send_counts, send_displacements, recv_counts, recv_displacements, *, group):
    """Group rank j gets send_counts[j] elements of send_data from send_displacements[j]; the
    recv_counts[i] elements from group rank i land at recv_displacements[i] (counts in elements)."""
    pg = _group(group)
    size = pg.size()
    sends = _counts(send_counts, "send_counts", size)
    recvs = _counts(recv_counts, "recv_counts", size)
    sdispls = _counts(send_displacements, "send_displacements", size)
    rdispls = _counts(recv_displacements, "recv_displacements", size)
    flat = send_data.contiguous().reshape(-1)
    packed_in = _gather_pieces(flat, sends, sdispls, "send_data").contiguous()
    packed_out = flat.new_empty(sum(recvs))
    _wait(lambda: pg.alltoall_base(packed_out, packed_in, recvs, sends, _options(c10d.AllToAllOptions)),
          "HcomAllToAllV", group)
    return _keep_trailing(_place_pieces(packed_out, recvs, rdispls), send_data)


@ge_kernel("HcomAllToAll")
def hcom_all_to_all(x, *, group):
    """x's elements split in equal pieces, one per group rank; y holds piece `rank` of every rank, in
    group-rank order (y has x's shape)."""
    pg = _group(group)
    if x.numel() % pg.size():
        refuse(f"x has {x.numel()} elements, which do not split in {pg.size()} equal pieces")
    flat = x.contiguous().reshape(-1)
    out = flat.new_empty(flat.numel())
    _wait(lambda: pg.alltoall_base(out, flat, [], [], _options(c10d.AllToAllOptions)), "HcomAllToAll", group)
    return out.reshape(x.shape)


# ---- variable-size gathers and scatters ---------------------------------------------------------------

def _unit(x: torch.Tensor, own_count: int, name: str) -> int:
    """1 if `own_count` (this rank's piece) counts x's elements, the row size if it counts rows."""
    if own_count == x.numel():
        return 1
    if x.dim() >= 1 and own_count == x.shape[0]:
        return _row(x)
    refuse(f"{name} {own_count} is neither the element count ({x.numel()}) nor the row count of x {list(x.shape)}")
    return 1  # unreachable


def _scalar(tensor, name: str) -> int:
    if tensor.numel() != 1:
        refuse(f"{name} must hold one count, got {tensor.numel()}")
    return int(tensor.reshape(-1)[0])


@ge_kernel("HcomAllGatherV")
def hcom_all_gather_v(x, send_count, recv_counts, recv_displacements, *, group):
    """Every group rank i contributes recv_counts[i] elements (its x), placed at recv_displacements[i]
    (packed when the input is absent or empty)."""
    pg = _group(group)
    unit = _unit(x, _scalar(send_count, "send_count"), "send_count")
    counts = [c * unit for c in _counts(recv_counts, "recv_counts", pg.size())]
    displs = _displacements(recv_displacements, "recv_displacements", counts, unit)
    if counts[pg.rank()] != x.numel():
        refuse(f"recv_counts gives this rank (group rank {pg.rank()}) {counts[pg.rank()]} elements but x has "
               f"{x.numel()}")
    # gloo has no all-gather-v: gather equal pieces padded to the largest, then unpad.
    widest = max(counts, default=0)
    padded = x.new_zeros(widest)
    padded[:x.numel()] = x.contiguous().reshape(-1)
    gathered = x.new_empty(widest * pg.size())
    _wait(lambda: pg._allgather_base(gathered, padded, _options(c10d.AllgatherOptions)),
          "HcomAllGatherV", group)
    packed = torch.cat([gathered[r * widest:r * widest + c] for r, c in enumerate(counts)])
    return _keep_trailing(_place_pieces(packed, counts, displs), x)


@ge_kernel("HcomReduceScatterV")
def hcom_reduce_scatter_v(x, recv_count, send_counts, send_displacements, *, reduction, group):
    """x reduced over the ranks of `group`; group rank r gets the send_counts[r] elements at
    send_displacements[r] (packed when the input is absent or empty)."""
    op = _reduce_op(reduction)
    _check_no_complex(x)
    pg = _group(group)
    rows = _counts(send_counts, "send_counts", pg.size())
    own = _scalar(recv_count, "recv_count")
    unit = _row(x) if x.dim() >= 1 and sum(rows) == x.shape[0] and _row(x) > 1 else 1
    counts = [c * unit for c in rows]
    if own not in (counts[pg.rank()], rows[pg.rank()]):
        refuse(f"recv_count {own} is not this rank's piece of send_counts ({rows[pg.rank()]})")
    displs = _displacements(send_displacements, "send_displacements", counts, unit)
    # gloo has no reduce-scatter-v: reduce the pieces (one after another) over the group, keep this rank's.
    packed = _gather_pieces(x.contiguous().reshape(-1), counts, displs, "x").clone()
    opts = _options(c10d.AllreduceOptions)
    opts.reduceOp = op
    _wait(lambda: pg.allreduce([packed], opts), f"HcomReduceScatterV({reduction})", group)
    start = sum(counts[:pg.rank()])
    return _keep_trailing(packed[start:start + counts[pg.rank()]].clone(), x)


# ---- point to point ------------------------------------------------------------------------------------

# HcomSend sends a header with the shape first, as HCCL's graph kernel does (HcomSendKernel); the
# receiver checks it against its own shape and dtype attrs.
_MAX_DIMS = 8
_HEADER = 2 + _MAX_DIMS  # dtype code, rank, dims
_DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int8, torch.uint8, torch.int16,
           torch.int32, torch.int64, torch.bool, torch.uint16, torch.uint32, torch.uint64)


def _dtype_code(dtype: torch.dtype) -> int:
    if dtype not in _DTYPES:
        refuse(f"HCCL sends no {dtype}")
    return _DTYPES.index(dtype)


def _p2p_wait(issue, what: str, group: str) -> None:
    _wait(issue, what, group, p2p=True)


@ge_kernel("HcomSend")
def hcom_send(x, *, group, sr_tag, dest_rank):
    """Send x to group rank `dest_rank` (tag `sr_tag`): a shape header, then the data."""
    pg = _group(group)
    _group_rank(pg, dest_rank, "dest_rank", group)
    if dest_rank == pg.rank():
        refuse(f"dest_rank {dest_rank} is this rank")
    if x.dim() > _MAX_DIMS:
        refuse(f"x has {x.dim()} dims; at most {_MAX_DIMS} are sent")
    header = torch.zeros(_HEADER, dtype=torch.int64)
    header[0], header[1] = _dtype_code(x.dtype), x.dim()
    header[2:2 + x.dim()] = torch.tensor(list(x.shape), dtype=torch.int64)
    _p2p_wait(lambda: pg.send([header], dest_rank, sr_tag), f"HcomSend to group rank {dest_rank}", group)
    _p2p_wait(lambda: pg.send([x.contiguous()], dest_rank, sr_tag), f"HcomSend to group rank {dest_rank}", group)
    return ()


@ge_kernel("HcomReceive")
def hcom_receive(*, group, sr_tag, src_rank, shape, dtype):
    """Receive the tensor group rank `src_rank` sends with tag `sr_tag`; it must have `shape` (a -1
    dim takes any size) and `dtype` (a GE dtype number)."""
    pg = _group(group)
    _group_rank(pg, src_rank, "src_rank", group)
    expected = ge_dtype_to_torch(dtype, where="dtype: ")
    header = torch.empty(_HEADER, dtype=torch.int64)
    _p2p_wait(lambda: pg.recv([header], src_rank, sr_tag), f"HcomReceive from group rank {src_rank}", group)
    code, rank = int(header[0]), int(header[1])
    sent_shape = [int(d) for d in header[2:2 + rank].tolist()]
    sent_dtype = _DTYPES[code] if 0 <= code < len(_DTYPES) else None
    fits = len(sent_shape) == len(shape) and all(e in (-1, s) for e, s in zip(shape, sent_shape, strict=True))
    if sent_dtype != expected or not fits:
        refuse(f"group rank {src_rank} sends {sent_dtype} {sent_shape} but this node receives {expected} "
               f"{list(shape)}")
    y = torch.empty(sent_shape, dtype=expected)
    _p2p_wait(lambda: pg.recv([y], src_rank, sr_tag), f"HcomReceive from group rank {src_rank}", group)
    return y

"""Scatter writes (CANN ops-nn ``index/``): ScatterNdUpdate, ScatterList, QuantUpdateScatter.

ScatterNdUpdate (what TorchAir lowers torch_npu's npu_scatter_nd_update(_) to: a
TensorMove copy + ScatterNdUpdate for the functional form, ScatterNdUpdate on the input itself for the
in-place form).

Written from CANN's definition (REG_OP ScatterNdUpdate in TorchAir's op table: var, indices
(IndexNumberType), updates -> var, attr use_locking; the TensorFlow-style scatter_nd_update it
follows): with ``k = indices.shape[-1]``, each row ``indices[j]`` addresses the slice
``var[indices[j][0], ..., indices[j][k-1]]``, which becomes ``updates[j]``; ``updates`` has shape
``indices.shape[:-1] + var.shape[k:]``. Undocumented there and refused here: an index outside
``[0, dim)`` (no wrap-around is defined) and an index addressed twice (which write wins is not
defined); ``use_locking`` does not change a single-stream result.

ScatterList (CANN ops-nn ``index/scatter_list``, README and golden): each tensor of the var list gets a window of
its list entry of updates along ``axis``.

For each i whose mask[i] is not 0 (all without mask): var[i][..., start:start + n, ...] = updates[i][..., :n, ...]
along the var axis (``axis`` counts on updates, which has one more leading dim), start = indice[i] and n the
updates' axis size for a 1-D indice, [start, n] rows of a 2-D one (n capped at that size). Refused: an indice
that is not [len(var)] or [len(var), 2], a var tensor without exactly one dim fewer than updates, windows outside
the var axis (the README: out-of-range indices are not supported; the kernel's flat-offset writes then
land in a neighbouring row, which is not a contract) and a reduce other than "update".

QuantUpdateScatter (CANN ops-nn ``index/quant_update_scatter``): quantise ``updates`` along its last
axis, then write it into slices of ``var`` along ``axis``; what TorchAir lowers torch_npu's
npu_quant_scatter(_) to (``ge_converter/custom/npu_quant_scatter.py``).

From CANN's README, aclnnInplaceQuantScatter(V2).md and the op's golden (``tests/assets/golden.py``):

* ``q = updates / quant_scales (+ quant_zero_points)`` in float32, the scales and zero points one per
  element of updates' last axis (quant_axis must be that axis); int8 var: rounded half to even and
  saturated to [-128, 127] (round_mode "rint"; the golden's np.round + clip: the arch35 kernel's int8 casts
  are NO_SAT, and what its hardware then does past int8's range is not documented); float8_e4m3fn /
  float8_e5m2 var: the arch35 kernel's SAT + CAST_RINT cast with saturating overflow mode
  (``quant_update_scatter_base.h``): half to even, past the largest value (and inf) the largest, NaN 0 (the
  golden's ml_dtypes cast would give NaN / inf there; the kernel is what runs); hifloat8 (round modes
  "round" / "hybrid") has no CPU dtype and is refused.
* 1-D indices (B,): ``var[i, ..., idx[i] : idx[i] + U, ...] = q[i]`` with U = updates.shape[axis], for each
  i < B = updates.shape[0]; 2-D indices (B, 2): ``var[idx[i][0], ..., idx[i][1] : idx[i][1] + U, ...] = q[i]``.
  axis may be neither updates' first nor its last dim; the other dims of updates equal var's.
* CANN neither supports nor checks an index out of range, and writes overlapping slices in a
  nondeterministic order: a negative index, a slice past var's end and overlapping slices are refused
  here. The doc's half-open bound [0, var.shape(axis) - U) would exclude the last slice that fits; the
  golden writes it, and so does this kernel.
* reduce "update" only (the only mode CANN documents).
* dtypes: CANN's combinations only (op_host/quant_update_scatter_def.cpp, aclnnInplaceQuantScatter's table for A2,
  A3 and Ascend 950): bfloat16 updates with bfloat16 quant_scales (and bfloat16 zero points), or float16 updates
  with float32 quant_scales (and int32 zero points). TorchAir's REG_OP lists each input's dtypes alone (float32
  updates, int8/uint8 zero points, any scale with any update): combinations CANN has no kernel for are refused,
  on both paths.
"""
from __future__ import annotations

import torch
from ...registry import ge_kernel, refuse
from ..common import opmath
from ..common import require_dtype
from ...lowbit_formats import fp8_saturating_rint


@ge_kernel("ScatterNdUpdate")
def scatter_nd_update(var, indices, updates, *, use_locking):
    """var with var[indices[j]] = updates[j] for each index tuple (the last dim of indices); an index
    outside var or given twice is refused (CANN defines neither)."""
    del use_locking
    if indices.dtype not in (torch.int32, torch.int64):
        refuse(f"indices have dtype {indices.dtype}; ScatterNdUpdate takes int32 or int64")
    if indices.dim() == 0:
        refuse("indices must have at least one dim (the last holds the index tuples)")
    k = indices.shape[-1]
    if k > var.dim():
        refuse(f"index tuples of length {k} address a {var.dim()}-D var")
    rows = indices.reshape(-1, k).long()
    want = tuple(indices.shape[:-1]) + tuple(var.shape[k:])
    if tuple(updates.shape) != want:
        refuse(f"updates have shape {tuple(updates.shape)}; indices {tuple(indices.shape)} and var "
               f"{tuple(var.shape)} need {want}")
    if updates.dtype != var.dtype:
        refuse(f"updates have dtype {updates.dtype}, var {var.dtype}: ScatterNdUpdate takes one dtype")
    bounds = torch.tensor(var.shape[:k], dtype=torch.long)
    if rows.numel() and bool(((rows < 0) | (rows >= bounds)).any()):
        refuse(f"an index is outside var's shape {tuple(var.shape[:k])} (CANN defines no wrap-around or clamp)")
    if rows.shape[0] != torch.unique(rows, dim=0).shape[0] if rows.numel() else False:
        refuse("an index tuple appears twice: which update wins is not defined by CANN")
    out = var.clone()
    if rows.shape[0]:
        out[tuple(rows.t())] = updates.reshape(rows.shape[0], *var.shape[k:])
    return out


@ge_kernel("ScatterList")
def scatter_list(var, indice, updates, mask, *, reduce, axis):
    if reduce != "update":
        refuse(f"reduce={reduce!r}: CANN documents 'update' only")
    up_axis = axis + updates.dim() if axis < 0 else axis
    if not 1 <= up_axis < updates.dim() or updates.shape[0] != len(var):
        refuse(f"updates {list(updates.shape)} must lead with {len(var)} entries and have axis {axis} after that")
    if indice.dim() not in (1, 2) or indice.shape[0] != len(var) or (indice.dim() == 2 and indice.shape[1] != 2):
        refuse(f"indice {list(indice.shape)} must be [{len(var)}] or [{len(var)}, 2]")
    for i, tensor in enumerate(var):
        if tensor.dim() != updates.dim() - 1:
            refuse(f"var[{i}] {list(tensor.shape)} must have one dim fewer than updates {list(updates.shape)}")
    width = updates.shape[up_axis]
    out = []
    for i, tensor in enumerate(var):
        tensor = tensor.clone()
        out.append(tensor)
        if mask is not None and int(mask.reshape(-1)[i]) == 0:
            continue
        if indice.dim() == 2:
            start, rows = int(indice[i, 0]), min(int(indice[i, 1]), width)
        else:
            start, rows = int(indice[i]), width
        if rows <= 0:
            continue
        size = tensor.shape[up_axis - 1]
        if start < 0 or start + rows > size:
            refuse(f"var[{i}]'s window [{start}, {start + rows}) leaves its axis of size {size} (out of range)")
        index = [slice(None)] * tensor.dim()
        index[up_axis - 1] = slice(start, start + rows)
        source = [slice(None)] * tensor.dim()
        source[up_axis - 1] = slice(0, rows)
        tensor[tuple(index)] = updates[i][tuple(source)]
    return tuple(out)

_VARS = (torch.int8, torch.float8_e4m3fn, torch.float8_e5m2)
_UPDATES = (torch.float16, torch.float32, torch.bfloat16)
_GE_FP8 = {torch.float8_e5m2: 35, torch.float8_e4m3fn: 36}   # GE's DT_FLOAT8_E5M2 / DT_FLOAT8_E4M3FN


def _quantised(updates, quant_scales, quant_zero_points, var_dtype, round_mode):
    width = updates.shape[-1]
    for name, tensor in (("quant_scales", quant_scales), ("quant_zero_points", quant_zero_points)):
        if tensor is not None and tensor.numel() != width:
            refuse(f"{name} has {tensor.numel()} elements; it needs one per element of updates' last axis ({width})")
    if round_mode != "rint":
        refuse(f"round_mode={round_mode!r}: int8 and float8 var take \"rint\" only (round/hybrid are hifloat8's)")
    values = opmath(updates).float() / opmath(quant_scales).float().reshape(width)
    if quant_zero_points is not None:
        values = values + opmath(quant_zero_points).float().reshape(width)
    if var_dtype == torch.int8:
        if bool(torch.isnan(values).any()):
            refuse("updates / quant_scales is NaN somewhere: its int8 value is not defined by CANN")
        return torch.round(values).clamp(-128, 127).to(torch.int8)
    return fp8_saturating_rint(values, _GE_FP8[var_dtype])


def _slices(var, indices, updates, axis):
    """(destination index tuple, batch row of updates) per update, refusing what CANN leaves undefined."""
    rows, span, extent = updates.shape[0], updates.shape[axis], var.shape[axis]
    if indices.dim() == 1 and indices.shape[0] == rows:
        starts = [(i, int(v)) for i, v in enumerate(indices.tolist())]
    elif indices.dim() == 2 and indices.shape[0] == rows and indices.shape[1] == 2:
        starts = [(int(a), int(b)) for a, b in indices.tolist()]
    else:
        refuse(f"indices {list(indices.shape)} must be ({rows},) or ({rows}, 2): one entry per row of updates")
    taken: dict[int, list[tuple[int, int]]] = {}
    for row, (batch, start) in enumerate(starts):
        if not 0 <= batch < var.shape[0] or start < 0 or start + span > extent:
            refuse(f"indices entry {row} writes var row {batch} from {start} along axis {axis} (a slice of {span}), "
                   f"outside var {list(var.shape)}; CANN neither supports nor checks out-of-range (or negative) "
                   "indices")
        for other in taken.setdefault(batch, []):
            if start < other[1] and other[0] < start + span:
                refuse(f"two slices of var row {batch} overlap along axis {axis}; CANN writes them in a "
                       "nondeterministic order")
        taken[batch].append((start, start + span))
    return starts


# updates dtype -> (quant_scales dtype, quant_zero_points dtype): CANN's kernels (quant_update_scatter_def.cpp)
_COMBINATIONS = {torch.bfloat16: (torch.bfloat16, torch.bfloat16), torch.float16: (torch.float32, torch.int32)}


def _check_combination(updates, quant_scales, quant_zero_points):
    want = _COMBINATIONS.get(updates.dtype)
    if want is None:
        refuse(f"updates has dtype {updates.dtype}; CANN takes bfloat16 or float16 (quant_update_scatter_def.cpp)")
    if quant_scales.dtype != want[0] or (quant_zero_points is not None and quant_zero_points.dtype != want[1]):
        zero_points = "" if quant_zero_points is None else f", quant_zero_points {quant_zero_points.dtype}"
        refuse(f"{updates.dtype} updates with quant_scales {quant_scales.dtype}{zero_points}: CANN's combinations are "
               "bfloat16 updates / bfloat16 quant_scales / bfloat16 zero points and float16 updates / float32 "
               "quant_scales / int32 zero points (aclnnInplaceQuantScatter)")


def quant_update_scatter_values(var, indices, updates, quant_scales, quant_zero_points, reduce, axis, quant_axis,
                                round_mode):
    """var with the quantised updates written in (a new tensor)."""
    require_dtype("var", var, _VARS)
    _check_combination(updates, quant_scales, quant_zero_points)
    if reduce != "update":
        refuse(f"reduce={reduce!r}: CANN documents only \"update\"")
    rank = updates.dim()
    if not 3 <= var.dim() <= 8 or rank != var.dim():
        refuse(f"var {list(var.shape)} and updates {list(updates.shape)} must have one rank in 3..8")
    if quant_axis not in (-1, rank - 1):
        refuse(f"quant_axis={quant_axis}: CANN quantises along updates' last axis only (-1 or {rank - 1})")
    if not (-rank + 1 <= axis < -1 or 1 <= axis < rank - 1):
        refuse(f"axis={axis}: must be in [{-rank + 1}, -1) or [1, {rank - 1}) (neither updates' first nor last dim)")
    axis %= rank
    pairs = enumerate(zip(updates.shape, var.shape, strict=True))
    if updates.shape[0] > var.shape[0] or any(u != v for d, (u, v) in pairs if d not in (0, axis)):
        refuse(f"updates {list(updates.shape)} must match var {list(var.shape)} except in dim 0 (not larger) and "
               f"along axis {axis}")
    if updates.shape[axis] > var.shape[axis]:
        refuse(f"updates is longer than var along axis {axis}")
    starts = _slices(var, indices, updates, axis)
    values = _quantised(updates, quant_scales, quant_zero_points, var.dtype, round_mode)
    out = var.clone()
    span = updates.shape[axis]
    for row, (batch, start) in enumerate(starts):
        out[batch].narrow(axis - 1, start, span).copy_(values[row])
    return out


@ge_kernel("QuantUpdateScatter", accepts={"indices": (torch.int32, torch.int64), "updates": _UPDATES,
                                          "quant_scales": (torch.float32, torch.bfloat16),
                                          "quant_zero_points": (torch.int8, torch.uint8, torch.int32, torch.bfloat16)})
def quant_update_scatter(var, indices, updates, quant_scales, quant_zero_points, *, reduce, axis, quant_axis,
                         round_mode):
    return quant_update_scatter_values(var, indices, updates, quant_scales, quant_zero_points, reduce, axis,
                                       quant_axis, round_mode)

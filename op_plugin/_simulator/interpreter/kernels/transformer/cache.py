"""KV-cache writes: ScatterNdUpdate (what TorchAir lowers torch_npu's npu_scatter_nd_update(_) to: a
TensorMove copy + ScatterNdUpdate for the functional form, ScatterNdUpdate on the input itself for the
in-place form).

Written from CANN's definition (REG_OP ScatterNdUpdate in TorchAir's op table: var, indices
(IndexNumberType), updates -> var, attr use_locking; the TensorFlow-style scatter_nd_update it
follows): with ``k = indices.shape[-1]``, each row ``indices[j]`` addresses the slice
``var[indices[j][0], ..., indices[j][k-1]]``, which becomes ``updates[j]``; ``updates`` has shape
``indices.shape[:-1] + var.shape[k:]``. Undocumented there and refused here: an index outside
``[0, dim)`` (no wrap-around is defined) and an index addressed twice (which write wins is not
defined); ``use_locking`` does not change a single-stream result.
"""
from __future__ import annotations

import torch

from ...registry import ge_kernel, refuse


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

"""ScatterList (CANN ops-nn ``index/scatter_list``, README and golden): each tensor of the var list gets a window of
its list entry of updates along ``axis``.

For each i whose mask[i] is not 0 (all without mask): var[i][..., start:start + n, ...] = updates[i][..., :n, ...]
along the var axis (``axis`` counts on updates, which has one more leading dim), start = indice[i] and n the
updates' axis size for a 1-D indice, [start, n] rows of a 2-D one (n capped at that size). Windows outside the
var axis are refused (the README: out-of-range indices are not supported; the kernel's flat-offset writes then
land in a neighbouring row, which is not a contract), as is a reduce other than "update".
"""
from __future__ import annotations

from ..registry import ge_kernel, refuse


@ge_kernel("ScatterList")
def scatter_list(var, indice, updates, mask, *, reduce, axis):
    if reduce != "update":
        refuse(f"reduce={reduce!r}: CANN documents 'update' only")
    up_axis = axis + updates.dim() if axis < 0 else axis
    if not 1 <= up_axis < updates.dim() or updates.shape[0] != len(var):
        refuse(f"updates {list(updates.shape)} must lead with {len(var)} entries and have axis {axis} after that")
    if indice.shape[0] != len(var) or indice.dim() not in (1, 2):
        refuse(f"indice {list(indice.shape)} must be [{len(var)}] or [{len(var)}, 2]")
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

"""CPU reference kernels of torch_npu's RMSNorm, rotary and SwiGLU operators (CPU dispatch key).

Semantics from each op's torch_npu documentation (the wheel's ``_op_plugin_docs.py``), computed
in float32 for 16-bit inputs and rounded once to the input dtype:

* ``npu_rms_norm(x, gamma, epsilon)``: ``rstd = 1/sqrt(mean(x^2) + epsilon)`` over the last
  ``gamma.dim()`` dims (float32, kept as size-1 dims), ``y = x * rstd * gamma``.
* ``npu_add_rms_norm(x1, x2, gamma, epsilon)``: ``x = x1 + x2`` (in the input dtype), then the
  RMS norm of ``x``; returns ``(y, rstd, x)``.
* ``npu_rotary_mul(x, r1, r2, rotary_mode, rotate)``: ``r1 * x + r2 * x_new`` with
  ``x_new = cat(-x2, x1)`` of the halves ("half"), the pairs ``(-x[1::2], x[::2])`` interleaved
  ("interleave"), ``cat(-q1, q0, -q3, q2)`` of the quarters ("quarter"), or ``x @ rotate`` when
  ``rotate`` is given; "interleave-half" first de-interleaves x (evens, then odds) and applies the half
  rotation to that (CANN RotaryPositionEmbedding's modes 2 and 3, which TorchAir lowers on Ascend 950).
* ``npu_swiglu(x, dim)``: ``A, B = chunk(x, 2, dim)``, ``A * sigmoid(A) * B``.
* ``npu_apply_rotary_pos_emb(query, key, cos, sin, layout, rotary_mode)``: query and key each
  ``x * cos + x_rotate * sin``, x_rotate by rotary_mode: "half" ``cat(-x2, x1)``, "interleave" the
  pairs ``(-x[1::2], x[::2])``, "quarter" ``cat(-q1, q0, -q3, q2)`` of the quarters; cos/sin broadcast
  over the heads (N = 1 in their shape) in any layout BSND, SBND, BNSD (4-D) or TND (3-D). On an NPU
  eager updates query and key in place and returns them (docs: "原地更新"); the schema declares no
  alias, so here the results are new tensors (TorchAir's graph copies the inputs first: the same).
  cos/sin narrower than query (Atlas 350 only) are refused: what happens to the rest is not documented.
* ``npu_scatter_nd_update(self, indices, updates)`` (and ``_``, in place): ``k = indices.shape[-1]``,
  ``self[indices[j]] = updates[j]`` for every index tuple (CANN ScatterNdUpdate); an index outside
  the shape or one given twice is refused (CANN defines neither).
* ``npu_interleave_rope(x, cos, sin)``: ``q`` = x with its interleaved pairs de-interleaved (evens,
  then odds), ``q * cos + rotate_half(q) * sin`` (CANN InterleaveRope), 4-D x (B, N, S, D).
"""
from __future__ import annotations

import torch

from ..._base.numerics import opmath
from .checks import same_shape, writable

FLOATS = (torch.float16, torch.bfloat16, torch.float32)


def _check_float(op, **tensors):
    for name, tensor in tensors.items():
        if tensor.dtype not in FLOATS:
            raise TypeError(f"npu::{op}: {name} has dtype {tensor.dtype}; torch_npu takes float16, bfloat16, float32")


def _rms(op, x, gamma, epsilon):
    _check_float(op, self=x, gamma=gamma)
    if gamma.dim() > x.dim() or tuple(x.shape[x.dim() - gamma.dim():]) != tuple(gamma.shape):
        raise ValueError(f"npu::{op}: gamma of shape {tuple(gamma.shape)} "
                         f"is not the trailing shape of {tuple(x.shape)}")
    dims = list(range(x.dim() - gamma.dim(), x.dim()))
    wide = opmath(x).float()
    rstd = (torch.rsqrt(wide.pow(2).mean(dim=dims, keepdim=True) + epsilon) if dims
            else torch.rsqrt(wide.pow(2) + epsilon))
    return (wide * rstd * opmath(gamma).float()).to(x.dtype), rstd


def npu_rms_norm(self, gamma, epsilon=1e-6):
    return _rms("npu_rms_norm", self, gamma, epsilon)


def npu_add_rms_norm(x1, x2, gamma, epsilon=1e-6):
    _check_float("npu_add_rms_norm", x1=x1, x2=x2)
    same_shape("npu_add_rms_norm", x1=x1, x2=x2)
    x = (opmath(x1).float() + opmath(x2).float()).to(x1.dtype)
    y, rstd = _rms("npu_add_rms_norm", x, gamma, epsilon)
    return y, rstd, x


def npu_rotary_mul(self, r1, r2, rotary_mode="half", rotate=None):
    _check_float("npu_rotary_mul", self=self, r1=r1, r2=r2)
    if rotate is None and self.shape[-1] % 2:
        raise ValueError(f"npu::npu_rotary_mul: the last dim {self.shape[-1]} must be even")
    try:
        broadcast = torch.broadcast_shapes(self.shape, r1.shape, r2.shape)
    except RuntimeError:
        broadcast = None
    if broadcast != self.shape:
        raise ValueError(f"npu::npu_rotary_mul: r1 {tuple(r1.shape)} and r2 {tuple(r2.shape)} must broadcast to "
                         f"input's shape {tuple(self.shape)}")
    x = opmath(self).float()
    if rotate is not None:
        rotated = torch.matmul(x, opmath(rotate).float())
    elif rotary_mode == "half":
        first, second = x.chunk(2, dim=-1)
        rotated = torch.cat((-second, first), dim=-1)
    elif rotary_mode == "interleave":
        rotated = torch.stack((-x[..., 1::2], x[..., ::2]), dim=-1).flatten(-2)
    elif rotary_mode == "quarter":
        if self.shape[-1] % 4:
            raise ValueError(f"npu::npu_rotary_mul: the last dim {self.shape[-1]} must be a multiple of 4 "
                             "for 'quarter'")
        rotated = _rotate(x, "quarter", "npu_rotary_mul")
    elif rotary_mode == "interleave-half":  # x de-interleaved (evens, then odds), then the half rotation
        x = torch.cat((x[..., ::2], x[..., 1::2]), dim=-1)
        rotated = _rotate(x, "half", "npu_rotary_mul")
    else:
        raise ValueError(f"npu::npu_rotary_mul: rotary_mode {rotary_mode!r} is not 'half', 'interleave', "
                         "'quarter' or 'interleave-half'")
    return (x * opmath(r1).float() + rotated * opmath(r2).float()).to(self.dtype)


def npu_swiglu(self, dim=-1):
    _check_float("npu_swiglu", self=self)
    if self.dim() == 0 or self.shape[dim] % 2:
        raise ValueError(f"npu::npu_swiglu: dim {dim} of shape {tuple(self.shape)} must have an even size")
    a, b = opmath(self).float().chunk(2, dim=dim)
    return (a * torch.sigmoid(a) * b).to(self.dtype)


def _rotate(x, mode, op):
    if mode == "half":
        first, second = x.chunk(2, dim=-1)
        return torch.cat((-second, first), dim=-1)
    if mode == "interleave":
        return torch.stack((-x[..., 1::2], x[..., ::2]), dim=-1).flatten(-2)
    if mode == "quarter":
        q0, q1, q2, q3 = x.chunk(4, dim=-1)
        return torch.cat((-q1, q0, -q3, q2), dim=-1)
    raise ValueError(f"npu::{op}: rotary_mode {mode!r} is not 'half', 'interleave' or 'quarter'")


_ROPE_RANKS = {"BSND": 4, "SBND": 4, "BNSD": 4, "TND": 3}


def npu_apply_rotary_pos_emb(query, key, cos, sin, layout="BSND", rotary_mode="half"):
    op = "npu_apply_rotary_pos_emb"
    _check_float(op, query=query, key=key, cos=cos, sin=sin)
    if not query.dtype == key.dtype == cos.dtype == sin.dtype:
        raise TypeError(f"npu::{op}: query, key, cos and sin must have one dtype")
    if layout not in _ROPE_RANKS:
        raise ValueError(f"npu::{op}: layout {layout!r} is not one of {sorted(_ROPE_RANKS)}")
    rank = _ROPE_RANKS[layout]
    if any(t.dim() != rank for t in (query, key, cos, sin)):
        raise ValueError(f"npu::{op}: layout {layout} takes {rank}-D query, key, cos and sin")
    width = query.shape[-1]
    if key.shape[-1] != width or cos.shape[-1] != width or sin.shape[-1] != width:
        raise ValueError(f"npu::{op}: query, key, cos and sin must have one last dim (a narrower cos is not simulated)")
    if width % (4 if rotary_mode == "quarter" else 2):
        raise ValueError(f"npu::{op}: the last dim {width} does not split for rotary_mode {rotary_mode!r}")
    same_shape(op, cos=cos, sin=sin)
    for name, tensor in (("query", query), ("key", key)):
        if any(c not in (1, n) for c, n in zip(cos.shape, tensor.shape, strict=True)):
            raise ValueError(f"npu::{op}: cos/sin of shape {tuple(cos.shape)} do not broadcast to {name}'s "
                             f"{tuple(tensor.shape)}")
    c, s = opmath(cos).float(), opmath(sin).float()
    outs = []
    for x in (query, key):
        wide = opmath(x).float()
        outs.append((wide * c + _rotate(wide, rotary_mode, op) * s).to(x.dtype))
    return outs[0], outs[1]


def npu_interleave_rope(x, cos, sin):
    op = "npu_interleave_rope"
    _check_float(op, x=x, cos=cos, sin=sin)
    if x.dim() != 4 or x.shape[-1] % 2 or cos.shape[-1] != x.shape[-1] or sin.shape[-1] != x.shape[-1]:
        raise ValueError(f"npu::{op}: x must be 4-D (B, N, S, D) with an even D equal to cos's and sin's")
    same_shape(op, cos=cos, sin=sin)
    if cos.dim() != 4 or any(c not in (1, n) for c, n in zip(cos.shape, x.shape, strict=True)):
        raise ValueError(f"npu::{op}: cos/sin of shape {tuple(cos.shape)} must be 4-D and broadcast to x's "
                         f"{tuple(x.shape)} (B or 1, 1, S or 1, D)")
    wide = opmath(x).float()
    q = torch.cat((wide[..., ::2], wide[..., 1::2]), dim=-1)
    return (q * opmath(cos).float() + _rotate(q, "half", op) * opmath(sin).float()).to(x.dtype)


def _scatter_nd(op, self, indices, updates):
    if indices.dtype not in (torch.int32, torch.int64) or indices.dim() == 0 or indices.shape[-1] > self.dim():
        raise ValueError(f"npu::{op}: indices must be int32/int64 index tuples of length <= {self.dim()} "
                         "in the last dim")
    k = indices.shape[-1]
    rows = indices.reshape(-1, k).long()
    want = tuple(indices.shape[:-1]) + tuple(self.shape[k:])
    if tuple(updates.shape) != want or updates.dtype != self.dtype:
        raise ValueError(f"npu::{op}: updates must be {self.dtype} of shape {want}, got {updates.dtype} "
                         f"{tuple(updates.shape)}")
    bounds = torch.tensor(self.shape[:k], dtype=torch.long)
    if rows.numel() and bool(((rows < 0) | (rows >= bounds)).any()):
        raise IndexError(f"npu::{op}: an index is outside {tuple(self.shape[:k])} (CANN defines no wrap-around)")
    if rows.numel() and torch.unique(rows, dim=0).shape[0] != rows.shape[0]:
        raise ValueError(f"npu::{op}: an index tuple appears twice; which update wins is not defined by CANN")
    return rows, updates.reshape(rows.shape[0], *self.shape[k:])


def npu_scatter_nd_update(self, indices, updates):
    rows, values = _scatter_nd("npu_scatter_nd_update", self, indices, updates)
    out = self.clone()
    if rows.shape[0]:
        out[tuple(rows.t())] = values
    return out


def npu_scatter_nd_update_(self, indices, updates):
    writable("npu_scatter_nd_update_", self=self)
    rows, values = _scatter_nd("npu_scatter_nd_update_", self, indices, updates)
    if rows.shape[0]:
        self[tuple(rows.t())] = values
    return self


KERNELS = {
    "npu_scatter_nd_update": npu_scatter_nd_update,
    "npu_scatter_nd_update_": npu_scatter_nd_update_,
    "npu_apply_rotary_pos_emb": npu_apply_rotary_pos_emb,
    "npu_interleave_rope": npu_interleave_rope,
    "npu_rms_norm": npu_rms_norm,
    "npu_add_rms_norm": npu_add_rms_norm,
    "npu_rotary_mul": npu_rotary_mul,
    "npu_swiglu": npu_swiglu,
}

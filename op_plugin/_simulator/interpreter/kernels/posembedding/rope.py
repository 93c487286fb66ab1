"""Rotary position embedding GE ops (hicann ops-transformer ``posembedding/``): RotaryMul (the
shipped YAML op npu_custom_rotary_mul and torch_npu's npu_rotary_mul without `rotate` map onto it)
and RotaryPositionEmbedding (what TorchAir lowers npu_rotary_mul with `rotate` to).

Written from the ops' CANN definitions (not from op_plugin's reference kernels), so that running a
YAML op through its GE mapping checks the mapping against GE semantics. The outputs are rounded to
x's dtype explicitly: the cos/sin/rotate inputs are not dtype-checked against x, so the decorator's
widening would not be the same computation.

RotaryMulGrad (CANN ops-transformer ``posembedding/rotary_mul_grad``): the gradient of RotaryMul, what
TorchAir lowers torch_npu's npu_rotary_mul_backward to (off Ascend 950; it has no mode: the half rotation,
as RotaryMul).

RotaryMul computes ``y = x * r1 + rotate_half(x) * r2`` with ``rotate_half(x) = cat(-x2, x1)`` of x's halves;
so ``dx = dy * r1 + rotate_half^T(dy * r2)`` with ``rotate_half^T(g) = cat(g2, -g1)``, ``dr1 = dy * x`` and
``dr2 = dy * rotate_half(x)`` summed over the dims r1/r2 broadcast along (float32 inside, rounded to x's
dtype). ``need_backward=False`` (dr1/dr2 not computed: their contents are not defined) is refused.
"""
from __future__ import annotations

import torch
from ...registry import ge_kernel, refuse
from ..common import opmath

_FLOATS = (torch.float16, torch.bfloat16, torch.float32)


def _broadcasts_to_x(x, *others):
    """CANN's rope ops: cos/sin (r1/r2) broadcast to x's shape, the result has x's shape."""
    try:
        shape = torch.broadcast_shapes(x.shape, *(t.shape for t in others))
    except RuntimeError:
        shape = None
    if shape != x.shape:
        refuse(f"cos/sin of shapes {[tuple(t.shape) for t in others]} do not broadcast to x's shape {tuple(x.shape)}")


_ROPE_FLOATS = (torch.float16, torch.bfloat16, torch.float32)


@ge_kernel("RotaryMul", one_dtype=("x", "r1", "r2"),
           accepts={"x": _ROPE_FLOATS, "r1": _ROPE_FLOATS, "r2": _ROPE_FLOATS})
def rotary_mul(x, r1, r2):
    """y = x * r1 + rotate_half(x) * r2, rotate_half(x) = cat(-x[..., d/2:], x[..., :d/2])."""
    _broadcasts_to_x(x, r1, r2)
    half = x.shape[-1] // 2
    wide = opmath(x)
    rotated = torch.cat((-wide[..., half:], wide[..., :half]), dim=-1)
    return (wide * opmath(r1) + rotated * opmath(r2)).to(x.dtype)


def _rotated(x, mode):
    """CANN RotaryPositionEmbedding's x_rotate (ops-transformer README) for mode 0-2."""
    if mode == 0:    # half
        first, second = x.chunk(2, dim=-1)
        return torch.cat((-second, first), dim=-1)
    if mode == 1:    # interleave: pairs (x[2i], x[2i+1]) -> (-x[2i+1], x[2i])
        return torch.stack((-x[..., 1::2], x[..., ::2]), dim=-1).flatten(-2)
    quarters = x.chunk(4, dim=-1)  # mode 2, quarter
    return torch.cat((-quarters[1], quarters[0], -quarters[3], quarters[2]), dim=-1)


@ge_kernel("RotaryPositionEmbedding", accepts={"x": _FLOATS, "cos": _FLOATS, "sin": _FLOATS})
def rotary_position_embedding(x, cos, sin, rotate, *, mode):
    """y = x * cos + x_rotate * sin; mode 0 half, 1 interleave, 2 quarter, 3 interleave-half (x itself is
    de-interleaved first). With the optional `rotate` matrix, x_rotate = x @ rotate (torch_npu's
    npu_rotary_mul docs; TorchAir passes it with mode 0 or 1 only, other modes are refused)."""
    if mode not in (0, 1, 2, 3):
        refuse(f"mode={mode} is not a CANN mode (0 half, 1 interleave, 2 quarter, 3 interleave-half)")
    if rotate is not None and mode not in (0, 1):
        refuse(f"a rotate matrix with mode={mode} is not defined (only with mode 0 or 1)")
    _broadcasts_to_x(x, cos, sin)
    if rotate is None and x.shape[-1] % (4 if mode == 2 else 2):
        refuse(f"the last dim {x.shape[-1]} of x is not a multiple of {4 if mode == 2 else 2} for mode {mode}")
    wide = opmath(x).float()
    if rotate is not None:
        part1, part2 = wide, torch.matmul(wide, opmath(rotate).float())
    elif mode == 3:
        odd, even = wide[..., ::2], wide[..., 1::2]
        part1, part2 = torch.cat((odd, even), dim=-1), torch.cat((-even, odd), dim=-1)
    else:
        part1, part2 = wide, _rotated(wide, mode)
    return (part1 * opmath(cos).float() + part2 * opmath(sin).float()).to(x.dtype)


# ApplyRotaryPosEmb's `layout` attr as TorchAir writes it (1 BSND or BSH, 2 SBND, 3 BNSD, 4 TND); cos/sin
# carry N = 1 at the layout's N position, so broadcasting over x gives each head the same rotation.
_APPLY_LAYOUTS = {1: 4, 2: 4, 3: 4, 4: 3}
_APPLY_MODES = {"half": 0, "interleave": 1, "quarter": 2}


@ge_kernel("ApplyRotaryPosEmb", one_dtype=("query", "key", "cos", "sin"),
           accepts={"query": _FLOATS, "key": _FLOATS, "cos": _FLOATS, "sin": _FLOATS})
def apply_rotary_pos_emb(query, key, cos, sin, *, layout, rotary_mode):
    """CANN ApplyRotaryPosEmb (torch_npu npu_apply_rotary_pos_emb docs): query and key each
    ``x * cos + x_rotate * sin`` with x_rotate as RotaryPositionEmbedding's mode ("half",
    "interleave", "quarter"), computed in float32 and rounded to the input dtype. On an NPU the op
    updates its inputs in place; TorchAir feeds it TensorMove copies, so the graph's outputs are new."""
    if layout not in _APPLY_LAYOUTS:
        refuse(f"layout={layout} is not 1 (BSND/BSH), 2 (SBND), 3 (BNSD) or 4 (TND)")
    if rotary_mode not in _APPLY_MODES:
        refuse(f"rotary_mode={rotary_mode!r} is not 'half', 'interleave' or 'quarter'")
    rank = _APPLY_LAYOUTS[layout]
    for name, tensor in (("query", query), ("key", key), ("cos", cos), ("sin", sin)):
        if tensor.dim() != rank:
            refuse(f"{name} has {tensor.dim()} dims; layout {layout} takes {rank}")
    width = query.shape[-1]
    if key.shape[-1] != width or cos.shape[-1] != width or sin.shape[-1] != width:
        refuse(f"the last dims of query/key/cos/sin ({width}, {key.shape[-1]}, {cos.shape[-1]}, {sin.shape[-1]}) "
               "differ: a cos/sin narrower than query (Atlas 350 only) is not simulated")
    if width % (4 if rotary_mode == "quarter" else 2):
        refuse(f"the last dim {width} is not a multiple of {4 if rotary_mode == 'quarter' else 2} for {rotary_mode!r}")
    if cos.shape != sin.shape:
        refuse(f"cos {tuple(cos.shape)} and sin {tuple(sin.shape)} must have one shape")
    for name, tensor in (("query", query), ("key", key)):
        if any(c not in (1, n) for c, n in zip(cos.shape, tensor.shape, strict=True)):
            refuse(f"cos/sin of shape {tuple(cos.shape)} do not broadcast to {name}'s {tuple(tensor.shape)}")
    mode = _APPLY_MODES[rotary_mode]
    wide_cos, wide_sin = opmath(cos).float(), opmath(sin).float()
    out = []
    for x in (query, key):
        wide = opmath(x).float()
        out.append((wide * wide_cos + _rotated(wide, mode) * wide_sin).to(x.dtype))
    return out[0], out[1]


@ge_kernel("InterleaveRope", one_dtype=("x", "cos", "sin"),
           accepts={"x": (torch.float16, torch.bfloat16), "cos": (torch.float16, torch.bfloat16),
                    "sin": (torch.float16, torch.bfloat16)})
def interleave_rope(x, cos, sin):
    """CANN InterleaveRope (ops-transformer README): q = x de-interleaved
    (reshape [B, N, S, D/2, 2], transpose(-1, -2), reshape [B, N, S, D]), y = q * cos + RotateHalf(q) * sin,
    in float32, rounded to x's dtype. 4-D x; cos/sin of shape (B, 1, S or 1, D). The REG_OP lists
    float16 only, torch_npu's docs also bfloat16: both are taken."""
    if x.dim() != 4 or cos.dim() != 4 or sin.dim() != 4:
        refuse(f"x, cos and sin must be 4-D (B, N, S, D); got {x.dim()}, {cos.dim()}, {sin.dim()} dims")
    if x.shape[-1] % 2 or cos.shape[-1] != x.shape[-1] or sin.shape[-1] != x.shape[-1]:
        refuse(f"D of x, cos, sin ({x.shape[-1]}, {cos.shape[-1]}, {sin.shape[-1]}) must be equal and even")
    if cos.shape != sin.shape or any(c not in (1, n) for c, n in zip(cos.shape, x.shape, strict=True)):
        refuse(f"cos {tuple(cos.shape)} and sin {tuple(sin.shape)} must have one shape that broadcasts to x's "
               f"{tuple(x.shape)} (B or 1, 1, S or 1, D)")
    wide = opmath(x).float()
    q = torch.cat((wide[..., ::2], wide[..., 1::2]), dim=-1)
    return (q * opmath(cos).float() + _rotated(q, 0) * opmath(sin).float()).to(x.dtype)

_GRAD_FLOATS = (torch.float16, torch.float32, torch.bfloat16)


def _reduce_to(t, shape):
    extra = t.dim() - len(shape)
    if extra < 0:
        refuse(f"r1/r2 of shape {tuple(shape)} have more dims than x")
    if extra:
        t = t.sum(dim=tuple(range(extra)))
    for axis, size in enumerate(shape):
        if size == 1 and t.shape[axis] != 1:
            t = t.sum(dim=axis, keepdim=True)
    if tuple(t.shape) != tuple(shape):
        refuse(f"r1/r2 of shape {tuple(shape)} do not broadcast to x")
    return t


@ge_kernel("RotaryMulGrad", one_dtype=("x", "r1", "r2", "dy"), accepts={"x": _GRAD_FLOATS})
def rotary_mul_grad(x, r1, r2, dy, *, need_backward):
    if not need_backward:
        refuse("need_backward=False leaves dr1/dr2 undefined; not simulated")
    if x.shape[-1] % 2:
        refuse(f"the last dim {x.shape[-1]} of x must be even")
    half = x.shape[-1] // 2
    wide, grad = opmath(x).float(), opmath(dy).float()
    scaled = grad * opmath(r2).float()
    dx = grad * opmath(r1).float() + torch.cat((scaled[..., half:], -scaled[..., :half]), dim=-1)
    rotated = torch.cat((-wide[..., half:], wide[..., :half]), dim=-1)
    dr1 = _reduce_to(grad * wide, r1.shape)
    dr2 = _reduce_to(grad * rotated, r2.shape)
    return dx.to(x.dtype), dr1.to(x.dtype), dr2.to(x.dtype)


def _mode_rotation(t, mode, adjoint):
    """RotaryPositionEmbedding's x_rotate map for mode 0 half, 1 interleave, 2 quarter (3 uses the half
    map after de-interleaving), or its adjoint."""
    s = -1.0 if adjoint else 1.0
    if mode in (0, 3):
        a, b = t.chunk(2, dim=-1)
        return torch.cat((-s * b, s * a), dim=-1)
    if mode == 1:
        return torch.stack((-s * t[..., 1::2], s * t[..., 0::2]), dim=-1).flatten(-2)
    q = t.chunk(4, dim=-1)
    return torch.cat((-s * q[1], s * q[0], -s * q[3], s * q[2]), dim=-1)


@ge_kernel("RotaryPositionEmbeddingGrad", one_dtype=("dy", "cos", "sin", "x"), accepts={"dy": _GRAD_FLOATS})
def rotary_position_embedding_grad(dy, cos, sin, x, *, mode):
    """The gradient of CANN RotaryPositionEmbedding (y = part1 * cos + part2 * sin; part1 = x, or x
    de-interleaved for mode 3; part2 = x_rotate(part1)): dx = P^T(dy * cos + x_rotate^T(dy * sin)),
    dcos = sum(dy * part1), dsin = sum(dy * part2) over the dims cos/sin broadcast along. TorchAir emits it
    on Ascend 950 only. Without x, dcos/dsin cannot be computed: refused."""
    if mode not in (0, 1, 2, 3):
        refuse(f"mode={mode} is not a CANN mode (0 half, 1 interleave, 2 quarter, 3 interleave-half)")
    if x is None:
        refuse("x is not fed: dcos and dsin are not defined without it")
    if x.shape != dy.shape or cos.shape != sin.shape or cos.dim() != dy.dim():
        refuse(f"dy {tuple(dy.shape)} must have x's shape {tuple(x.shape)}, and cos {tuple(cos.shape)} and sin "
               f"{tuple(sin.shape)} one shape of dy's rank")
    if dy.shape[-1] % (4 if mode == 2 else 2):
        refuse(f"the last dim {dy.shape[-1]} does not split for mode {mode}")
    grad, wide = opmath(dy).float(), opmath(x).float()
    part1 = torch.cat((wide[..., 0::2], wide[..., 1::2]), dim=-1) if mode == 3 else wide
    d_part1 = grad * opmath(cos).float() + _mode_rotation(grad * opmath(sin).float(), mode, adjoint=True)
    if mode == 3:  # interleave back: evens from the first half, odds from the second
        first, second = d_part1.chunk(2, dim=-1)
        d_part1 = torch.stack((first, second), dim=-1).flatten(-2)
    dcos = _reduce_to(grad * part1, cos.shape)
    dsin = _reduce_to(grad * _mode_rotation(part1, mode, adjoint=False), sin.shape)
    return d_part1.to(dy.dtype), dcos.to(dy.dtype), dsin.to(dy.dtype)

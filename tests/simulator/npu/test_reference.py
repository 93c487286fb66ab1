"""The ops of op_plugin/_simulator/npu/reference.py (RMS norm, rotary, SwiGLU, scatter-nd): each eager op against
an independent oracle (rotation matrices built index by index, loops, the formulas of tests/simulator/npu/
oracles.py) and, bit for bit, against the single-op graph TorchAir builds for it (the same GE kernel).

torch_npu's own operators on the CPU simulator (op_plugin/_simulator/npu/ops*.py).

Oracles are torch's own formulas (F.rms_norm, F.silu, rotation matrices, F.scaled_dot_product_attention),
never the kernels under test. Compiled graphs go through TorchAir's own converters and the GE executor."""

import pytest
import torch
import torch.nn.functional as F

from op_plugin._simulator import capture_graphs
from op_plugin._simulator.npu import ops as npu_ops
from op_plugin._testing_harness import Npugraph, assert_close, check_compiled, run_node

from . import oracles
from .graph_equal import assert_eager_equals_graph

F32, F16, BF16 = torch.float32, torch.float16, torch.bfloat16
npu = torch.ops.npu
pytestmark = pytest.mark.usefixtures("torchair")


# ---- moved from tests/simulator/test_npu_ops_rope.py ----

def _quarter(d):
    """x @ R = cat(-q1, q0, -q3, q2) of the four quarters of x."""
    r, q = torch.zeros(d, d), d // 4
    for i in range(q):
        r[i + q, i], r[i, i + q] = -1.0, 1.0
        r[i + 3 * q, i + 2 * q], r[i + 2 * q, i + 3 * q] = -1.0, 1.0
    return r


def _matrix(d, mode, rotation):
    return _quarter(d) if mode == "quarter" else rotation(d, mode)


# layout -> (query shape, key shape, cos shape)
LAYOUTS = {
    "BSND": ((2, 3, 4, 8), (2, 3, 2, 8), (2, 3, 1, 8)),
    "SBND": ((3, 2, 4, 8), (3, 2, 2, 8), (3, 2, 1, 8)),
    "BNSD": ((2, 4, 3, 8), (2, 2, 3, 8), (2, 1, 3, 8)),
    "TND": ((5, 4, 8), (5, 2, 8), (5, 1, 8)),
}


@pytest.mark.parametrize("dtype", (F32, F16, BF16))
@pytest.mark.parametrize("mode", ["half", "interleave", "quarter"])
@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_apply_rotary_pos_emb(layout, mode, dtype, rotation):
    qs, ks, cs = LAYOUTS[layout]
    q, k = torch.randn(qs).to(dtype), torch.randn(ks).to(dtype)
    cos, sin = torch.rand(cs).to(dtype), torch.rand(cs).to(dtype)
    got_q, got_k = npu.npu_apply_rotary_pos_emb(q, k, cos, sin, layout, mode)
    r = _matrix(qs[-1], mode, rotation)
    for got, x in ((got_q, q), (got_k, k)):
        want = x.float() * cos.float() + (x.float() @ r) * sin.float()
        assert_close(got, want.to(dtype), "npu_ops", equal_nan=True)
    assert got_q.data_ptr() != q.data_ptr()  # new tensors (the schema declares no alias)


def test_apply_rotary_pos_emb_refusals():
    q, c = torch.randn(1, 2, 2, 8), torch.rand(1, 2, 1, 8)
    with pytest.raises(ValueError, match="rotary_mode"):
        npu.npu_apply_rotary_pos_emb(q, q, c, c, "BSND", "third")
    with pytest.raises(ValueError, match="layout"):
        npu.npu_apply_rotary_pos_emb(q, q, c, c, "NSD")
    with pytest.raises(NotImplementedError, match="narrower"):
        npu.npu_apply_rotary_pos_emb(q, q, c[..., :4], c[..., :4])
    with pytest.raises(ValueError, match="one dtype"):
        npu.npu_apply_rotary_pos_emb(q, q, c.half(), c.half())


@pytest.mark.parametrize("dtype", (F16, BF16))
@pytest.mark.parametrize("cshape", [(2, 1, 3, 8), (2, 1, 1, 8)])
def test_interleave_rope(cshape, dtype, rotation):
    x = torch.randn(2, 4, 3, 8).to(dtype)
    cos, sin = torch.rand(cshape).to(dtype), torch.rand(cshape).to(dtype)
    perm = torch.zeros(8, 8)  # x @ perm: evens first, then odds
    for i in range(4):
        perm[2 * i, i], perm[2 * i + 1, i + 4] = 1.0, 1.0
    q = x.float() @ perm
    want = q * cos.float() + (q @ rotation(8, "half")) * sin.float()
    assert_close(npu.npu_interleave_rope(x, cos, sin), want.to(dtype), "npu_ops", equal_nan=True)


@pytest.mark.parametrize("dtype", (F32, F16, BF16))
@pytest.mark.parametrize("mode", ["half", "interleave", "quarter"])
def test_apply_rotary_pos_emb_compiled(mode, dtype):
    def fn(q, k, cos, sin):
        return npu.npu_apply_rotary_pos_emb(q, k, cos, sin, "BSND", mode)
    qs, ks, cs = LAYOUTS["BSND"]
    args = (torch.randn(qs).to(dtype), torch.randn(ks).to(dtype), torch.rand(cs).to(dtype), torch.rand(cs).to(dtype))
    check_compiled(fn, args, "ApplyRotaryPosEmb", kind="npu_ops")


@pytest.mark.parametrize("dtype", (F16, BF16))
def test_interleave_rope_compiled(dtype):
    args = (torch.randn(2, 4, 3, 8).to(dtype), torch.rand(2, 1, 3, 8).to(dtype), torch.rand(2, 1, 3, 8).to(dtype))
    check_compiled(lambda x, c, s: npu.npu_interleave_rope(x, c, s), args, "InterleaveRope", kind="npu_ops")


def test_rope_compiled_with_dynamic_batch():
    def fn(q, k, cos, sin):
        q2, k2 = npu.npu_apply_rotary_pos_emb(q, k, cos, sin)
        return q2 + 1, k2 * 2
    for b in (2, 3, 5):
        args = (torch.randn(b, 3, 4, 8), torch.randn(b, 3, 2, 8), torch.rand(b, 3, 1, 8), torch.rand(b, 3, 1, 8))
        check_compiled(fn, args, "ApplyRotaryPosEmb", kind="npu_ops", dynamic=True)


# ---- moved from tests/simulator/test_npu_ops_rope_modes.py ----

MODES = {"half": 0, "interleave": 1, "quarter": 2, "interleave-half": 3}


def _rotation_matrix(d, mode):
    """R with x @ R = the mode's x_rotate (on the de-interleaved x for interleave-half)."""
    r = torch.zeros(d, d, dtype=torch.float64)
    if mode in ("half", "interleave-half"):
        h = d // 2
        for i in range(h):
            r[i + h, i], r[i, i + h] = -1.0, 1.0  # out[i] = -x[i + h], out[i + h] = x[i]
    elif mode == "interleave":
        for i in range(0, d, 2):
            r[i + 1, i], r[i, i + 1] = -1.0, 1.0  # out[2i] = -x[2i + 1], out[2i + 1] = x[2i]
    else:
        q = d // 4
        for i in range(q):
            r[i + q, i], r[i, i + q] = -1.0, 1.0
            r[i + 3 * q, i + 2 * q], r[i + 2 * q, i + 3 * q] = -1.0, 1.0
    return r


def _first_step(d, mode):
    """P with x @ P = the part CANN multiplies by cos: x, or x de-interleaved (evens then odds)."""
    p = torch.eye(d, dtype=torch.float64)
    if mode == "interleave-half":
        p = torch.zeros(d, d, dtype=torch.float64)
        for i in range(d // 2):
            p[2 * i, i], p[2 * i + 1, i + d // 2] = 1.0, 1.0
    return p


def _plain(x, r1, r2, mode):
    d = x.shape[-1]
    part1 = x @ _first_step(d, mode)
    return part1 * r1 + (part1 @ _rotation_matrix(d, mode)) * r2


def _inputs(dtype=torch.float32):
    return (torch.randn(2, 3, 4, 16).to(dtype), torch.rand(1, 3, 1, 16).to(dtype), torch.rand(1, 3, 1, 16).to(dtype))


@pytest.mark.parametrize("dtype", (torch.float32, torch.float16, torch.bfloat16))
@pytest.mark.parametrize("mode", ["quarter", "interleave-half"])
def test_rotary_mul_modes(mode, dtype):
    x, r1, r2 = _inputs(dtype)
    want = _plain(x.double(), r1.double(), r2.double(), mode)
    assert_close(npu.npu_rotary_mul(x, r1, r2, mode), want.to(dtype), "npu_ops")


@pytest.mark.parametrize("mode", sorted(MODES))
def test_rotary_position_embedding_node_matches_the_modes(mode):
    x, cos, sin = _inputs()
    (got,) = run_node("RotaryPositionEmbedding", [x, cos, sin], mode=MODES[mode])
    assert_close(got, _plain(x.double(), cos.double(), sin.double(), mode).float(), "npu_ops")


def _autograd(x, r1, r2, dy, mode):
    leaves = [t.double().requires_grad_() for t in (x, r1, r2)]
    return torch.autograd.grad(_plain(*leaves, mode), leaves, dy.double())


@pytest.mark.parametrize("mode", sorted(MODES))
def test_rotary_mul_backward_modes(mode):
    x, r1, r2 = _inputs()
    dy = torch.randn_like(x)
    want = _autograd(x, r1, r2, dy, mode)
    got = npu.npu_rotary_mul_backward(dy, x, r1, r2, mode)
    assert_close(got, tuple(w.float() for w in want), "npu_ops", scale=4)
    leaves = [t.clone().requires_grad_() for t in (x, r1, r2)]  # autograd through the op itself
    through_op = torch.autograd.grad(npu.npu_rotary_mul(*leaves, mode), leaves, dy)
    assert_close(through_op, tuple(w.float() for w in want), "npu_ops", scale=4)


@pytest.mark.parametrize("mode", sorted(MODES))
def test_rotary_position_embedding_grad_node(mode):
    x, cos, sin = _inputs()
    dy = torch.randn_like(x)
    want = _autograd(x, cos, sin, dy, mode)
    got = run_node("RotaryPositionEmbeddingGrad", {"dy": dy, "cos": cos, "sin": sin, "x": x}, 3, mode=MODES[mode])
    assert_close(tuple(got), tuple(w.float() for w in want), "npu_ops", scale=4)


def test_rotary_position_embedding_grad_refuses_a_missing_x():
    x, cos, sin = _inputs()
    with pytest.raises(Exception, match="x is not fed") as error:
        run_node("RotaryPositionEmbeddingGrad", {"dy": x, "cos": cos, "sin": sin}, 3, name="rope_grad", mode=0)
    assert "rope_grad" in str(error.value)


@pytest.mark.parametrize("mode", ["quarter", "interleave-half"])
def test_quarter_modes_keep_their_mode_off_ascend_950(mode):
    """TorchAir lowers npu_rotary_mul without `rotate` to RotaryMul (no mode: the half rotation) unless the
    SoC is Ascend 950 (arch35), as an A2/A3 host's TorchAir would; op_plugin's correction (op_plugin/_lowering/
    numeric_corrections.py, issue 34) lowers these modes to RotaryPositionEmbedding with the mode, so graph
    mode computes what eager computes (docs/torch-npu-ops.md)."""
    x, r1, r2 = _inputs()
    got = Npugraph(lambda a, b, c: npu.npu_rotary_mul(a, b, c, mode))(x, r1, r2)
    assert_close(got, _plain(x.double(), r1.double(), r2.double(), mode).float(), "npu_ops")


def test_cos_sin_must_broadcast_to_x():
    """CANN: cos/sin broadcast to x's shape (the output has x's shape); a larger cos is refused."""
    x, big = torch.randn(1, 2, 3, 8), torch.rand(2, 2, 3, 8)
    with pytest.raises(ValueError, match="broadcast to x.s shape"):
        npu.npu_rotary_mul(x, big, big)
    for op_type, mode in (("RotaryMul", None), ("RotaryPositionEmbedding", 0)):
        attrs = {} if mode is None else {"mode": mode}
        with pytest.raises(Exception, match="do not broadcast to x's shape"):
            run_node(op_type, [x, big, big], **attrs)
    (got,) = run_node("RotaryPositionEmbedding", [torch.randn(5, 2, 8), torch.rand(5, 1, 8), torch.rand(5, 1, 8)],
                      mode=1)  # TND with T1D cos/sin
    assert got.shape == (5, 2, 8)


# ---- moved from tests/simulator/test_npu_ops_scatter.py ----

def _oracle(var, indices, updates):
    out = var.clone()
    k = indices.shape[-1]
    flat_idx, flat_upd = indices.reshape(-1, k).tolist(), updates.reshape(-1, *var.shape[k:])
    for j, index in enumerate(flat_idx):
        out[tuple(index)] = flat_upd[j]
    return out


CASES = {  # var shape, indices, updates shape
    "rows": ((8, 4), [[1], [5], [2]], (3, 4)),
    "cells": ((4, 5), [[0, 1], [3, 4]], (2,)),
    "cache_slots": ((6, 2, 3), [[[4]], [[0]]], (2, 1, 2, 3)),
    "none": ((3, 2), torch.zeros(0, 1, dtype=torch.long), (0, 2)),
}


@pytest.mark.parametrize("dtype", (torch.float32, torch.float16, torch.int32))
@pytest.mark.parametrize("name", sorted(CASES))
def test_scatter_nd_update(name, dtype):
    shape, indices, ushape = CASES[name]
    var = torch.randn(shape).to(dtype)
    indices = torch.as_tensor(indices, dtype=torch.int64)
    updates = torch.randn(ushape).to(dtype)
    want = _oracle(var, indices, updates)
    assert torch.equal(npu.npu_scatter_nd_update(var, indices, updates), want)
    copy = var.clone()
    assert npu.npu_scatter_nd_update_(copy, indices.int(), updates) is copy
    assert torch.equal(copy, want)


def test_scatter_nd_update_refusals():
    var = torch.zeros(4, 2)
    with pytest.raises(ValueError, match="outside"):
        npu.npu_scatter_nd_update(var, torch.tensor([[4]]), torch.ones(1, 2))
    with pytest.raises(ValueError, match="twice"):
        npu.npu_scatter_nd_update(var, torch.tensor([[1], [1]]), torch.ones(2, 2))
    with pytest.raises(ValueError, match="shape"):
        npu.npu_scatter_nd_update(var, torch.tensor([[1]]), torch.ones(1, 3))
    with pytest.raises(Exception, match="twice") as error:
        run_node("ScatterNdUpdate", {"var": var, "indices": torch.tensor([[1], [1]]), "updates": torch.ones(2, 2)},
                 [(torch.float32, [4, 2])], name="kv_write")
    assert "kv_write" in str(error.value)


def test_torch_npus_in_place_ops_with_a_functional_variant_are_functionalized():
    functionalized = torch._C._dispatch_get_registrations_for_dispatch_key("Functionalize")
    assert "npu::npu_scatter_nd_update_" in functionalized and "npu::scatter_update_" in functionalized
    assert "npu::npu_scatter_nd_update" not in functionalized  # the functional form needs none


def test_kv_cache_write_in_place_compiles_and_updates_the_cache():
    def step(cache, slots, new_kv, query):
        npu.npu_scatter_nd_update_(cache, slots, new_kv)
        return (cache * query).sum(-1)

    def make():
        return (torch.randn(16, 2, 8), torch.tensor([[3], [9]]), torch.randn(2, 2, 8), torch.randn(16, 2, 8))

    eager_args, graph_args = make(), None
    graph_args = tuple(a.clone() for a in eager_args)
    want = step(*eager_args)
    compiled = Npugraph(step)
    with capture_graphs() as graphs:
        got = compiled(*graph_args)
    torch.testing.assert_close(got, want)
    assert torch.equal(graph_args[0], eager_args[0])  # the copy back: the caller's cache holds the write
    types = {op.type for graph in graphs for op in graph.op}
    assert "ScatterNdUpdate" in types


def test_functional_scatter_nd_update_compiled():
    args = (torch.randn(8, 4), torch.tensor([[1], [6]]), torch.randn(2, 4))
    check_compiled(lambda v, i, u: npu.npu_scatter_nd_update(v, i, u) + 1, args, "ScatterNdUpdate", kind="npu_ops")


def test_kv_cache_write_compiled_dynamic():
    def step(cache, slots, new_kv):
        npu.npu_scatter_nd_update_(cache, slots, new_kv)
        return cache + 0
    compiled = Npugraph(step, dynamic=True)
    for rows in (2, 3):
        cache, slots, kv = torch.randn(12, 4), torch.arange(rows).unsqueeze(-1) * 3, torch.randn(rows, 4)
        want_cache = cache.clone()
        want = step(want_cache, slots, kv)
        got = compiled(cache, slots, kv)
        torch.testing.assert_close(got, want)
        assert torch.equal(cache, want_cache)
    assert "npu_scatter_nd_update_" in npu_ops.COVERED


# ---- issue 32: each op an adapter over its GE kernel: eager == graph bit for bit, and the former eager formulas
# (tests/simulator/npu/oracles.py) at the npu_ops tolerances ----

@pytest.mark.parametrize("dtype", (F32, F16, BF16))
def test_rms_norm_family_eager_is_the_graph_and_the_formula(dtype):
    x, x2, gamma = torch.randn(2, 3, 16).to(dtype), torch.randn(2, 3, 16).to(dtype), torch.randn(16).to(dtype)
    assert_eager_equals_graph(lambda a, g: npu.npu_rms_norm(a, g, 1e-5), (x, gamma), "RmsNorm")
    assert_eager_equals_graph(lambda a, b, g: npu.npu_add_rms_norm(a, b, g, 1e-5), (x, x2, gamma), "AddRmsNorm")
    assert_close(npu.npu_rms_norm(x, gamma, 1e-5), oracles.rms_norm(x, gamma, 1e-5), "npu_ops")
    assert_close(npu.npu_add_rms_norm(x, x2, gamma, 1e-5), oracles.add_rms_norm(x, x2, gamma, 1e-5), "npu_ops")
    gamma2 = torch.randn(3, 16).to(dtype)   # two normalized dims; a 0-d gamma normalizes each element
    assert_close(npu.npu_rms_norm(x, gamma2), oracles.rms_norm(x, gamma2), "npu_ops")
    scalar = torch.tensor(1.5).to(dtype)
    assert_close(npu.npu_rms_norm(x, scalar), oracles.rms_norm(x, scalar), "npu_ops")


def test_rms_norm_refusals_name_the_op():
    with pytest.raises(ValueError, match="npu_rms_norm: .*trailing shape"):
        npu.npu_rms_norm(torch.randn(2, 8), torch.randn(4))
    with pytest.raises(ValueError, match="npu_rms_norm: .*dtype"):
        npu.npu_rms_norm(torch.randn(2, 8).double(), torch.randn(8).double())
    with pytest.raises(ValueError, match="npu_add_rms_norm: .*x1's shape"):
        npu.npu_add_rms_norm(torch.randn(2, 8), torch.randn(1, 8), torch.randn(8))


@pytest.mark.parametrize("dtype", (F32, F16, BF16))
@pytest.mark.parametrize("mode", ["half", "interleave", "quarter", "interleave-half"])
def test_rotary_mul_eager_is_rotary_position_embedding(mode, dtype):
    x, r1, r2 = torch.randn(2, 3, 4, 16).to(dtype), torch.rand(1, 3, 1, 16).to(dtype), torch.rand(1, 3, 1, 16).to(dtype)
    got = npu.npu_rotary_mul(x, r1, r2, mode)
    assert torch.equal(got, run_node("RotaryPositionEmbedding", [x, r1, r2, None], [(dtype, list(x.shape))],
                                     mode=MODES[mode])[0])
    assert_close(got, oracles.rotary_mul(x, r1, r2, mode), "npu_ops")


@pytest.mark.parametrize("dtype", (F32, F16, BF16))
def test_rotary_mul_half_eager_is_the_graph(dtype):
    """Off Ascend 950 TorchAir lowers the half mode to RotaryMul: the same bits as RotaryPositionEmbedding's mode 0."""
    x, r1, r2 = torch.randn(2, 3, 4, 16).to(dtype), torch.rand(1, 3, 1, 16).to(dtype), torch.rand(1, 3, 1, 16).to(dtype)
    assert_eager_equals_graph(lambda a, b, c: npu.npu_rotary_mul(a, b, c), (x, r1, r2), "RotaryMul")
    rot = torch.randn(16, 16).to(dtype)
    assert_eager_equals_graph(lambda a, b, c, r: npu.npu_rotary_mul(a, b, c, "half", r), (x, r1, r2, rot),
                              "RotaryPositionEmbedding")
    assert_close(npu.npu_rotary_mul(x, r1, r2, "half", rot), oracles.rotary_mul(x, r1, r2, rotate_matrix=rot),
                 "npu_ops", scale=4.0)


@pytest.mark.parametrize("dtype", (F32, F16, BF16))
def test_swiglu_eager_is_the_graph_and_the_formula(dtype):
    x = torch.randn(3, 4, 8).to(dtype)
    for dim in (-1, 1):
        assert_eager_equals_graph(lambda t, dim=dim: npu.npu_swiglu(t, dim), (x,), "SwiGlu")
        assert_close(npu.npu_swiglu(x, dim), oracles.swiglu(x, dim), "npu_ops")


@pytest.mark.parametrize("dtype", (F32, F16, BF16))
@pytest.mark.parametrize("mode", ["half", "interleave", "quarter"])
@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_apply_rotary_pos_emb_eager_is_the_graph(layout, mode, dtype):
    qs, ks, cs = LAYOUTS[layout]
    args = (torch.randn(qs).to(dtype), torch.randn(ks).to(dtype), torch.rand(cs).to(dtype), torch.rand(cs).to(dtype))
    assert_eager_equals_graph(lambda q, k, c, s: npu.npu_apply_rotary_pos_emb(q, k, c, s, layout, mode), args,
                              "ApplyRotaryPosEmb")


@pytest.mark.parametrize("dtype", (F16, BF16))
def test_interleave_rope_eager_is_the_graph(dtype):
    args = (torch.randn(2, 4, 3, 8).to(dtype), torch.rand(2, 1, 3, 8).to(dtype), torch.rand(2, 1, 3, 8).to(dtype))
    assert_eager_equals_graph(lambda x, c, s: npu.npu_interleave_rope(x, c, s), args, "InterleaveRope")


@pytest.mark.parametrize("dtype", (F32, F16, torch.int32))
def test_scatter_nd_update_eager_is_the_graph(dtype):
    var, indices, updates = torch.arange(24).reshape(6, 4).to(dtype), torch.tensor([[4], [1]]), torch.ones(2, 4)
    assert_eager_equals_graph(lambda v, i, u: npu.npu_scatter_nd_update(v, i, u), (var, indices, updates.to(dtype)),
                              "ScatterNdUpdate")

    def in_place(v, i, u):
        npu.npu_scatter_nd_update_(v, i, u)
        return v * 1
    assert_eager_equals_graph(in_place, (var, indices, updates.to(dtype)), "ScatterNdUpdate")


# ---- moved from tests/simulator/test_npu_ops.py ----

FLOATS = (F32, F16, BF16)


def _materialize(arg):
    """A declared case's tensor spec as uniform rand in its value_range (default [-2, 2))."""
    dims = getattr(arg, "dims", None)
    if dims is None:
        return arg
    low, high = arg.value_range if getattr(arg, "value_range", None) else (-2.0, 2.0)
    return (torch.rand(dims) * (high - low) + low).to(arg.dtype)


NORM_CASES = [  # x shape, gamma shape
    ((2, 3, 8), (8,)), ((4, 6), (6,)), ((2, 3, 4), (3, 4)), ((0, 8), (8,)), ((5,), (5,)),
]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape,gshape", NORM_CASES)
def test_rms_norm(shape, gshape, dtype):
    x, gamma = torch.randn(shape).to(dtype), torch.randn(gshape).to(dtype)
    y, rstd = npu.npu_rms_norm(x, gamma, 1e-5)
    want = F.rms_norm(x.float(), gshape, gamma.float(), eps=1e-5)
    assert_close(y, want.to(dtype), "npu_ops", equal_nan=True)
    dims = tuple(range(x.dim() - len(gshape), x.dim()))
    want_rstd = torch.rsqrt(x.float().pow(2).mean(dims, keepdim=True) + 1e-5)
    assert rstd.dtype == F32
    assert_close(rstd, want_rstd, "npu_ops", dtype=F32, equal_nan=True)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape,gshape", NORM_CASES)
def test_add_rms_norm(shape, gshape, dtype):
    x1, x2, gamma = torch.randn(shape).to(dtype), torch.randn(shape).to(dtype), torch.randn(gshape).to(dtype)
    y, rstd, x = npu.npu_add_rms_norm(x1, x2, gamma)
    total = (x1.float() + x2.float()).to(dtype)
    assert torch.equal(x, total)
    assert_close(y, F.rms_norm(total.float(), gshape, gamma.float(), eps=1e-6).to(dtype), "npu_ops", equal_nan=True)
    rows = F.rms_norm(total.float(), gshape).shape[:x.dim() - len(gshape)]
    assert rstd.dtype == F32 and rstd.shape == rows + (1,) * len(gshape)


def test_rms_norm_nan_and_refusals():
    x = torch.tensor([[1.0, float("nan")], [1.0, 2.0]])
    y, _ = npu.npu_rms_norm(x, torch.ones(2))
    assert torch.isnan(y[0]).all() and torch.isfinite(y[1]).all()
    with pytest.raises(ValueError, match="npu_rms_norm"):
        npu.npu_rms_norm(torch.ones(2, 2, dtype=torch.int32), torch.ones(2, dtype=torch.int32))
    with pytest.raises(ValueError, match="trailing shape"):
        npu.npu_rms_norm(torch.ones(2, 3), torch.ones(2))


ROTARY_CASES = [  # x shape, r shape
    ((2, 4, 3, 8), (1, 4, 1, 8)), ((2, 3, 4, 8), (1, 1, 4, 8)), ((2, 3, 4, 6), (2, 3, 4, 6)),
    ((0, 3, 4, 8), (1, 3, 1, 8)),
]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("mode", ["half", "interleave"])
@pytest.mark.parametrize("shape,rshape", ROTARY_CASES)
def test_rotary_mul(shape, rshape, mode, dtype, rotation):
    x, r1, r2 = torch.randn(shape).to(dtype), torch.rand(rshape).to(dtype), torch.rand(rshape).to(dtype)
    got = npu.npu_rotary_mul(x, r1, r2, mode)
    want = r1.float() * x.float() + r2.float() * (x.float() @ rotation(shape[-1], mode))
    assert_close(got, want.to(dtype), "npu_ops", equal_nan=True)


def test_rotary_mul_with_rotate_matrix_and_refusals():
    x, r = torch.randn(2, 3, 4, 6), torch.rand(1, 3, 1, 6)
    rotate = torch.randn(6, 6)
    assert_close(npu.npu_rotary_mul(x, r, r, "half", rotate), r * x + r * (x @ rotate), "npu_ops", equal_nan=True)
    with pytest.raises(ValueError, match="rotary_mode"):
        npu.npu_rotary_mul(x, r, r, "third")
    with pytest.raises(ValueError, match="multiple of 4"):  # 'quarter' (CANN mode 2) needs D % 4 == 0
        npu.npu_rotary_mul(x, r, r, "quarter")
    with pytest.raises(ValueError, match="multiple of 2"):
        npu.npu_rotary_mul(torch.randn(1, 1, 1, 5), torch.ones(5), torch.ones(5))


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape,dim", [((2, 8), -1), ((4, 6, 3), 1), ((4, 6, 3), -3), ((0, 4), -1), ((2,), 0)])
def test_swiglu(shape, dim, dtype):
    x = torch.randn(shape).to(dtype)
    a, b = x.float().split(shape[dim] // 2, dim=dim)
    assert_close(npu.npu_swiglu(x, dim), (F.silu(a) * b).to(dtype), "npu_ops", equal_nan=True)


def test_swiglu_refuses_odd_split():
    with pytest.raises(ValueError, match="even"):
        npu.npu_swiglu(torch.randn(3, 5))


GE_TYPES = {"npu_rms_norm": "RmsNorm", "npu_rotary_mul": "RotaryMul", "npu_swiglu": "SwiGlu"}


@pytest.mark.parametrize("name", sorted(GE_TYPES))
def test_torchair_declared_cases(name):
    from torchair._ge_concrete_graph.fx2ge_converter import _declare_supported_converters
    from torchair._ge_concrete_graph.ge_converter import custom  # noqa: F401  (TorchAir imports it lazily)
    op = getattr(npu, name).default
    converter = _declare_supported_converters()[op]
    assert converter is not None and converter.supported_cases, name
    for case in converter.supported_cases:
        args = [_materialize(a) for a in case.args]
        kwargs = {k: _materialize(v) for k, v in case.kwargs.items()}
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        plain = [None if isinstance(a, torch.Tensor) else a for a in args]

        def fn(*ts, plain=plain, kwargs=kwargs):
            it = iter(ts)
            return op(*[next(it) if p is None else p for p in plain], **kwargs)

        check_compiled(fn, tensors, GE_TYPES[name], kind="npu_ops")


COMPILED = {  # name -> (fn, args(dtype), GE type)
    "rms_norm_2d_gamma": (lambda x, g: npu.npu_rms_norm(x, g, 1e-5),
                          lambda d: (torch.randn(2, 3, 8).to(d), torch.randn(3, 8).to(d)), "RmsNorm"),
    "add_rms_norm": (lambda a, b, g: npu.npu_add_rms_norm(a, b, g, 1e-5),
                     lambda d: (torch.randn(4, 8).to(d), torch.randn(4, 8).to(d), torch.randn(8).to(d)), "AddRmsNorm"),
    "rotary_half": (lambda x, c, s: npu.npu_rotary_mul(x, c, s),
                    lambda d: (torch.randn(2, 3, 4, 8).to(d), torch.rand(1, 3, 1, 8).to(d),
                               torch.rand(1, 3, 1, 8).to(d)), "RotaryMul"),
    "swiglu_dim0": (lambda x: npu.npu_swiglu(x, 0), lambda d: (torch.randn(6, 5).to(d),), "SwiGlu"),
    "swiglu_last": (lambda x: npu.npu_swiglu(x), lambda d: (torch.randn(2, 3, 10).to(d),), "SwiGlu"),
}


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name", sorted(COMPILED))
def test_compiled_matches_eager(name, dtype):
    fn, make, ge_type = COMPILED[name]
    check_compiled(fn, make(dtype), ge_type, kind="npu_ops")


def test_compiled_dynamic_shapes():
    fn = lambda x, g: npu.npu_rms_norm(x, g)[0] + npu.npu_swiglu(torch.cat([x, x], -1))  # noqa: E731
    for rows in (3, 5, 7):
        check_compiled(fn, (torch.randn(rows, 8), torch.randn(8)), "SwiGlu", kind="npu_ops", dynamic=True)

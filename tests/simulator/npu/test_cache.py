"""torch_npu's KV-cache ops (npu/cache.py): eager == single-op graph,
bit for bit. Each eager op is an adapter over the GE kernel TorchAir's
converter lowers it to (``ge_op``), so the op called eagerly and compiled with npugraph (one node of that GE
type) must give the same bits, outputs and in-place arguments alike. Seeds: the valid calls of
``_npu_hostile_calls.VALID``.

npu_scatter_pa_kv_cache and npu_kv_rmsnorm_rope_cache (issue 23): the CPU kernels against loops written
from CANN's docs (slot -> block, offset; RMS norm and the interleaved rope written element by element), the
in-place forms functionalized through their ``_functional`` twins, and npugraph runs (TorchAir:
TensorMove + ScatterPaKvCache, KvRmsNormRopeCache) with the caches as graph inputs against eager.

npu_scatter_list (CANN ScatterList): eager against an element-by-element loop over the README's windows, and
compiled (TorchAir's converter: TensorMove copies + the ScatterList GE kernel) against eager; its shape checks
(indices [n] or [n, 2], each tensor one dim fewer than updates) are the GE kernel's, so a graph node refuses them too.

The KV RMS norm + rope (v1 and the kv-separated v2) also against ``oracles.kv_rmsnorm_rope`` (the formula the
op's eager kernel computed before it became an adapter, float32 inside) at the npu_ops tolerances."""
import math

import pytest
import torch

from op_plugin._simulator import capture_graphs
from op_plugin._testing_harness import Npugraph, assert_close, check_compiled, run_node

from .._npu_hostile_calls import VALID
from . import oracles
from .graph_equal import assert_op_eager_equals_graph

pytestmark = pytest.mark.usefixtures("torchair")

GE_TYPES = {
    "npu_scatter_pa_kv_cache": "ScatterPaKvCache",
    "npu_scatter_pa_kv_cache_functional": "ScatterPaKvCache",
    "npu_kv_rmsnorm_rope_cache": "KvRmsNormRopeCache",
    "npu_kv_rmsnorm_rope_cache_v2": "KvRmsNormRopeCache",
    "npu_kv_rmsnorm_rope_cache_v2_functional": "KvRmsNormRopeCache",
    "npu_scatter_list": "ScatterList",
}


@pytest.mark.parametrize("name", sorted(GE_TYPES))
def test_eager_equals_single_op_graph(name):
    assert_op_eager_equals_graph(name, GE_TYPES[name], VALID[name])


# ---- moved from tests/simulator/test_npu_ops_kv_cache.py ----

npu = torch.ops.npu
F16, BF16, F32 = torch.float16, torch.bfloat16, torch.float32


def _paged_oracle(cache, tokens, slots, mode):
    """Token t's values at slot s: Norm cache[s // bs, s % bs] = token; PA_NZ: the flattened token in rows
    of L = 32 / itemsize, row r at cache[s // bs, r, s % bs] (4-D) / cache[s // bs, h, r, s % bs] (5-D)."""
    out = cache.clone()
    for t, s in enumerate(slots.tolist()):
        if mode == "Norm":
            bs = cache.shape[1]
            out[s // bs, s % bs] = tokens[t]
            continue
        bs, width = cache.shape[-2], cache.shape[-1]
        flat = tokens[t].reshape(-1)
        for i in range(flat.numel()):
            if cache.dim() == 4:
                out[s // bs, i // width, s % bs, i % width] = flat[i]
            else:
                per_head = cache.shape[2] * width
                h, j = divmod(i, per_head)
                out[s // bs, h, j // width, s % bs, j % width] = flat[i]
    return out


CASES = {  # name: (mode, key cache shape, value cache shape, tokens, heads, k size, v size, dtype)
    "norm": ("Norm", (3, 4, 2, 8), (3, 4, 2, 6), 5, 2, 8, 6, F32),
    "nz_fp16": ("PA_NZ", (2, 4, 4, 16), (2, 8, 4, 16), 3, 2, 32, 64, F16),
    "nz_fp16_5d": ("PA_NZ", (2, 2, 2, 4, 16), (2, 2, 1, 4, 16), 3, 2, 32, 16, F16),
    "nz_fp32": ("PA_NZ", (2, 2, 4, 8), (2, 2, 4, 8), 4, 1, 16, 16, F32),
}


def _pa_args(name, seed=0):
    mode, kshape, vshape, tokens, heads, ks, vs, dtype = CASES[name]
    g = torch.Generator().manual_seed(seed)
    key = torch.randn(tokens, heads, ks, generator=g).to(dtype)
    value = torch.randn(tokens, heads, vs, generator=g).to(dtype)
    capacity = kshape[0] * kshape[-2 if mode == "PA_NZ" else 1]
    slots = torch.randperm(capacity, generator=g)[:tokens].int()
    return (key, value, torch.randn(kshape, generator=g).to(dtype), torch.randn(vshape, generator=g).to(dtype),
            slots), mode


@pytest.mark.parametrize("name", sorted(CASES))
def test_scatter_pa_kv_cache(name):
    (key, value, kc, vc, slots), mode = _pa_args(name)
    want_k, want_v = _paged_oracle(kc, key, slots, mode), _paged_oracle(vc, value, slots, mode)
    got_k, got_v = npu.npu_scatter_pa_kv_cache_functional(key, value, kc, vc, slots, cache_mode=mode)
    assert torch.equal(got_k, want_k) and torch.equal(got_v, want_v)
    assert not torch.equal(kc, want_k)  # the functional form leaves its inputs alone
    assert npu.npu_scatter_pa_kv_cache(key, value, kc, vc, slots.long(), cache_mode=mode) is None
    assert torch.equal(kc, want_k) and torch.equal(vc, want_v)


def test_scatter_pa_kv_cache_refusals():
    (key, value, kc, vc, slots), _ = _pa_args("norm")
    with pytest.raises(ValueError, match="outside"):
        npu.npu_scatter_pa_kv_cache(key, value, kc, vc, slots * 0 + 12, cache_mode="Norm")
    with pytest.raises(ValueError, match="twice"):
        npu.npu_scatter_pa_kv_cache(key, value, kc, vc, slots * 0, cache_mode="Norm")
    with pytest.raises(NotImplementedError, match="compressed"):
        npu.npu_scatter_pa_kv_cache(key, value, kc, vc, slots, seq_lens=slots, cache_mode="Norm")
    # the default mode wants the NZ shape; a Norm-layout cache is told the fix (issue 37, item 7)
    with pytest.raises(ValueError, match=r"PA_NZ takes .*has the Norm layout .*pass cache_mode=\"Norm\""):
        npu.npu_scatter_pa_kv_cache(key, value, kc, vc, slots)


@pytest.mark.parametrize("name", ["norm", "nz_fp16"])
def test_scatter_pa_kv_cache_compiled_updates_the_caller_caches(name):
    (key, value, kc, vc, slots), mode = _pa_args(name, seed=3)

    def step(key, value, kc, vc, slots):
        npu.npu_scatter_pa_kv_cache(key, value, kc, vc, slots, cache_mode=mode)
        return kc.float().sum(), vc * 2

    eager = [t.clone() for t in (key, value, kc, vc, slots)]
    want = step(*eager)
    graph = [t.clone() for t in (key, value, kc, vc, slots)]
    with capture_graphs() as graphs:
        got = Npugraph(step)(*graph)
    assert_close(got, want, "npu_ops")
    assert torch.equal(graph[2], eager[2]) and torch.equal(graph[3], eager[3])
    assert "ScatterPaKvCache" in {op.type for g in graphs for op in g.op}


def test_a_norm_layout_cache_without_cache_mode_is_told_the_fix_in_graph_mode_too():
    """Issue 37: the default cache_mode is PA_NZ; a Norm-layout cache [blocks, block_size, N, D] (vllm-ascend's)
    gets the same hint compiled as eagerly: the refusal is the GE kernel's, named by its node."""
    (key, value, kc, vc, slots), _ = _pa_args("norm")
    hint = (r"PA_NZ takes .*has the Norm layout \[num_blocks, block_size, num_head, head_size\]"
            r".*pass cache_mode=\"Norm\"")

    def step(key, value, kc, vc, slots):
        npu.npu_scatter_pa_kv_cache(key, value, kc, vc, slots)
        return kc * 1

    with pytest.raises(Exception, match=hint) as compiled:
        Npugraph(step)(key, value, kc.clone(), vc.clone(), slots)
    assert "ScatterPaKvCache" in str(compiled.value)
    with pytest.raises(ValueError, match=hint) as eager:
        step(key, value, kc.clone(), vc.clone(), slots)
    assert "npu_scatter_pa_kv_cache" in str(eager.value)
    # a PA_NZ cache of the wrong shape that is not the Norm layout gets no such hint
    with pytest.raises(ValueError, match="PA_NZ takes") as other:
        npu.npu_scatter_pa_kv_cache(key, value, kc[..., :4].contiguous(), vc, slots)
    assert "Norm layout" not in str(other.value)


def test_scatter_pa_kv_cache_node_refuses_the_compressed_scenario():
    (key, value, kc, vc, slots), _ = _pa_args("norm")
    with pytest.raises(Exception, match="compressed") as error:
        run_node("ScatterPaKvCache", {"key": key, "key_cache": kc, "slot_mapping": slots, "value": value,
                                      "value_cache": vc, "seq_lens": slots}, 2, name="pa", cache_mode="Norm")
    assert "pa" in str(error.value)


def _rms_rope_oracle(kv, gamma, cos, sin, epsilon):
    """c_kv and k_rope element by element, from CANN's formulas (float64)."""
    b_, _, s_, d = kv.shape
    dv = gamma.numel()
    dk = d - dv
    c_kv, k_rope = torch.zeros(b_, 1, s_, dv, dtype=torch.float64), torch.zeros(b_, 1, s_, dk, dtype=torch.float64)
    for b in range(b_):
        for s in range(s_):
            row = kv[b, 0, s].double()
            rms = math.sqrt(sum(float(v) ** 2 for v in row[:dv]) / dv + epsilon)
            c_kv[b, 0, s] = row[:dv] / rms * gamma.double()
            x = row[dv:]
            part1 = [float(x[2 * i]) for i in range(dk // 2)] + [float(x[2 * i + 1]) for i in range(dk // 2)]
            part2 = [-float(x[2 * i + 1]) for i in range(dk // 2)] + [float(x[2 * i]) for i in range(dk // 2)]
            c, sn = cos[b, 0, s if cos.shape[2] > 1 else 0].double(), sin[b, 0, s if sin.shape[2] > 1 else 0].double()
            k_rope[b, 0, s] = torch.tensor(part1, dtype=torch.float64) * c + torch.tensor(part2,
                                                                                         dtype=torch.float64) * sn
    return k_rope.to(kv.dtype), c_kv.to(kv.dtype)


def _kv_args(mode, dtype=F16, seed=0, batch=2, seq=3):
    g = torch.Generator().manual_seed(seed)
    dv, dk = 16, 8
    kv = torch.randn(batch, 1, seq, dv + dk, generator=g).to(dtype)
    gamma = torch.rand(dv, generator=g).to(dtype) + 0.5
    cos, sin = (torch.rand(batch, 1, seq, dk, generator=g).to(dtype) for _ in range(2))
    if mode == "Norm":
        kc, ckc = (torch.randn(batch, 1, 5, d, generator=g).to(dtype) for d in (dk, dv))
        index = torch.stack([torch.randperm(5, generator=g)[:seq] for _ in range(batch)])
        index[0, 1] = -1  # skipped
    else:
        kc, ckc = torch.randn(3, 4, 1, dk, generator=g).to(dtype), torch.randn(3, 4, 1, dv, generator=g).to(dtype)
        index = torch.randperm(12, generator=g)[:batch * seq]
        index[2] = -1
    return kv, gamma, cos, sin, index, kc, ckc


def _cache_oracle(kc, ckc, index, k_rope, c_kv, mode):
    kc, ckc = kc.clone(), ckc.clone()
    batch, _, seq, _ = k_rope.shape
    for b in range(batch):
        for s in range(seq):
            if mode == "Norm":
                i = int(index[b, s])
                if i >= 0:
                    kc[b, 0, i], ckc[b, 0, i] = k_rope[b, 0, s], c_kv[b, 0, s]
            else:
                i = int(index[b * seq + s])
                if i >= 0:
                    bs = kc.shape[1]
                    kc[i // bs, i % bs, 0], ckc[i // bs, i % bs, 0] = k_rope[b, 0, s], c_kv[b, 0, s]
    return kc, ckc


@pytest.mark.parametrize("dtype", (F16, BF16))
@pytest.mark.parametrize("mode", ["Norm", "PA", "PA_BNSD", "PA_NZ"])
def test_kv_rmsnorm_rope_cache(mode, dtype):
    kv, gamma, cos, sin, index, kc, ckc = _kv_args(mode, dtype)
    want_rope, want_ckv = _rms_rope_oracle(kv, gamma, cos, sin, 1e-5)
    want_kc, want_ckc = _cache_oracle(kc, ckc, index, want_rope, want_ckv, mode)
    k_rope, c_kv, new_kc, new_ckc = npu.npu_kv_rmsnorm_rope_cache_v2_functional(
        kv, gamma, cos, sin, index, kc, ckc, cache_mode=mode, is_output_kv=True)
    assert_close((k_rope, c_kv), (want_rope, want_ckv), "npu_ops")
    assert_close((new_kc, new_ckc), (want_kc, want_ckc), "npu_ops")
    k_rope2, c_kv2 = npu.npu_kv_rmsnorm_rope_cache_v2(kv, gamma, cos, sin, index, kc, ckc, cache_mode=mode)
    assert torch.equal(kc, new_kc) and torch.equal(ckc, new_ckc) and torch.equal(k_rope2, k_rope)


def test_kv_rmsnorm_rope_cache_v1_updates_its_caches_in_place_and_returns_copies():
    kv, gamma, cos, sin, index, kc, ckc = _kv_args("PA_NZ")
    before = kc.clone()
    out = npu.npu_kv_rmsnorm_rope_cache(kv, gamma, cos, sin, index, kc, ckc, cache_mode="PA_NZ")
    assert not torch.equal(kc, before) and torch.equal(out[0], kc) and out[0].data_ptr() != kc.data_ptr()


def test_kv_rmsnorm_rope_cache_refusals():
    kv, gamma, cos, sin, index, kc, ckc = _kv_args("PA")
    with pytest.raises(ValueError, match="int8 but its scale is not fed"):
        npu.npu_kv_rmsnorm_rope_cache_v2(kv, gamma, cos, sin, index, kc.to(torch.int8), ckc, cache_mode="PA")
    with pytest.raises(NotImplementedError, match="scale/offset with a torch.float16 k_cache is not simulated"):
        npu.npu_kv_rmsnorm_rope_cache_v2(kv, gamma, cos, sin, index, kc, ckc, cache_mode="PA",
                                         k_rope_scale=torch.ones(8))
    with pytest.raises(NotImplementedError, match="PA_BLK"):
        npu.npu_kv_rmsnorm_rope_cache_v2(kv, gamma, cos, sin, index, kc, ckc, cache_mode="PA_BLK_NZ")
    with pytest.raises(NotImplementedError, match="hifloat8"):
        npu.npu_kv_rmsnorm_rope_cache_v2(kv, gamma, cos, sin, index, kc, ckc, cache_mode="PA", k_cache_dtype=290)
    with pytest.raises(ValueError, match="npu_kv_rmsnorm_rope_cache_v2: a index value is outside"):
        npu.npu_kv_rmsnorm_rope_cache_v2(kv, gamma, cos, sin, index + 12, kc, ckc, cache_mode="PA")


@pytest.mark.parametrize("mode", ["Norm", "PA_BNSD"])
def test_kv_rmsnorm_rope_cache_v2_compiled_with_caches_as_graph_inputs(mode):
    def step(kv, gamma, cos, sin, index, kc, ckc):
        k_rope, c_kv = npu.npu_kv_rmsnorm_rope_cache_v2(kv, gamma, cos, sin, index, kc, ckc, cache_mode=mode,
                                                        is_output_kv=True)
        return k_rope + 1, c_kv * 2

    args = _kv_args(mode, seed=5)
    eager = [t.clone() for t in args]
    want = step(*eager)
    graph = [t.clone() for t in args]
    with capture_graphs() as graphs:
        got = Npugraph(step)(*graph)
    assert_close(got, want, "npu_ops")
    assert torch.equal(graph[5], eager[5]) and torch.equal(graph[6], eager[6])
    assert "KvRmsNormRopeCache" in {op.type for g in graphs for op in g.op}


def test_kv_rmsnorm_rope_cache_v1_compiled_writes_the_caches_as_an_npu_does():
    """v1 declares no mutation, but its converter feeds the graph's cache inputs to KvRmsNormRopeCache
    directly (no TensorMove): GE writes them in place, as eager does on an NPU."""
    def step(kv, gamma, cos, sin, index, kc, ckc):
        return npu.npu_kv_rmsnorm_rope_cache(kv, gamma, cos, sin, index, kc, ckc, cache_mode="PA")[2] + 0

    args = _kv_args("PA", seed=7)
    eager = [t.clone() for t in args]
    want = step(*eager)
    graph = [t.clone() for t in args]
    got = Npugraph(step)(*graph)
    assert_close(got, want, "npu_ops")
    assert torch.equal(graph[5], eager[5]) and torch.equal(graph[6], eager[6])


def test_functionalization_of_the_multi_output_in_place_ops():
    functionalized = torch._C._dispatch_get_registrations_for_dispatch_key("Functionalize")
    for op in ("npu_scatter_pa_kv_cache", "npu_kv_rmsnorm_rope_cache_v2"):
        assert f"npu::{op}" in functionalized


def test_kv_rmsnorm_rope_cache_v1_as_vllm_ascend_decodes():
    """vllm-ascend's MLA decode (exec_kv): kv [B, 1, 1, D], cache_mode PA, `k_pe, k_nope, _, _ = ...`: the
    graph returns the updated caches AND the caller's caches hold the write, as GE's in-place ref op does."""
    def step(kv, gamma, cos, sin, slots, kc, ckc):
        k_pe, k_nope, _, _ = npu.npu_kv_rmsnorm_rope_cache(kv, gamma, cos, sin, slots, kc, ckc, cache_mode="PA")
        return k_pe, k_nope

    def make():
        g = torch.Generator().manual_seed(11)
        kv = torch.randn(3, 1, 1, 40, generator=g).half()
        cos, sin = (torch.rand(3, 1, 1, 8, generator=g).half() for _ in range(2))
        return [kv, torch.rand(32, generator=g).half() + 0.5, cos, sin, torch.tensor([5, 17, 40]),
                torch.zeros(4, 16, 1, 8).half(), torch.zeros(4, 16, 1, 32).half()]

    eager, graph = make(), make()
    want = step(*eager)
    got = Npugraph(step)(*graph)
    assert_close(got, want, "npu_ops")
    assert torch.equal(graph[5], eager[5]) and torch.equal(graph[6], eager[6])
    assert bool(graph[5].abs().sum() > 0)


def test_scatter_pa_kv_cache_compiled_dynamic_token_counts():
    def step(key, value, kc, vc, slots):
        npu.npu_scatter_pa_kv_cache(key, value, kc, vc, slots, cache_mode="Norm")
        return kc + 0

    compiled = Npugraph(step, dynamic=True)
    for tokens in (5, 7, 9):  # no size shared with another dim (dynamo's duck sizing would tie them)
        key, value = torch.randn(tokens, 2, 8), torch.randn(tokens, 2, 6)
        slots = torch.randperm(12)[:tokens].int()
        eager = [key, value, torch.randn(3, 4, 2, 8), torch.randn(3, 4, 2, 6), slots]
        graph = [t.clone() for t in eager]
        want = step(*eager)
        assert_close(compiled(*graph), want, "npu_ops")
        assert torch.equal(graph[2], eager[2]) and torch.equal(graph[3], eager[3])
    assert compiled.compiles == 1  # one graph serves every token count


def _v2_oracle(kv, gamma, cos, sin, v, epsilon):
    """CANN's V2 (kv-separated) formulas element by element in float64: RMSNorm over all of kv, the
    interleaved rope on its first cos.shape[-1] dims, the rest passed on; c_kv = v."""
    batch, heads, seq, width = kv.shape
    rope = cos.shape[-1]
    k_rope = torch.zeros(batch, heads, seq, width, dtype=torch.float64)
    for b in range(batch):
        for n in range(heads):
            for s in range(seq):
                row = [float(t) for t in kv[b, n, s]]
                rms = math.sqrt(sum(t * t for t in row) / width + epsilon)
                normed = [row[i] / rms * float(gamma[i]) for i in range(width)]
                half = rope // 2
                c, sn = cos[b, n if cos.shape[1] > 1 else 0, s if cos.shape[2] > 1 else 0], \
                    sin[b, n if sin.shape[1] > 1 else 0, s if sin.shape[2] > 1 else 0]
                part1 = [normed[2 * i] for i in range(half)] + [normed[2 * i + 1] for i in range(half)]
                part2 = [-normed[2 * i + 1] for i in range(half)] + [normed[2 * i] for i in range(half)]
                for i in range(rope):
                    k_rope[b, n, s, i] = part1[i] * float(c[i]) + part2[i] * float(sn[i])
                for i in range(rope, width):
                    k_rope[b, n, s, i] = normed[i]
    return k_rope.to(kv.dtype), v.clone()


def _quant_oracle(values, scale, offset):
    x = values.double().transpose(1, 2) * scale.double() + (offset.double() if offset is not None else 0)
    return x.round().clamp(-128, 127).to(torch.int8).transpose(1, 2)


def _v2_args(mode, seed=0, heads=2, quant=False):
    g = torch.Generator().manual_seed(seed)
    batch, seq, width, dv, rope = 2, 3, 24, 16, 8
    kv = torch.randn(batch, heads, seq, width, generator=g).half()
    v = torch.randn(batch, heads, seq, dv, generator=g).half()
    gamma = (torch.rand(width, generator=g) + 0.5).half()
    cos, sin = (torch.rand(batch, heads, 1, rope, generator=g).half() for _ in range(2))
    cache_dtype = torch.int8 if quant else torch.float16
    if mode == "Norm":
        kc, ckc = (torch.zeros(batch, heads, 5, d).to(cache_dtype) for d in (width, dv))
        index = torch.stack([torch.randperm(5, generator=g)[:seq] for _ in range(batch)])
    else:
        kc, ckc = (torch.zeros(3, 4, heads, d).to(cache_dtype) for d in (width, dv))
        index = torch.randperm(12, generator=g)[:batch * seq]
    index.view(-1)[1] = -1
    scales = {}
    if quant:
        scales = {"k_rope_scale": torch.rand(heads, width, generator=g) * 40 + 10,
                  "c_kv_scale": torch.rand(heads, dv, generator=g) * 40 + 10,
                  "k_rope_offset": torch.randn(heads, width, generator=g)}
    return (kv, gamma, cos, sin, index, kc, ckc), {"v": v, **scales}


@pytest.mark.parametrize("quant", [False, True])
@pytest.mark.parametrize("mode", ["Norm", "PA_BNSD"])
def test_kv_rmsnorm_rope_cache_v2_separated_kv_and_int8_caches(mode, quant):
    args, kwargs = _v2_args(mode, quant=quant)
    kv, gamma, cos, sin, index, kc, ckc = args
    want_rope, want_ckv = _v2_oracle(kv, gamma, cos, sin, kwargs["v"], 1e-5)
    stored_k, stored_ckv = want_rope, want_ckv
    if quant:
        stored_k = _quant_oracle(want_rope, kwargs["k_rope_scale"], kwargs["k_rope_offset"])
        stored_ckv = _quant_oracle(want_ckv, kwargs["c_kv_scale"], None)
    want_kc, want_ckc = _cache_oracle_heads(kc, ckc, index, stored_k, stored_ckv, mode)
    k_rope, c_kv, new_kc, new_ckc = npu.npu_kv_rmsnorm_rope_cache_v2_functional(*args, cache_mode=mode, **kwargs)
    assert_close((k_rope, c_kv), (want_rope, want_ckv), "npu_ops")
    for got, want in ((new_kc, want_kc), (new_ckc, want_ckc)):
        if quant:  # float32 in the kernel, float64 here: a value on a .5 boundary may round the other way
            assert got.dtype == torch.int8 and (got.int() - want.int()).abs().max() <= 1
            assert (got == want).float().mean() > 0.98
        else:
            assert torch.equal(got, want)

    def step(*a):
        k_rope, c_kv = npu.npu_kv_rmsnorm_rope_cache_v2(*a, cache_mode=mode, is_output_kv=True, **kwargs)
        return k_rope * 2, c_kv + 1

    eager, graph = [t.clone() for t in args], [t.clone() for t in args]
    want_out = step(*eager)
    assert_close(Npugraph(step)(*graph), want_out, "npu_ops")
    assert torch.equal(graph[5], eager[5]) and torch.equal(graph[6], eager[6])


def _cache_oracle_heads(kc, ckc, index, k_rows, ckv_rows, mode):
    kc, ckc = kc.clone(), ckc.clone()
    batch, heads, seq, _ = k_rows.shape
    for b in range(batch):
        for s in range(seq):
            i = int(index[b, s]) if mode == "Norm" else int(index[b * seq + s])
            if i < 0:
                continue
            for n in range(heads):
                if mode == "Norm":
                    kc[b, n, i], ckc[b, n, i] = k_rows[b, n, s], ckv_rows[b, n, s]
                else:
                    bs = kc.shape[1]
                    kc[i // bs, i % bs, n], ckc[i // bs, i % bs, n] = k_rows[b, n, s], ckv_rows[b, n, s]
    return kc, ckc


# ---- moved from tests/simulator/test_npu_ops_scatter_list.py ----

def _oracle(var, indices, updates, mask):
    out = [t.clone() for t in var]
    for i, tensor in enumerate(out):
        if mask is not None and int(mask[i]) == 0:
            continue
        start, rows = (int(indices[i][0]), min(int(indices[i][1]), updates.shape[2])) if indices.dim() == 2 \
            else (int(indices[i]), updates.shape[2])
        for b in range(tensor.shape[0]):
            for r in range(rows):
                for d in range(tensor.shape[2]):
                    tensor[b, start + r, d] = updates[i, b, r, d]
    return out


@pytest.mark.parametrize("two_d", [False, True])
@pytest.mark.parametrize("with_mask", [False, True])
def test_scatter_list_writes_each_window(two_d, with_mask):
    var = [torch.randn(2, 6, 4) for _ in range(3)]
    updates = torch.randn(3, 2, 2, 4)
    indices = torch.tensor([[0, 2], [4, 1], [3, 2]] if two_d else [0, 4, 3], dtype=torch.int32)
    mask = torch.tensor([1, 0, 7], dtype=torch.uint8) if with_mask else None
    before = [t.clone() for t in var]
    got = npu.npu_scatter_list(var, indices, updates, mask)
    for g, w in zip(got, _oracle(before, indices, updates, mask), strict=True):
        assert torch.equal(g, w)
    assert all(torch.equal(a, b) for a, b in zip(var, before, strict=True))   # out of place


def test_scatter_list_refuses_out_of_range_windows():
    var = [torch.zeros(1, 4, 2)]
    with pytest.raises(ValueError, match=r"npu_scatter_list: var\[0\]'s window \[-1, 1\)"):
        npu.npu_scatter_list(var, torch.tensor([-1], dtype=torch.int32), torch.ones(1, 1, 2, 2))
    with pytest.raises(ValueError, match=r"window \[3, 5\)"):
        npu.npu_scatter_list(var, torch.tensor([3], dtype=torch.int32), torch.ones(1, 1, 2, 2))


def test_scatter_list_compiled():
    var = [torch.randn(2, 8, 4).half() for _ in range(4)]
    updates = torch.randn(4, 2, 3, 4).half()
    indices = torch.tensor([0, 5, 2, 1], dtype=torch.int32)
    mask = torch.tensor([1, 1, 0, 1], dtype=torch.uint8)
    check_compiled(lambda a, b, c, d, i, u, m: npu.npu_scatter_list([a, b, c, d], i, u, m),
                   (*var, indices, updates, mask), "ScatterList", kind="npu_ops")


# ---- ScatterList's shape checks live in its GE kernel: the eager op and a graph refuse alike ----

SCATTER_LIST_BAD_SHAPES = {  # name -> (var, indices, updates, error match)
    "indices_not_n_by_2": ([torch.zeros(1, 4, 2)], torch.tensor([[0, 1, 2]], dtype=torch.int32),
                           torch.ones(1, 1, 2, 2), r"indice \[1, 3\] must be \[1\] or \[1, 2\]"),
    "var_rank": ([torch.zeros(4, 2)], torch.tensor([0], dtype=torch.int32), torch.ones(1, 1, 2, 2),
                 r"var\[0\] \[4, 2\] must have one dim fewer than updates \[1, 1, 2, 2\]"),
}


@pytest.mark.parametrize("name", sorted(SCATTER_LIST_BAD_SHAPES))
def test_scatter_list_node_refuses_bad_shapes(name):
    var, indices, updates, match = SCATTER_LIST_BAD_SHAPES[name]
    with pytest.raises(Exception, match=match) as error:
        run_node("ScatterList", {"var": var, "indice": indices, "updates": updates}, len(var), name="scatter",
                 reduce="update", axis=-2)
    assert "scatter" in str(error.value)
    with pytest.raises(ValueError, match="npu::npu_scatter_list: " + match):
        npu.npu_scatter_list(var, indices, updates)


# ---- the KV RMS norm + rope against its formula (tests/simulator/npu/oracles.py), at the npu_ops tolerances ----

@pytest.mark.parametrize("dtype", (F16, BF16))
@pytest.mark.parametrize("mode", ["Norm", "PA", "PA_BNSD", "PA_NZ"])
def test_kv_rmsnorm_rope_cache_matches_the_oracle(mode, dtype):
    kv, gamma, cos, sin, index, kc, ckc = _kv_args(mode, dtype, seed=2)
    want_rope, want_ckv = oracles.kv_rmsnorm_rope(kv, gamma, cos, sin, epsilon=1e-5)
    want_kc, want_ckc = _cache_oracle(kc, ckc, index, want_rope, want_ckv, mode)
    got = npu.npu_kv_rmsnorm_rope_cache(kv, gamma, cos, sin, index, kc.clone(), ckc.clone(), cache_mode=mode,
                                        is_output_kv=True)
    assert_close(tuple(got[2:]), (want_rope, want_ckv), "npu_ops")
    assert_close(tuple(got[:2]), (want_kc, want_ckc), "npu_ops")


@pytest.mark.parametrize("heads", [1, 2, 4])
@pytest.mark.parametrize("mode", ["Norm", "PA_BNSD"])
def test_kv_rmsnorm_rope_cache_v2_separated_kv_matches_the_oracle(mode, heads):
    args, kwargs = _v2_args(mode, seed=4, heads=heads)
    kv, gamma, cos, sin, index, kc, ckc = args
    want_rope, want_ckv = oracles.kv_rmsnorm_rope(kv, gamma, cos, sin, kwargs["v"], 1e-5)
    want_kc, want_ckc = _cache_oracle_heads(kc, ckc, index, want_rope, want_ckv, mode)
    k_rope, c_kv, new_kc, new_ckc = npu.npu_kv_rmsnorm_rope_cache_v2_functional(*args, cache_mode=mode, **kwargs)
    assert_close((k_rope, c_kv), (want_rope, want_ckv), "npu_ops")
    assert_close((new_kc, new_ckc), (want_kc, want_ckc), "npu_ops")
    assert c_kv.data_ptr() != kwargs["v"].data_ptr()

"""Zoo graph (i) of issue 23: one decoder layer's decode step written as vllm-ascend's GE-mode (TorchAir)
backend writes it: npu_add_rms_norm, a fused QKV projection, npu_apply_rotary_pos_emb (BSND), the new
tokens' keys and values written into a paged cache with npu_scatter_nd_update_ at (slot // block_size,
slot % block_size), npu_fused_infer_attention_score over the cache with block_table, block_size and
actual_seq_lengths_kv (BSH, GQA) -- or npu_incre_flash_attention with the same arguments, which is what
vllm-ascend's TorchAir attention backend calls for decode -- the output projection, npu_add_rms_norm
and a npu_swiglu MLP.

The caches are module buffers the step updates in place ((num_blocks, block_size, KV_N * D): the
layout CANN documents for a BSH query). Compiled with backend="npugraph" in GE mode (static, and
dynamic=True over several steps) and in aclgraph mode, every step must give eager's hidden states and
leave the caches as eager leaves them; eager itself is checked once against the same layer written in
plain torch (no torch_npu op), computed on CPU tensors.

With --zoo-device npu the layer, its caches and the step's tensors live on the virtual NPU (eager on its
kernels, the graphs on npu tensors, the aclgraph mode captured into torch.npu.NPUGraph and replayed)."""
import pytest
import torch
import torch._dynamo.testing

import op_plugin
from op_plugin._simulator import capture_graphs, load_torchair
from op_plugin._testing_harness import assert_close

npu = torch.ops.npu
F16 = torch.float16
HIDDEN, HEADS, KV_HEADS, HEAD_DIM, INTER = 64, 4, 2, 16, 48
BLOCK, BLOCKS, MAX_BLOCKS = 16, 20, 3
EPS = 1e-6  # written as a literal in the step: dynamo makes a float read from a name symbolic and restarts
ATTENTION_TYPES = {"fused": "FusedInferAttentionScore", "incre": "IncreFlashAttention"}
GE_TYPES = ["AddRmsNorm", "ApplyRotaryPosEmb", "ScatterNdUpdate", "SwiGlu"]


@pytest.fixture(scope="module", autouse=True)
def torch_npu_ops():
    load_torchair()  # defines torch_npu's ops on this CPU host


class DecodeStep(torch.nn.Module):
    def __init__(self, attention="fused"):
        super().__init__()
        self.attention = attention  # "incre": npu_incre_flash_attention, as vllm-ascend's TorchAir backend decodes
        g = torch.Generator().manual_seed(0)

        def weight(*shape, std=0.08):
            return torch.nn.Parameter((torch.randn(*shape, generator=g) * std).to(F16), requires_grad=False)

        self.input_norm, self.post_norm = weight(HIDDEN, std=1.0), weight(HIDDEN, std=1.0)
        self.qkv = weight((HEADS + 2 * KV_HEADS) * HEAD_DIM, HIDDEN)
        self.o_proj = weight(HIDDEN, HEADS * HEAD_DIM)
        self.gate_up = weight(2 * INTER, HIDDEN)
        self.down = weight(HIDDEN, INTER)
        cache = (BLOCKS, BLOCK, KV_HEADS * HEAD_DIM)
        self.register_buffer("key_cache", torch.randn(cache, generator=g).to(F16))
        self.register_buffer("value_cache", torch.randn(cache, generator=g).to(F16))

    def forward(self, hidden, residual, cos, sin, slots, block_table, seq_lens):
        tokens = hidden.shape[0]
        x, _, residual = npu.npu_add_rms_norm(hidden, residual, self.input_norm, 1e-6)
        q, k, v = torch.nn.functional.linear(x, self.qkv).split(
            [HEADS * HEAD_DIM, KV_HEADS * HEAD_DIM, KV_HEADS * HEAD_DIM], dim=-1)
        q, k = npu.npu_apply_rotary_pos_emb(q.reshape(tokens, 1, HEADS, HEAD_DIM),
                                            k.reshape(tokens, 1, KV_HEADS, HEAD_DIM), cos, sin)
        indices = torch.stack([slots // BLOCK, slots % BLOCK], dim=1)
        npu.npu_scatter_nd_update_(self.key_cache, indices, k.reshape(tokens, KV_HEADS * HEAD_DIM))
        npu.npu_scatter_nd_update_(self.value_cache, indices, v.reshape(tokens, KV_HEADS * HEAD_DIM))
        query = q.reshape(tokens, 1, HEADS * HEAD_DIM)
        if self.attention == "incre":
            attn = npu.npu_incre_flash_attention(
                query, self.key_cache, self.value_cache, num_heads=HEADS, num_key_value_heads=KV_HEADS,
                input_layout="BSH", scale_value=HEAD_DIM ** -0.5, block_table=block_table, block_size=BLOCK,
                actual_seq_lengths=seq_lens)
        else:
            attn, _ = npu.npu_fused_infer_attention_score(
                query, self.key_cache, self.value_cache, num_heads=HEADS, num_key_value_heads=KV_HEADS,
                input_layout="BSH", scale=HEAD_DIM ** -0.5, block_table=block_table, block_size=BLOCK,
                actual_seq_lengths_kv=seq_lens)
        out = torch.nn.functional.linear(attn.reshape(tokens, HEADS * HEAD_DIM), self.o_proj)
        x, _, residual = npu.npu_add_rms_norm(out, residual, self.post_norm, 1e-6)
        return torch.nn.functional.linear(npu.npu_swiglu(torch.nn.functional.linear(x, self.gate_up)), self.down), \
            residual


def plain_step(layer, hidden, residual, cos, sin, slots, block_table, seq_lens):
    """The same step in plain torch, float32 (key/value caches updated on copies, returned)."""
    f = {name: t.float() for name, t in layer.named_parameters()}
    k_cache, v_cache = layer.key_cache.float().clone(), layer.value_cache.float().clone()

    def rms(x, gamma):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS) * gamma

    def rotate(x):  # "half" rotary: cat(-x2, x1)
        x1, x2 = x.chunk(2, dim=-1)
        return x * cos.float() + torch.cat([-x2, x1], dim=-1) * sin.float()

    residual = hidden.float() + residual.float()
    qkv = rms(residual, f["input_norm"]) @ f["qkv"].T
    q = rotate(qkv[:, :HEADS * HEAD_DIM].reshape(-1, 1, HEADS, HEAD_DIM))
    k = rotate(qkv[:, HEADS * HEAD_DIM:(HEADS + KV_HEADS) * HEAD_DIM].reshape(-1, 1, KV_HEADS, HEAD_DIM))
    v = qkv[:, (HEADS + KV_HEADS) * HEAD_DIM:]
    outs = []
    for t, slot in enumerate(slots.tolist()):
        k_cache[slot // BLOCK, slot % BLOCK] = k[t].reshape(-1).half().float()  # the cache holds float16
        v_cache[slot // BLOCK, slot % BLOCK] = v[t].half().float()
    for t, length in enumerate(seq_lens):
        rows = [int(block_table[t, p // BLOCK]) * BLOCK + p % BLOCK for p in range(length)]
        keys = k_cache.reshape(-1, KV_HEADS, HEAD_DIM)[rows].transpose(0, 1)
        values = v_cache.reshape(-1, KV_HEADS, HEAD_DIM)[rows].transpose(0, 1)
        group = HEADS // KV_HEADS
        outs.append(torch.nn.functional.scaled_dot_product_attention(
            q[t, 0][:, None], keys.repeat_interleave(group, 0), values.repeat_interleave(group, 0),
            scale=HEAD_DIM ** -0.5).reshape(-1))
    residual = torch.stack(outs) @ f["o_proj"].T + residual
    gate, up = (rms(residual, f["post_norm"]) @ f["gate_up"].T).chunk(2, dim=-1)
    return (torch.nn.functional.silu(gate) * up) @ f["down"].T, residual, k_cache, v_cache


def _on(device, args):
    """`args` with its tensors on `device` (the sequence lengths stay a list of ints)."""
    return tuple(a.to(device) if isinstance(a, torch.Tensor) else a for a in args)


def _cpu(tensors):
    return torch.utils._pytree.tree_map_only(torch.Tensor, lambda t: t.cpu(), tensors)


def step_inputs(tokens, step, data=0):
    """A decode step for `tokens` sequences: each has (step + 5 + 3 * t) tokens, its last one new; the
    sequences' blocks are disjoint rows of a shuffled pool; `data` seeds the hidden states only."""
    g = torch.Generator().manual_seed(100 * tokens + step)
    seq_lens = [min(step + 5 + 3 * t, MAX_BLOCKS * BLOCK) for t in range(tokens)]
    pool = torch.randperm(BLOCKS, generator=g)[:tokens * MAX_BLOCKS].reshape(tokens, MAX_BLOCKS).to(torch.int32)
    slots = torch.tensor([int(pool[t, (n - 1) // BLOCK]) * BLOCK + (n - 1) % BLOCK for t, n in enumerate(seq_lens)])
    angle = torch.tensor(seq_lens, dtype=torch.float32)[:, None] * torch.linspace(0.1, 1.0, HEAD_DIM // 2)
    cos = torch.cat([angle.cos(), angle.cos()], -1).reshape(tokens, 1, 1, HEAD_DIM).to(F16)
    sin = torch.cat([angle.sin(), angle.sin()], -1).reshape(tokens, 1, 1, HEAD_DIM).to(F16)
    g = torch.Generator().manual_seed(1000 * data + 100 * tokens + step)
    hidden = torch.randn(tokens, HIDDEN, generator=g).to(F16)
    residual = torch.randn(tokens, HIDDEN, generator=g).to(F16)
    return (hidden, residual, cos, sin, slots, pool, seq_lens)


def _run_and_compare(compiled, steps, attention, device, check_types=False):
    """Each (tokens, step): the compiled layer and an eager twin from the same state, both on `device`."""
    eager, initial = DecodeStep(attention).to(device), DecodeStep().key_cache
    for tokens, step, data in steps:
        args = step_inputs(tokens, step, data)
        with torch.no_grad(), capture_graphs() as graphs:
            got = compiled(*_on(device, args))
            want = eager(*_on(device, args))
        assert {t.device.type for t in (*got, compiled.key_cache, compiled.value_cache)} == {device}
        assert_close(_cpu(got), _cpu(want), "npu_ops", what=f"hidden/residual, {tokens} tokens")
        assert_close(_cpu((compiled.key_cache, compiled.value_cache)), _cpu((eager.key_cache, eager.value_cache)),
                     "npu_ops", what="key/value cache")
        written = args[4]  # the new tokens' slots hold new keys: the comparison above is not of two untouched caches
        assert not torch.equal(compiled.key_cache.cpu().reshape(-1, KV_HEADS * HEAD_DIM)[written],
                               initial.reshape(-1, KV_HEADS * HEAD_DIM)[written])
        if check_types:
            types = {op.type for graph in graphs for op in graph.op}
            assert set(GE_TYPES + [ATTENTION_TYPES[attention]]) <= types, sorted(types)
            check_types = False


@pytest.mark.parametrize("attention", sorted(ATTENTION_TYPES))
def test_eager_step_matches_plain_torch(attention, zoo_device):
    layer = DecodeStep(attention)
    args = step_inputs(4, 20)  # 25 to 34 tokens: two and three blocks per sequence
    want = plain_step(layer, *args)  # on CPU tensors, before the step updates the caches
    layer.to(zoo_device)
    with torch.no_grad():
        got = layer(*_on(zoo_device, args))
    assert {t.device.type for t in (*got, layer.key_cache, layer.value_cache)} == {zoo_device}
    assert_close(_cpu(got), [w.half() for w in want[:2]], "npu_ops", scale=2, check_dtype=False)
    assert_close(_cpu((layer.key_cache, layer.value_cache)), [w.half() for w in want[2:]], "npu_ops")


def _compiled(module, backend, dynamic):
    torch._dynamo.reset()
    counter = torch._dynamo.testing.CompileCounterWithBackend(backend)
    return torch.compile(module, backend=counter, dynamic=dynamic), counter


@pytest.mark.parametrize("attention", sorted(ATTENTION_TYPES))
def test_ge_mode_static(attention, zoo_device):
    """Static shapes: dynamo specializes on the sequence lengths (a list of ints), so the same lengths run
    again without a compile; new lengths recompile."""
    compiled, counter = _compiled(DecodeStep(attention).to(zoo_device), "npugraph", dynamic=False)
    _run_and_compare(compiled, [(3, 0, 0), (3, 0, 1)], attention, zoo_device, check_types=True)
    assert counter.frame_count == 1, f"{counter.frame_count} compiles"


@pytest.mark.parametrize("attention", sorted(ATTENTION_TYPES))
def test_ge_mode_dynamic(attention, zoo_device):
    """dynamic=True: new sequence lengths and positions reuse the graph; dynamo guards on the length of the
    seq_lens list, so each batch size compiles once (vllm-ascend's GE mode compiles one graph per padded
    batch size too)."""
    compiled, counter = _compiled(DecodeStep(attention).to(zoo_device), "npugraph", dynamic=True)
    steps = [(2, 0, 0), (2, 13, 0), (4, 0, 0), (4, 20, 0), (5, 0, 0), (5, 30, 0)]
    _run_and_compare(compiled, steps, attention, zoo_device, check_types=True)
    assert counter.frame_count == 3, f"{counter.frame_count} compiles for batch sizes 2, 4, 5"


# In ACL-graph mode TorchAir rewrites npu_fused_infer_attention_score into its workspace query and its `.out` form
# (torch_npu registers `Tensor[] out`, returned as the outputs) and updates the captured task's sequence lengths at
# each replay (graph task updates, device/graph_tasks.py).
ACLGRAPH_CASES = ["fused", "incre"]


@pytest.mark.parametrize("attention", ACLGRAPH_CASES)
def test_aclgraph_mode(attention, zoo_device, aclgraph_calls):
    """On cpu tensors the AOT graph runs on the reference kernels (with a warning); on npu tensors the step is
    captured into torch.npu.NPUGraph and each step replays a graph once."""
    compiled, counter = _compiled(DecodeStep(attention).to(zoo_device), op_plugin.npugraph_backend(mode="aclgraph"),
                                  dynamic=True)
    with aclgraph_calls() as replays:
        _run_and_compare(compiled, [(3, 0, 0), (3, 1, 0), (5, 0, 0)], attention, zoo_device)
    if replays is not None:
        assert len(replays) == 3, f"{len(replays)} NPUGraph replays for 3 steps"
    assert counter.frame_count == 2, f"{counter.frame_count} compiles for batch sizes 3, 5"

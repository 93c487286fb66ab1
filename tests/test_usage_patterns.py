"""How people run models (issue 27): plain model code compiled with backend="npugraph" against eager.

A static KV cache written with `index_copy_`, a module from `torch.export` compiled again, a compiled
AdamW step, a state-space model's softplus, `F.unfold`, `int()` of a symbolic size, `amax`: each
reaches an op TorchAir does not lower (op_plugin's converters, docs/npu-faithful-lowering.md).
Oracle: the same code in eager torch; small sizes."""
import torch
import torch._dynamo.testing
import torch.nn.functional as F

import op_plugin


def _compiled(fn, dynamic=False):
    torch._dynamo.reset()
    counter = torch._dynamo.testing.CompileCounterWithBackend(op_plugin.npugraph_backend())
    return torch.compile(fn, backend=counter, dynamic=dynamic), counter


def _check(fn, *inputs, dynamic=False, atol=1e-5, rtol=1e-5):
    compiled, counter = _compiled(fn, dynamic)
    torch.testing.assert_close(compiled(*inputs), fn(*inputs), atol=atol, rtol=rtol)
    assert counter.frame_count == 1
    return compiled


# --- 1. a static KV cache (transformers' StaticCache.update: k_cache.index_copy_(2, positions, k)) --------

class _StaticCacheAttention(torch.nn.Module):
    def __init__(self, heads=2, dim=8, max_len=6):
        super().__init__()
        self.qkv = torch.nn.Linear(heads * dim, 3 * heads * dim)
        self.heads, self.dim = heads, dim
        self.register_buffer("k_cache", torch.zeros(1, heads, max_len, dim))
        self.register_buffer("v_cache", torch.zeros(1, heads, max_len, dim))

    def forward(self, x, positions):
        q, k, v = self.qkv(x).view(1, -1, 3, self.heads, self.dim).permute(2, 0, 3, 1, 4)
        self.k_cache.index_copy_(2, positions, k)
        self.v_cache.index_copy_(2, positions, v)
        scores = (q @ self.k_cache.transpose(-1, -2)) / self.dim ** 0.5
        return scores.softmax(-1) @ self.v_cache


def test_static_kv_cache_index_copy_matches_eager():
    torch.manual_seed(0)
    eager = _StaticCacheAttention()
    model = _StaticCacheAttention()
    model.load_state_dict(eager.state_dict())
    compiled, _ = _compiled(model)
    prompt = torch.randn(1, 3, 16)
    steps = [(prompt, torch.arange(3)), (torch.randn(1, 1, 16), torch.tensor([3])),
             (torch.randn(1, 1, 16), torch.tensor([4]))]
    for x, positions in steps:
        torch.testing.assert_close(compiled(x, positions), eager(x, positions), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(model.k_cache, eager.k_cache)
    torch.testing.assert_close(model.v_cache, eager.v_cache)


def test_index_copy_negative_dim_matches_eager():
    _check(lambda x, i, s: x.index_copy(-1, i, s) * 2, torch.randn(3, 5), torch.tensor([4, 0]), torch.randn(3, 2))


# --- 2. torch.export, then compile the exported module ----------------------------------------------------

class _CastingBlock(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(8, 8)

    def forward(self, x):
        h = self.proj(x).to(torch.float32)        # non-strict export asserts the cast's metadata
        return F.silu(h) + x.to(torch.float32)


def test_exported_module_compiles_and_matches_eager():
    torch.manual_seed(0)
    x = torch.randn(2, 4, 8)
    exported = torch.export.export(_CastingBlock(), (x,), strict=False).module()
    assert any(n.target is torch.ops.aten._assert_tensor_metadata.default for n in exported.graph.nodes)
    _check(exported, x)


# --- 3. a compiled AdamW step -------------------------------------------------------------------------------

def test_compiled_adamw_step_matches_eager():
    torch.manual_seed(0)
    eager_p = torch.nn.Parameter(torch.randn(4, 3))
    compiled_p = torch.nn.Parameter(eager_p.detach().clone())
    eager_opt = torch.optim.AdamW([eager_p], lr=0.1)
    compiled_opt = torch.optim.AdamW([compiled_p], lr=0.1)
    step, counter = _compiled(compiled_opt.step)
    for _ in range(3):
        grad = torch.randn(4, 3)
        eager_p.grad, compiled_p.grad = grad.clone(), grad.clone()
        eager_opt.step()
        step()
    assert counter.frame_count >= 1
    torch.testing.assert_close(compiled_p, eager_p, atol=1e-5, rtol=1e-5)
    for key in ("exp_avg", "exp_avg_sq"):
        torch.testing.assert_close(compiled_opt.state[compiled_p][key], eager_opt.state[eager_p][key],
                                   atol=1e-6, rtol=1e-5)


# --- 6. a state-space model's softplus (Mamba's dt = softplus(dt + dt_bias)) ------------------------------

def test_softplus_matches_eager():
    x = torch.randn(4, 8) * 15
    _check(lambda x: F.softplus(x) + F.softplus(x, beta=2.0, threshold=5.0) * F.softplus(x, beta=0.5, threshold=1.0),
           x)


# --- 7. F.unfold --------------------------------------------------------------------------------------------

def test_unfold_matches_eager():
    _check(lambda x: F.unfold(x, (3, 2), dilation=(1, 2), padding=1, stride=(2, 1)) * 2, torch.randn(2, 3, 7, 6))


# --- 8. int() of a symbolic float under dynamic=True -----------------------------------------------------

def test_int_of_symbolic_float_under_dynamic_shapes():
    def grow(x):
        return x.new_ones(int(x.shape[0] * 1.5)) * x.sum()

    compiled, counter = _compiled(grow, dynamic=True)
    for n in (4, 6, 9):
        x = torch.randn(n)
        torch.testing.assert_close(compiled(x), grow(x))
    assert counter.frame_count == 1


# --- 10. amax ---------------------------------------------------------------------------------------------

def test_amax_matches_eager():
    _check(lambda x: x - x.amax(dim=(1,), keepdim=True) + torch.amax(x, (0, 2)).sum() + x.amax(), torch.randn(3, 4, 5))


# --- 9. transposed convolution with dynamic sizes (Conv2DTranspose's int32 input_size) --------------------

def test_conv_transpose_with_dynamic_sizes_matches_eager():
    torch.manual_seed(0)
    decoder = torch.nn.Sequential(torch.nn.ConvTranspose1d(3, 4, 4, stride=2, padding=1), torch.nn.ELU(),
                                  torch.nn.ConvTranspose1d(4, 2, 3, stride=3, output_padding=1, dilation=2))
    upsample = torch.nn.ConvTranspose2d(4, 2, (3, 2), stride=(2, 1), padding=(1, 0), groups=2)
    for module, shapes in ((decoder, [(2, 3, 13), (2, 3, 20)]), (upsample, [(1, 4, 5, 6), (1, 4, 7, 9)])):
        compiled, counter = _compiled(module, dynamic=True)
        with torch.no_grad():
            for shape in shapes:
                x = torch.randn(*shape)
                torch.testing.assert_close(compiled(x), module(x), atol=1e-5, rtol=1e-5)
        assert counter.frame_count >= 1


# --- 4, 5. attention under autocast, and inside activation checkpointing (the NPU-faithful SDPA rewrite) ---

class _Attention(torch.nn.Module):
    def __init__(self, rope_in_float32=False, checkpointed=False):
        super().__init__()
        self.qkv = torch.nn.Linear(16, 48)
        self.out = torch.nn.Linear(16, 16)
        self.rope_in_float32, self.checkpointed = rope_in_float32, checkpointed

    def attend(self, x):
        q, k, v = self.qkv(x).view(2, 5, 3, 2, 8).permute(2, 0, 3, 1, 4)
        if self.rope_in_float32:   # transformers' rotary embedding upcasts q and k, v stays in bf16
            q, k = q.float() * 1.5, k.float()
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.out(o.transpose(1, 2).reshape(2, 5, 16))

    def forward(self, x):
        if self.checkpointed:
            return torch.utils.checkpoint.checkpoint(self.attend, x, use_reentrant=False)
        return self.attend(x)


def test_attention_under_bf16_autocast_matches_eager():
    torch.manual_seed(0)
    model = _Attention(rope_in_float32=True)
    x = torch.randn(2, 5, 16)

    def step(x):
        with torch.autocast("cpu", torch.bfloat16):
            return model(x)

    compiled, _ = _compiled(step)
    actual, expected = compiled(x), step(x)
    assert actual.dtype == expected.dtype == torch.bfloat16
    # bfloat16 keeps 8 significant bits (eps 2**-7): a few roundings apart, the fused CPU kernel and
    # the math form differ by a few eps of the output's magnitude
    torch.testing.assert_close(actual.float(), expected.float(), atol=4 * 2 ** -7, rtol=4 * 2 ** -7)


def test_attention_inside_activation_checkpointing_matches_eager_with_gradients():
    torch.manual_seed(0)
    model = _Attention(checkpointed=True)
    x = torch.randn(2, 5, 16, requires_grad=True)
    compiled, _ = _compiled(model)
    actual = compiled(x)
    actual.sum().backward()
    grads = [x.grad.clone()] + [p.grad.clone() for p in model.parameters()]
    x.grad = None
    model.zero_grad()
    expected = model(x)
    expected.sum().backward()
    torch.testing.assert_close(actual, expected, atol=1e-5, rtol=1e-5)
    for got, want in zip(grads, [x.grad] + [p.grad for p in model.parameters()], strict=True):
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


def test_transformers_decoder_with_gradient_checkpointing_matches_eager():
    transformers = __import__("pytest").importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32)
    model = transformers.LlamaForCausalLM(config)
    model.train()
    model.gradient_checkpointing_enable()
    ids = torch.randint(0, 64, (2, 8))
    compiled, _ = _compiled(model)
    loss = compiled(input_ids=ids, labels=ids).loss
    loss.backward()
    grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    expected = model(input_ids=ids, labels=ids).loss
    expected.backward()
    torch.testing.assert_close(loss, expected, atol=1e-5, rtol=1e-5)
    for got, p in zip(grads, model.parameters(), strict=True):
        torch.testing.assert_close(got, p.grad, atol=1e-5, rtol=1e-5)

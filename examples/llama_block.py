"""A LLaMA-style decoder block built from the shipped custom ops (torch.ops.npu.*).

    RMSNorm -> Q/K/V projections -> rotary -> [KV cache update] -> causal attention -> output
    projection -> add-RMSNorm -> SwiGLU MLP -> down projection -> residual

`LlamaBlock` (inference) writes the new keys/values into caches passed in by the caller
(`npu_custom_kv_cache_update_`, in place) and attends over the whole cache with a causal mask built
from the token positions (plain matmul + softmax). `LlamaBlock(use_cache=False)` is the training
variant: no cache, attention scores through `npu_custom_scaled_softmax(causal=True)`.

The cached variant is for inference: run it under torch.no_grad() (the in-place cache update has no
gradient, and eager refuses to write tensors that require grad into the cache).
"""
from __future__ import annotations

import torch
from torch import nn

import op_plugin  # noqa: F401  (registers torch.ops.npu.*)

npu = torch.ops.npu


class LlamaBlock(nn.Module):
    def __init__(self, hidden: int = 64, heads: int = 4, inter: int = 96, eps: float = 1e-6,
                 use_cache: bool = True):
        super().__init__()
        self.heads, self.head_dim, self.eps, self.use_cache = heads, hidden // heads, eps, use_cache
        self.attn_norm = nn.Parameter(1 + 0.1 * torch.randn(hidden))
        self.wq = nn.Parameter(torch.randn(hidden, hidden) / hidden ** 0.5)   # [out, in], as npu_custom_linear takes
        self.wk = nn.Parameter(torch.randn(hidden, hidden) / hidden ** 0.5)
        self.wv = nn.Parameter(torch.randn(hidden, hidden) / hidden ** 0.5)
        self.wo = nn.Parameter(torch.randn(hidden, hidden) / hidden ** 0.5)
        self.bo = nn.Parameter(0.1 * torch.randn(hidden))
        self.mlp_norm = nn.Parameter(1 + 0.1 * torch.randn(hidden))
        self.gate = nn.Parameter(torch.randn(hidden, inter) / hidden ** 0.5)  # [in, out], as npu_swiglu_mlp takes
        self.up = nn.Parameter(torch.randn(hidden, inter) / hidden ** 0.5)
        self.down = nn.Parameter(torch.randn(hidden, inter) / inter ** 0.5)    # [out, in]

    def forward(self, x, cos, sin, positions=None, k_cache=None, v_cache=None):
        b, s, h = x.shape
        normed, _ = npu.npu_custom_rms_norm(x, self.attn_norm, self.eps)
        q, k, v = (npu.npu_custom_linear(normed, w).reshape(b, s, self.heads, self.head_dim)
                   for w in (self.wq, self.wk, self.wv))
        q, k = npu.npu_custom_rotary_mul(q, cos, sin), npu.npu_custom_rotary_mul(k, cos, sin)
        q = q.transpose(1, 2)                                    # [b, heads, s, d]
        if self.use_cache:
            attn = self._cached_attention(q, k, v, positions, k_cache, v_cache)
        else:
            scores = q @ k.permute(0, 2, 3, 1)                   # [b, heads, s, s]
            probs = npu.npu_custom_scaled_softmax(scores, self.head_dim ** -0.5, [-1], True)
            attn = probs @ v.transpose(1, 2)
        attn = attn.transpose(1, 2).reshape(b, s, h)
        y, _, residual = npu.npu_custom_add_rms_norm(x, npu.npu_custom_linear(attn, self.wo, self.bo),
                                                     self.mlp_norm, self.eps)
        return residual + npu.npu_custom_linear(npu.npu_swiglu_mlp(y, self.gate, self.up), self.down)

    def _cached_attention(self, q, k, v, positions, k_cache, v_cache):
        # caches [b, max_seq, heads, d]: write this step's keys/values at `positions` (in place)
        npu.npu_custom_kv_cache_update_(k_cache, k, positions, 1)
        npu.npu_custom_kv_cache_update_(v_cache, v, positions, 1)
        keys, values = k_cache.transpose(1, 2), v_cache.transpose(1, 2)   # [b, heads, max_seq, d]
        scores = (q @ keys.transpose(-1, -2)) * self.head_dim ** -0.5     # [b, heads, s, max_seq]
        # causal over absolute positions: a query sees cache slots at or before its own position
        # (slots after it are empty or stale, so they must be masked too)
        slots = torch.arange(k_cache.shape[1], device=q.device)
        visible = slots[None, :] <= positions[:, None]                   # [s, max_seq]
        scores = scores.masked_fill(~visible, float("-inf"))
        probs = torch.softmax(scores, dim=-1)
        return probs @ values


def rotary_tables(positions: torch.Tensor, head_dim: int, dtype=torch.float32):
    """cos/sin tables [1, s, 1, head_dim] for `positions`, as npu_custom_rotary_mul broadcasts them."""
    inv_freq = 1.0 / (10000 ** (torch.arange(0, head_dim, 2).float() / head_dim))
    angles = torch.outer(positions.float(), inv_freq)
    angles = torch.cat((angles, angles), dim=-1)[None, :, None, :]
    return angles.cos().to(dtype), angles.sin().to(dtype)


def example_inputs(model: LlamaBlock, batch: int = 2, seq: int = 5, start: int = 3, max_seq: int = 24,
                   dtype=torch.float32, seed: int = 0):
    """(x, cos, sin[, positions, k_cache, v_cache]) for `seq` new tokens at positions start..start+seq-1;
    the caches hold random keys/values for the `start` earlier positions (and garbage after)."""
    generator = torch.Generator().manual_seed(seed)
    hidden = model.heads * model.head_dim
    x = torch.randn(batch, seq, hidden, generator=generator).to(dtype)
    positions = torch.arange(start, start + seq)
    cos, sin = rotary_tables(positions, model.head_dim, dtype)
    if not model.use_cache:
        return x, cos, sin
    cache_shape = (batch, max_seq, model.heads, model.head_dim)
    k_cache = torch.randn(cache_shape, generator=generator).to(dtype)
    v_cache = torch.randn(cache_shape, generator=generator).to(dtype)
    return x, cos, sin, positions, k_cache, v_cache


def build(use_cache: bool = True, dtype=torch.float32):
    """(model, example_inputs) for `op-plugin inspect examples.llama_block:build`."""
    torch.manual_seed(0)
    model = LlamaBlock(use_cache=use_cache).to(dtype).eval()
    return model, example_inputs(model, dtype=dtype)


def build_training():
    """The variant without the cache, in train mode (forward + backward)."""
    torch.manual_seed(0)
    model = LlamaBlock(use_cache=False).train()
    return model, example_inputs(model)

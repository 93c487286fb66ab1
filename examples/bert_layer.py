"""A BERT-style encoder layer from plain PyTorch layers only.

    word + position + token-type embeddings -> LayerNorm -> dropout
    -> multi-head self-attention with a padding mask -> dropout -> residual LayerNorm
    -> Linear -> GELU -> Linear -> dropout -> residual LayerNorm

GELU uses approximate="tanh": TorchAir lowers aten.gelu (either mode) to GE `Gelu`, which CANN
computes with the tanh approximation, so erf-GELU ("none", BERT's original) would differ from eager
by about 1e-4 in float32 on the NPU as in the simulator. With "tanh" eager and graph compute the same function.
"""
from __future__ import annotations

import torch
from torch import nn


class BertLayer(nn.Module):
    def __init__(self, vocab: int = 50, max_positions: int = 32, hidden: int = 48, heads: int = 4,
                 inter: int = 80, dropout: float = 0.1, eps: float = 1e-12):
        super().__init__()
        self.heads, self.head_dim = heads, hidden // heads
        self.word = nn.Embedding(vocab, hidden)
        self.position = nn.Embedding(max_positions, hidden)
        self.token_type = nn.Embedding(2, hidden)
        self.embed_norm = nn.LayerNorm(hidden, eps=eps)
        self.query, self.key, self.value = (nn.Linear(hidden, hidden), nn.Linear(hidden, hidden),
                                            nn.Linear(hidden, hidden))
        self.attn_out = nn.Linear(hidden, hidden)
        self.attn_norm = nn.LayerNorm(hidden, eps=eps)
        self.ffn_in = nn.Linear(hidden, inter)
        self.act = nn.GELU(approximate="tanh")   # GE Gelu is the tanh form; see the module docstring
        self.ffn_out = nn.Linear(inter, hidden)
        self.ffn_norm = nn.LayerNorm(hidden, eps=eps)
        self.dropout = nn.Dropout(dropout)       # identity in eval mode

    def forward(self, input_ids, attention_mask, token_type_ids):
        b, s = input_ids.shape
        positions = torch.arange(s, device=input_ids.device)
        x = self.word(input_ids) + self.position(positions)[None] + self.token_type(token_type_ids)
        x = self.dropout(self.embed_norm(x))
        # additive padding mask [b, 1, 1, s]: 0 where attended, the dtype's minimum where padded
        additive = (1.0 - attention_mask[:, None, None, :].to(x.dtype)) * torch.finfo(x.dtype).min
        q, k, v = (proj(x).reshape(b, s, self.heads, self.head_dim).transpose(1, 2)
                   for proj in (self.query, self.key, self.value))
        scores = q @ k.transpose(-1, -2) / self.head_dim ** 0.5 + additive
        probs = self.dropout(torch.softmax(scores, dim=-1))
        context = (probs @ v).transpose(1, 2).reshape(b, s, -1)
        x = self.attn_norm(x + self.dropout(self.attn_out(context)))
        return self.ffn_norm(x + self.dropout(self.ffn_out(self.act(self.ffn_in(x)))))


def example_inputs(model: BertLayer, batch: int = 2, seq: int = 7, seed: int = 0):
    """(input_ids int64 [b, s], attention_mask int64 [b, s] with right padding, token_type_ids [b, s])."""
    generator = torch.Generator().manual_seed(seed)
    input_ids = torch.randint(0, model.word.num_embeddings, (batch, seq), generator=generator)
    lengths = torch.randint(1, seq + 1, (batch,), generator=generator)
    lengths[0] = seq                                  # at least one unpadded row
    attention_mask = (torch.arange(seq)[None, :] < lengths[:, None]).long()
    token_type_ids = (torch.arange(seq)[None, :] >= (lengths[:, None] + 1) // 2).long()
    return input_ids, attention_mask, token_type_ids


def build(dtype=torch.float32):
    """(model, example_inputs) for `op-plugin inspect examples.bert_layer:build`."""
    torch.manual_seed(0)
    model = BertLayer().to(dtype).eval()
    return model, example_inputs(model)

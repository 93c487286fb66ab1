"""Embedding GE ops (hicann ops-nn ``index/``, where CANN files ``embedding_dense_grad``):
EmbeddingDenseGrad.

A module of its own beside `index.py` (the gather/scatter ops, EmbeddingBag): the embedding
backward sums gradient rows per index, with its own padding and frequency-scaling rules. Formula
from the REG_OP doc and the ops-nn ``index/embedding_dense_grad`` README; TorchAir's converter is
``ge_converter/aten/embedding_dense_backward.py``. 16-bit float inputs are accumulated in float32
and rounded once.
"""
from __future__ import annotations

import torch
from ...registry import ge_kernel, refuse


@ge_kernel("EmbeddingDenseGrad", accepts={"grad": (torch.float32, torch.float16, torch.bfloat16),
                                          "indices": (torch.int32, torch.int64)}, widen=True)
def embedding_dense_grad(grad, indices, *, num_weights, padding_idx, scale_grad_by_freq):
    """y[num_weights, D] = sum of the grad rows gathered by each index; rows of padding_idx stay 0 (-1:
    none); with scale_grad_by_freq each row is divided by how often its index occurs."""
    if num_weights < 0:
        refuse(f"num_weights must be >= 0, got {num_weights}")
    if grad.dim() < 1 or list(grad.shape[:-1]) != list(indices.shape):
        refuse(f"grad {list(grad.shape)} must be indices' shape {list(indices.shape)} plus the embedding dim")
    flat = indices.reshape(-1).long()
    if flat.numel() and bool(((flat < 0) | (flat >= num_weights)).any()):
        refuse(f"indices must lie in [0, {num_weights})")
    rows = grad.reshape(-1, grad.shape[-1])
    if scale_grad_by_freq:
        counts = torch.bincount(flat, minlength=num_weights).float()
        rows = rows / counts[flat].unsqueeze(1)
    if padding_idx >= 0:
        rows = rows * (flat != padding_idx).unsqueeze(1).float()
    return torch.zeros(num_weights, grad.shape[-1], dtype=torch.float32).index_add_(0, flat, rows)

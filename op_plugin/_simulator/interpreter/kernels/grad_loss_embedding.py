"""Backward GE ops of the losses and the embedding: NLLLossGrad, MseLossGrad, EmbeddingDenseGrad.

Formulas from CANN's operator definitions (REG_OP docs; hicann ops-nn ``loss/*`` and
``index/embedding_dense_grad`` READMEs); TorchAir's converters are ``ge_converter/aten/
nll_loss_backward.py``, ``mse_loss_backward.py``, ``embedding_dense_backward.py``.
16-bit float inputs are accumulated in float32 and rounded once.
"""
from __future__ import annotations

import torch

from .common import check_dtype, fail, opmath, same_dtype
from .loss import _reduction  # the forward losses' reduction attr, read the same way
from ..registry import builtin_kernel


@builtin_kernel("NLLLossGrad")
def _nll_loss_grad(inputs, attrs, node):
    """x_grad[n, target[n]] = -weight[target[n]] * y_grad[n] (reduction none), -weight[target[n]] * y_grad
    (sum) or -weight[target[n]] * y_grad / total_weight (mean); every other entry and every row whose
    target is ignore_index is 0. x is [N, C] or [C]."""
    x, y_grad, target, weight, total_weight = inputs
    for name, tensor in (("x", x), ("y_grad", y_grad), ("weight", weight), ("total_weight", total_weight)):
        check_dtype(node, name, tensor, (torch.float32,))
    check_dtype(node, "target", target, (torch.int32, torch.int64))
    reduction = _reduction(node, attrs)
    ignore_index = attrs.get("ignore_index", -100)
    if x.dim() not in (1, 2):
        fail(node, f"x must be [N, C] or [C], got shape {list(x.shape)}")
    rows = x.reshape(-1, x.shape[-1])
    classes = rows.shape[1]
    labels = target.reshape(-1).long()
    if labels.numel() != rows.shape[0]:
        fail(node, f"target has {labels.numel()} entries for {rows.shape[0]} rows of x")
    if weight.numel() != classes:
        fail(node, f"weight must have {classes} entries (one per class), got {weight.numel()}")
    kept = labels != ignore_index
    if bool(((labels < 0) | (labels >= classes))[kept].any()):
        fail(node, f"target holds a class outside [0, {classes}) that is not ignore_index={ignore_index}")
    safe = torch.where(kept, labels, torch.zeros_like(labels))
    scale = -weight.reshape(-1)[safe] * kept.to(x.dtype)
    if reduction == "none":
        if y_grad.numel() != rows.shape[0]:
            fail(node, f"y_grad must have one entry per row ({rows.shape[0]}) with reduction='none'")
        scale = scale * y_grad.reshape(-1)
    else:
        if y_grad.numel() != 1:
            fail(node, f"y_grad must be one value with reduction={reduction!r}, got shape {list(y_grad.shape)}")
        scale = scale * y_grad.reshape(())
        if reduction == "mean":
            scale = scale / total_weight.reshape(())
    grad = torch.zeros_like(rows)
    grad[torch.arange(rows.shape[0]), safe] = scale
    return [grad.reshape(x.shape)]


@builtin_kernel("MseLossGrad")
def _mse_loss_grad(inputs, attrs, node):
    """y = 2 * (predict - label) * dout, divided by the element count for reduction='mean';
    dout broadcasts (one value for mean/sum)."""
    predict, label, dout = inputs
    same_dtype(node.type, [predict, label, dout])
    check_dtype(node, "predict", predict, (torch.float32, torch.float16))
    if predict.shape != label.shape:
        fail(node, f"predict {list(predict.shape)} and label {list(label.shape)} must have one shape")
    reduction = _reduction(node, attrs)
    try:
        torch.broadcast_shapes(dout.shape, predict.shape)
    except RuntimeError:
        fail(node, f"dout {list(dout.shape)} does not broadcast to predict {list(predict.shape)}")
    grad = 2 * (opmath(predict) - opmath(label)) * opmath(dout)
    if reduction == "mean":
        grad = grad / max(predict.numel(), 1)
    return [grad.to(predict.dtype)]


@builtin_kernel("EmbeddingDenseGrad")
def _embedding_dense_grad(inputs, attrs, node):
    """y[num_weights, D] = sum of the grad rows gathered by each index; rows of padding_idx stay 0 (-1:
    none); with scale_grad_by_freq each row is divided by how often its index occurs."""
    grad, indices = inputs
    check_dtype(node, "grad", grad, (torch.float32, torch.float16, torch.bfloat16))
    check_dtype(node, "indices", indices, (torch.int32, torch.int64))
    num_weights = attrs["num_weights"]
    padding_idx = attrs.get("padding_idx", -1)
    if num_weights < 0:
        fail(node, f"num_weights must be >= 0, got {num_weights}")
    if grad.dim() < 1 or list(grad.shape[:-1]) != list(indices.shape):
        fail(node, f"grad {list(grad.shape)} must be indices' shape {list(indices.shape)} plus the embedding dim")
    flat = indices.reshape(-1).long()
    if flat.numel() and bool(((flat < 0) | (flat >= num_weights)).any()):
        fail(node, f"indices must lie in [0, {num_weights})")
    rows = opmath(grad).reshape(-1, grad.shape[-1]).float()
    if attrs.get("scale_grad_by_freq", False):
        counts = torch.bincount(flat, minlength=num_weights).float()
        rows = rows / counts[flat].unsqueeze(1)
    if padding_idx >= 0:
        rows = rows * (flat != padding_idx).unsqueeze(1).float()
    out = torch.zeros(num_weights, grad.shape[-1], dtype=torch.float32).index_add_(0, flat, rows)
    return [out.to(grad.dtype)]

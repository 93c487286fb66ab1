"""Loss GE ops: MseLoss, NLLLoss (formulas from CANN's ops-nn loss READMEs).

16-bit inputs are computed in float32 and rounded once.
"""
from __future__ import annotations

import torch

from .common import check_dtype, fail, opmath
from ..registry import builtin_kernel

_REDUCTIONS = ("none", "mean", "sum")


def _reduction(node, attrs):
    reduction = attrs.get("reduction", "mean")
    if reduction not in _REDUCTIONS:
        fail(node, f"reduction {reduction!r} is not one of {', '.join(_REDUCTIONS)}")
    return reduction


@builtin_kernel("MseLoss")
def _mse_loss(inputs, attrs, node):
    """(predict - label)^2, element-wise ('none'), averaged ('mean') or summed ('sum')."""
    predict, label = inputs
    for name, tensor in (("predict", predict), ("label", label)):
        check_dtype(node, name, tensor, (torch.float16, torch.float32))
    if predict.dtype != label.dtype:
        fail(node, f"predict ({predict.dtype}) and label ({label.dtype}) must share a dtype")
    try:
        squared = (opmath(predict) - opmath(label)) ** 2
    except RuntimeError:
        fail(node, f"predict {list(predict.shape)} and label {list(label.shape)} do not broadcast")
    reduction = _reduction(node, attrs)
    if reduction == "mean":
        squared = squared.mean()
    elif reduction == "sum":
        squared = squared.sum()
    return [squared.to(predict.dtype)]


@builtin_kernel("NLLLoss")
def _nll_loss(inputs, attrs, node):
    """l_n = -w[y_n] * x[n, y_n] with w[c] = weight[c] (1 without weight) and 0 for c == ignore_index.

    y: l ('none', shape [N]), sum(l) / total_weight ('mean'), sum(l) ('sum');
    total_weight = sum of w[y_n] for every reduction (CANN; torch's eager gives 0 for 'none').
    x is [N, C] or [C] (then target is a single class).
    """
    x, target = inputs[0], inputs[1]
    weight = inputs[2] if len(inputs) > 2 else None
    check_dtype(node, "x", x, (torch.float32,))
    check_dtype(node, "target", target, (torch.int32, torch.int64))
    if x.dim() not in (1, 2):
        fail(node, f"x must be [N, C] or [C], got shape {list(x.shape)}")
    batched = x.dim() == 2
    rows = x if batched else x.unsqueeze(0)
    classes = rows.shape[1]
    labels = target.reshape(-1).long()
    if labels.numel() != rows.shape[0]:
        fail(node, f"target has {labels.numel()} entries for {rows.shape[0]} rows of x")
    if weight is not None:
        check_dtype(node, "weight", weight, (torch.float32,))
        if list(weight.shape) != [classes]:
            fail(node, f"weight must have shape [{classes}], got {list(weight.shape)}")
    else:
        weight = torch.ones(classes, dtype=torch.float32)
    ignore_index = attrs.get("ignore_index", -100)
    kept = labels != ignore_index
    if bool(((labels[kept] < 0) | (labels[kept] >= classes)).any()):
        fail(node, f"target holds a class outside [0, {classes})")
    safe = torch.where(kept, labels, torch.zeros_like(labels))
    w = torch.where(kept, weight[safe], torch.zeros(()))
    losses = -w * rows.gather(1, safe.unsqueeze(1)).squeeze(1)
    total_weight = w.sum()
    reduction = _reduction(node, attrs)
    if reduction == "none":
        y = losses if batched else losses.reshape(())
    elif reduction == "sum":
        y = losses.sum()
    else:
        y = losses.sum() / total_weight
    return [y, total_weight]

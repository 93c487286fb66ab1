"""Loss GE ops (hicann ops-nn ``loss/``), forward and backward: MseLoss, MseLossGrad, NLLLoss,
NLLLossGrad.

Formulas from CANN's operator definitions (REG_OP docs; the ops-nn ``loss/*`` READMEs); TorchAir's
converters are ``ge_converter/aten/mse_loss*.py`` and ``nll_loss*.py``.
16-bit inputs are computed in float32 and rounded once.
"""
from __future__ import annotations

import torch
from ...registry import ge_kernel, refuse

_REDUCTIONS = ("none", "mean", "sum")
_F16_F32 = (torch.float16, torch.float32)
_F32 = (torch.float32,)
_INDEX = (torch.int32, torch.int64)


def _reduction(reduction):
    if reduction not in _REDUCTIONS:
        refuse(f"reduction {reduction!r} is not one of {', '.join(_REDUCTIONS)}")
    return reduction


# ---- mse ------------------------------------------------------------------------------------------

@ge_kernel("MseLoss", one_dtype=("predict", "label"), accepts={"predict": _F16_F32, "label": _F16_F32}, widen=True)
def mse_loss(predict, label, *, reduction):
    """(predict - label)^2, element-wise ('none'), averaged ('mean') or summed ('sum')."""
    try:
        squared = (predict - label) ** 2
    except RuntimeError:
        refuse(f"predict {list(predict.shape)} and label {list(label.shape)} do not broadcast")
    reduction = _reduction(reduction)
    if reduction == "mean":
        squared = squared.mean()
    elif reduction == "sum":
        squared = squared.sum()
    return squared


@ge_kernel("MseLossGrad", one_dtype=("predict", "label", "dout"), accepts={"predict": _F16_F32}, widen=True)
def mse_loss_grad(predict, label, dout, *, reduction):
    """y = 2 * (predict - label) * dout, divided by the element count for reduction='mean';
    dout broadcasts (one value for mean/sum)."""
    if predict.shape != label.shape:
        refuse(f"predict {list(predict.shape)} and label {list(label.shape)} must have one shape")
    reduction = _reduction(reduction)
    try:
        torch.broadcast_shapes(dout.shape, predict.shape)
    except RuntimeError:
        refuse(f"dout {list(dout.shape)} does not broadcast to predict {list(predict.shape)}")
    grad = 2 * (predict - label) * dout
    if reduction == "mean":
        grad = grad / max(predict.numel(), 1)
    return grad


# ---- nll ------------------------------------------------------------------------------------------

@ge_kernel("NLLLoss", accepts={"x": _F32, "target": _INDEX, "weight": _F32})
def nll_loss(x, target, weight, *, reduction, ignore_index):
    """l_n = -w[y_n] * x[n, y_n] with w[c] = weight[c] (1 without weight) and 0 for c == ignore_index.

    y: l ('none', shape [N]), sum(l) / total_weight ('mean'), sum(l) ('sum');
    total_weight = sum of w[y_n] for every reduction (CANN; torch's eager gives 0 for 'none').
    x is [N, C] or [C] (then target is a single class).
    """
    if x.dim() not in (1, 2):
        refuse(f"x must be [N, C] or [C], got shape {list(x.shape)}")
    batched = x.dim() == 2
    rows = x if batched else x.unsqueeze(0)
    classes = rows.shape[1]
    labels = target.reshape(-1).long()
    if labels.numel() != rows.shape[0]:
        refuse(f"target has {labels.numel()} entries for {rows.shape[0]} rows of x")
    if weight is not None:
        if list(weight.shape) != [classes]:
            refuse(f"weight must have shape [{classes}], got {list(weight.shape)}")
    else:
        weight = torch.ones(classes, dtype=torch.float32)
    kept = labels != ignore_index
    if bool(((labels[kept] < 0) | (labels[kept] >= classes)).any()):
        refuse(f"target holds a class outside [0, {classes})")
    safe = torch.where(kept, labels, torch.zeros_like(labels))
    w = torch.where(kept, weight[safe], torch.zeros(()))
    losses = -w * rows.gather(1, safe.unsqueeze(1)).squeeze(1)
    total_weight = w.sum()
    reduction = _reduction(reduction)
    if reduction == "none":
        y = losses if batched else losses.reshape(())
    elif reduction == "sum":
        y = losses.sum()
    else:
        y = losses.sum() / total_weight
    return y, total_weight


@ge_kernel("NLLLossGrad", accepts={"x": _F32, "y_grad": _F32, "target": _INDEX, "weight": _F32, "total_weight": _F32})
def nll_loss_grad(x, y_grad, target, weight, total_weight, *, reduction, ignore_index):
    """x_grad[n, target[n]] = -weight[target[n]] * y_grad[n] (reduction none), -weight[target[n]] * y_grad
    (sum) or -weight[target[n]] * y_grad / total_weight (mean); every other entry and every row whose
    target is ignore_index is 0. x is [N, C] or [C]."""
    reduction = _reduction(reduction)
    if x.dim() not in (1, 2):
        refuse(f"x must be [N, C] or [C], got shape {list(x.shape)}")
    rows = x.reshape(-1, x.shape[-1])
    classes = rows.shape[1]
    labels = target.reshape(-1).long()
    if labels.numel() != rows.shape[0]:
        refuse(f"target has {labels.numel()} entries for {rows.shape[0]} rows of x")
    if weight.numel() != classes:
        refuse(f"weight must have {classes} entries (one per class), got {weight.numel()}")
    kept = labels != ignore_index
    if bool(((labels < 0) | (labels >= classes))[kept].any()):
        refuse(f"target holds a class outside [0, {classes}) that is not ignore_index={ignore_index}")
    safe = torch.where(kept, labels, torch.zeros_like(labels))
    scale = -weight.reshape(-1)[safe] * kept.to(x.dtype)
    if reduction == "none":
        if y_grad.numel() != rows.shape[0]:
            refuse(f"y_grad must have one entry per row ({rows.shape[0]}) with reduction='none'")
        scale = scale * y_grad.reshape(-1)
    else:
        if y_grad.numel() != 1:
            refuse(f"y_grad must be one value with reduction={reduction!r}, got shape {list(y_grad.shape)}")
        scale = scale * y_grad.reshape(())
        if reduction == "mean":
            scale = scale / total_weight.reshape(())
    grad = torch.zeros_like(rows)
    grad[torch.arange(rows.shape[0]), safe] = scale
    return grad.reshape(x.shape)

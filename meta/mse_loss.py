"""The Meta function of npu_custom_mse_loss (yaml/elementwise_ops.yaml), the worked example of meta/.

Its output is x's shape for reduction="none" and a 0-d tensor for "mean" and "sum": a condition on
a string argument, which the YAML size language cannot state, so the entry has no `outputs:` and
this function gives the output instead. It must agree with the reference kernel
(op_plugin/reference_kernels/elementwise_ops.py) on shape and dtype, and keep sizes symbolic: it
reads x.shape and never turns a size into a Python int.
"""
import torch

# User code writes @op_plugin.meta; the shipped pieces load while op_plugin itself is being
# imported, so they take the decorator from its module rather than from the half-made package.
from op_plugin._registry.decorators import meta

REDUCTIONS = ("none", "mean", "sum")


@meta("npu_custom_mse_loss")
def mse_loss_meta(x, target, reduction="mean"):
    if reduction not in REDUCTIONS:
        raise ValueError(f"npu_custom_mse_loss: reduction must be one of {REDUCTIONS}, got {reduction!r}")
    torch._check(x.dim() == target.dim(),
                 lambda: f"npu_custom_mse_loss: target {tuple(target.shape)} must have x's shape {tuple(x.shape)}")
    for x_size, target_size in zip(x.shape, target.shape, strict=True):
        torch._check(x_size == target_size,
                     lambda: f"npu_custom_mse_loss: target {tuple(target.shape)} must have x's shape {tuple(x.shape)}")
    return x.new_empty(x.shape if reduction == "none" else ())

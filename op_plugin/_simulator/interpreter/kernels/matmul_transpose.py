"""TransposeBatchMatMul (CANN ops-nn ``matmul/transpose_batch_mat_mul``): what TorchAir lowers torch_npu's
npu_transpose_batchmatmul to.

From CANN's doc: x1 and x2 are 3-D; ``perm_x1``/``perm_x2`` are the transposes that bring them to
``[B, M, K]`` and ``[B, K, N]`` (the entry 0 marks the batch dim), the batched product is then transposed
by ``perm_y`` (``[1, 0, 2]``: ``[M, B, N]``). Computed in float32 and rounded once to x1's dtype. Refused:
``scale`` (an int8 output; how the packed uint64 scale is applied and rounded is not documented),
``batch_split_factor`` > 1 (CANN's docs give only the output's shape, ``[factor, M, B*N/factor]``
in the English doc and torch_npu's Meta, ``[M, factor, B*N/factor]`` in the Chinese README; not which element
goes where), ``bias`` (reserved: torch_npu refuses it) and ``enable_hf32`` (HF32 rounding).
An empty perm is the identity.
"""
from __future__ import annotations

import torch

from ..registry import ge_kernel, refuse
from .common import opmath

_FLOATS = (torch.float16, torch.bfloat16, torch.float32)


def _permutation(what, perm, rank=3):
    perm = list(perm) if perm else list(range(rank))
    if sorted(perm) != list(range(rank)):
        refuse(f"{what}={perm} is not a permutation of {list(range(rank))}")
    return perm


@ge_kernel("TransposeBatchMatMul", one_dtype=("x1", "x2"), accepts={"x1": _FLOATS, "x2": _FLOATS})
def transpose_batch_mat_mul(x1, x2, bias, scale, *, perm_x1, perm_x2, perm_y, enable_hf32, batch_split_factor):
    if scale is not None:
        refuse("scale (an int8 output quantised by packed uint64 scales) is not simulated: its rounding is "
               "not documented")
    if bias is not None:
        refuse("bias is reserved by CANN (torch_npu refuses it)")
    if batch_split_factor != 1:
        refuse(f"batch_split_factor={batch_split_factor} is not simulated: CANN's docs give the output's shape "
               "only, not which element goes where")
    if enable_hf32:
        refuse("enable_hf32=True: HF32 rounding of float32 inputs is not simulated")
    if x1.dim() != 3 or x2.dim() != 3:
        refuse(f"x1 and x2 must be 3-D, got {x1.dim()} and {x2.dim()} dims")
    a = x1.permute(_permutation("perm_x1", perm_x1))
    b = x2.permute(_permutation("perm_x2", perm_x2))
    if a.shape[0] != b.shape[0] or a.shape[2] != b.shape[1]:
        refuse(f"x1 permuted to {tuple(a.shape)} and x2 to {tuple(b.shape)} are not [B, M, K] and [B, K, N]")
    y = torch.matmul(opmath(a).float(), opmath(b).float())
    return y.permute(_permutation("perm_y", perm_y)).contiguous().to(x1.dtype)

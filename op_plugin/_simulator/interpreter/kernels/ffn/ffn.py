"""FFN (CANN ops-transformer ``ffn/ffn``, torch_npu's npu_ffn docs): y = activation(x W1 + b1) W2 + b2.

Non-quantised and without experts only: x (M, K1) float16/bfloat16, weight1 (K1, N1), weight2 (N1, N2), float
accumulation. The intermediate follows the kernel's two modes (op_kernel/ffn_base.h): float16 with inner_precise 1
(high performance) rounds x W1 + b1 to float16 and writes the activation in float16; otherwise (inner_precise 0,
bfloat16) both stay float32 and the activation is rounded once. The activation's vector arithmetic is done in
float32 and rounded once (the NPU's float16 vector steps are not specified). Activations: relu, silu, gelu (the
tanh form of AscendC's Gelu: x / (1 + exp(-sqrt(8 / pi) (x + 0.044715 x^3)))), fastgelu (AscendC's FasterGelu:
x / (1 + exp(-1.702 |x|)) exp(0.851 (x - |x|))). Refused: experts (expert_tokens), the GLU activations, every
quantised and pseudo-quantised input, output_dtype.
"""
from __future__ import annotations

import math
import torch
from ...registry import ge_kernel, refuse

_HALF = (torch.float16, torch.bfloat16)


def ffn_activation(name: str, h: torch.Tensor) -> torch.Tensor:
    """The activation on float32 values."""
    if name == "relu":
        return torch.clamp_min(h, 0)
    if name == "silu":
        return h / (1 + torch.exp(-h))
    if name == "gelu":
        return h / (1 + torch.exp(-math.sqrt(8 / math.pi) * (h + 0.044715 * h * h * h)))
    if name == "fastgelu":
        return h / (1 + torch.exp(-1.702 * h.abs())) * torch.exp(0.851 * (h - h.abs()))
    return refuse(f"activation {name!r}: only relu, silu, gelu and fastgelu are simulated (the GLU forms are not)")


@ge_kernel("FFN", accepts={"x": _HALF, "weight1": _HALF, "weight2": _HALF})
def ffn(x, weight1, weight2, expert_tokens, bias1, bias2, scale, offset, deq_scale1, deq_scale2,
        antiquant_scale1, antiquant_scale2, antiquant_offset1, antiquant_offset2, *,
        activation, inner_precise, output_dtype, tokens_index_flag):
    quant = [scale, offset, deq_scale1, deq_scale2, antiquant_scale1, antiquant_scale2, antiquant_offset1,
             antiquant_offset2]
    if expert_tokens is not None or tokens_index_flag:
        refuse("expert_tokens: the expert-grouped FFN is not simulated")
    if any(t is not None for t in quant) or output_dtype != -1:
        refuse("quantised / pseudo-quantised FFN (scales, offsets, output_dtype) is not simulated")
    if weight1.dtype != x.dtype or weight2.dtype != x.dtype or weight1.dim() != 2 or weight2.dim() != 2:
        refuse(f"weight1 {list(weight1.shape)} {weight1.dtype} / weight2 {list(weight2.shape)} {weight2.dtype} must be "
               f"2-D in x's dtype {x.dtype} (no experts)")
    if x.shape[-1] != weight1.shape[0] or weight1.shape[1] != weight2.shape[0]:
        refuse(f"x {list(x.shape)}, weight1 {list(weight1.shape)}, weight2 {list(weight2.shape)} do not chain")
    h = torch.matmul(x.float(), weight1.float())
    if bias1 is not None:
        h = h + bias1.float()
    low_precision = x.dtype == torch.float16 and inner_precise == 1
    if low_precision:
        h = h.to(torch.float16).float()
    h = ffn_activation(activation, h).to(x.dtype).float()
    y = torch.matmul(h, weight2.float())
    if bias2 is not None:
        y = y + bias2.float()
    return y.to(x.dtype)

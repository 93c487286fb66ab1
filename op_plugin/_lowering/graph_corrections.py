"""Corrections (`when="corrects"`; `registry`) of TorchAir's converters whose GE graph GE refuses or
TorchAir cannot build, on every host: an Ascend host with the pinned wheel fails the same way, so each
correction helps both. docs/npu-faithful-lowering.md (section 3) lists them with their sources.

- `aten.baddbmm`: TorchAir multiplies by alpha and beta as Python numbers, which its op builders turn
  into Consts of the number's own type: the default alpha=1 becomes an int64 Const beside a float
  tensor (`Mul(float32, int64)`), and alpha=0.5 a float32 Const beside a float16 one. GE does not
  promote (REG_OP Mul: x1, x2 of one dtype), so CANN refuses the graph. Every `nn.MultiheadAttention`
  with an `attn_mask` and the default `need_weights=True` (`F.multi_head_attention_forward` calls
  `torch.baddbmm(attn_mask, q_scaled, k.transpose(-2, -1))`) and WavLM's relative position bias reach it.
- `npu.npu_fusion_attention_grad`: torch-npu 2.13.0's schema returns five tensors (dq, dk, dv, dpse,
  dsink); TorchAir's converter returns FlashAttentionScoreGrad's four, and TorchAir refuses a converter
  whose outputs do not match the node's ("length of ge_outputs must be equal to meta_outputs"), so
  training through `npu_fusion_attention` in GE mode cannot compile at all. It also drops `pse`
  (never fed to `pse_shift`), as the forward's converter drops it (never fed to `real_shift`): a call
  with a position bias computes attention without it, silently. Both are corrected together.
"""
from __future__ import annotations

import math

import torch

from .cases import F16, F32, Support
from .registry import aten_converter
from .torchair_api import TorchAirApi

_INT_MAX = 2147483647


@aten_converter(torch.ops.aten.baddbmm.default, when="corrects",
                cases=[Support(F32(2, 3, 5), F32(2, 3, 4), F32(2, 4, 5)),
                       Support(F32(1, 3, 5), F32(2, 3, 4), F32(2, 4, 5), beta=0.1, alpha=0.5),
                       Support(F16(2, 3, 5), F16(2, 3, 4), F16(2, 4, 5), alpha=0.5),
                       Support(F32(3, 5), F32(2, 3, 4), F32(2, 4, 5), beta=0, alpha=2)])
def baddbmm(ta: TorchAirApi, self, batch1, batch2, *, beta=1, alpha=1, meta_outputs=None):
    """`aten.baddbmm`: beta * self + alpha * (batch1 @ batch2) (aten's definition; torch_npu eager:
    aclnnBaddbmm, Ascend/op-plugin BaddbmmKernelNpuOpApi.cpp). TorchAir's graph (`BatchMatMul`, `Mul` by
    alpha, `Mul` by beta, `Add`) with each scalar a Const of the node's dtype (`dtype_promote`), so GE's
    one-dtype `Mul` accepts it. A multiplication by exactly 1 is left out (it changes no value), and with
    beta == 0 `self` is not read, as aten documents ("nan and inf in it will not be propagated")."""
    dtype, ge = meta_outputs.dtype, ta.ge
    product = ta.dtype_promote(ge.BatchMatMul(batch1, batch2), target_dtype=dtype)
    if not _is(alpha, 1):
        product = ge.Mul(product, ta.dtype_promote(alpha, target_dtype=dtype))
    if _is(beta, 0):
        return product
    addend = ta.dtype_promote(self, target_dtype=dtype)
    if not _is(beta, 1):
        addend = ge.Mul(addend, ta.dtype_promote(beta, target_dtype=dtype))
    return ge.Add(product, addend)


def _is(scalar, value) -> bool:
    """`scalar` (a Python number, or a GE tensor for a symbolic one) is exactly `value`."""
    return isinstance(scalar, (int, float)) and not isinstance(scalar, bool) and scalar == value


def _fusion_attention_supported(op: str, input_layout: str, keep_prob: float, sink, softmax_layout, **unsupported):
    """TorchAir's converters lower BSH and BNSD without dropout (keep_prob 1); the wheel's
    FlashAttentionScore/Grad have no input for torch_npu 2.13.0's newer arguments."""
    if input_layout not in ("BSH", "BNSD") or not math.isclose(keep_prob, 1.0, rel_tol=1e-9):
        raise NotImplementedError(f"torch.ops.npu.{op}.default ge_converter is not implemented when "
                                  "input_layout != BSH & BNSD or keep_prob != 1.0 !")
    given = {"sink": sink, "softmax_layout": softmax_layout or None, **unsupported}
    named = [name for name, value in given.items() if value is not None]
    if named:
        raise NotImplementedError(f"npu::{op}: {', '.join(named)} cannot be lowered: the GE op of this TorchAir "
                                  "(FlashAttentionScore / FlashAttentionScoreGrad in auto_generated_ge_raw_ops.py) "
                                  "has no input or attr for it")


_FUSION_ATTENTION_CASE = Support(F16(2, 8, 32), F16(2, 8, 32), F16(2, 8, 32), 2, "BSH", scale=0.25)


@aten_converter("npu::npu_fusion_attention", when="corrects", cases=[_FUSION_ATTENTION_CASE])
def npu_fusion_attention(ta: TorchAirApi, query, key, value, head_num, input_layout, pse=None, padding_mask=None,
                         atten_mask=None, scale=1.0, keep_prob=1.0, pre_tockens=_INT_MAX, next_tockens=_INT_MAX,
                         inner_precise=0, prefix=None, actual_seq_qlen=None, actual_seq_kvlen=None, sparse_mode=0,
                         gen_mask_parallel=True, sync=False, softmax_layout="", sink=None, dropout_mask=None,
                         seed=0, offset=0, meta_outputs=None):
    """`npu.npu_fusion_attention`: TorchAir's converter (custom/npu_fusion_attention.py) never feeds
    `pse` to FlashAttentionScore's `real_shift` (torch_npu's eager kernel passes it to
    aclnnFlashAttentionScore as the position shift), and takes none of torch-npu 2.13.0's newer
    arguments (softmax_layout, sink, dropout_mask, seed, offset), so a node passing them binds them to
    the wrong parameters. Corrected: TorchAir's FlashAttentionScore node with `real_shift=pse`, the
    outputs in torch_npu's order (attention_out, softmax_max, softmax_sum, softmax_out, seed, offset,
    numels = 0, 0, 0 without dropout); the newer arguments refused by name unless at their defaults.
    `gen_mask_parallel` and `sync` steer dropout-mask generation only."""
    _fusion_attention_supported("npu_fusion_attention", input_layout, keep_prob, sink, softmax_layout,
                                dropout_mask=dropout_mask)
    softmax_max, softmax_sum, softmax_out, attention_out = ta.ge.FlashAttentionScore(
        query, key, value, real_shift=pse, drop_mask=None, padding_mask=padding_mask, atten_mask=atten_mask,
        prefix=prefix, actual_seq_qlen=actual_seq_qlen, actual_seq_kvlen=actual_seq_kvlen, q_start_idx=0,
        kv_start_idx=0, head_num=head_num, input_layout=input_layout, scale_value=scale, keep_prob=keep_prob,
        pre_tockens=pre_tockens, next_tockens=next_tockens, inner_precise=inner_precise, sparse_mode=sparse_mode)
    return attention_out, softmax_max, softmax_sum, softmax_out, 0, 0, 0


@aten_converter("npu::npu_fusion_attention_grad", when="corrects",
                cases=[Support(F16(1, 4, 16), F16(1, 4, 16), F16(1, 4, 16), F16(1, 4, 16), 2, "BSH",
                               softmax_max=F32(1, 2, 4, 8), softmax_sum=F32(1, 2, 4, 8, value_range=(1, 2)),
                               attention_in=F16(1, 4, 16), scale_value=0.25)])
def npu_fusion_attention_grad(ta: TorchAirApi, query, key, value, dy, head_num, input_layout, *, pse=None,
                              padding_mask=None, atten_mask=None, softmax_max=None, softmax_sum=None,
                              softmax_in=None, attention_in=None, scale_value=1.0, keep_prob=1.0,
                              pre_tockens=_INT_MAX, next_tockens=_INT_MAX, inner_precise=0, seed=0, offset=0,
                              numels=0, prefix=None, actual_seq_qlen=None, actual_seq_kvlen=None, sparse_mode=0,
                              gen_mask_parallel=True, sync=False, softmax_layout="", sink=None, meta_outputs=None):
    """`npu.npu_fusion_attention_grad` (the backward torch_npu's autograd formula of npu_fusion_attention
    calls): the wheel's schema (torch_npu/csrc/aten/npu_native_functions_by_codegen.yaml) returns (dq, dk,
    dv, dpse, dsink), its Meta (op_plugin/meta/_meta_registrations.py) dsink as an empty float32 [0]
    tensor when `sink` is None; TorchAir's converter returns FlashAttentionScoreGrad's four outputs (dq,
    dk, dv, dpse), so TorchAir refuses the node, and it never feeds `pse` to `pse_shift`. Corrected:
    the same FlashAttentionScoreGrad node with `pse_shift=pse`, its four outputs and dsink as an empty
    float32 Const; `sink` and a non-empty `softmax_layout`, which the wheel's FlashAttentionScoreGrad
    has no input or attr for, refused by name. seed/offset/numels only locate a dropout mask, which
    keep_prob 1 does not draw."""
    _fusion_attention_supported("npu_fusion_attention_grad", input_layout, keep_prob, sink, softmax_layout)
    dq, dk, dv, dpse = ta.ge.FlashAttentionScoreGrad(
        query, key, value, dy, pse_shift=pse, drop_mask=None, padding_mask=padding_mask, atten_mask=atten_mask,
        softmax_max=softmax_max, softmax_sum=softmax_sum, softmax_in=softmax_in, attention_in=attention_in,
        prefix=prefix, actual_seq_qlen=actual_seq_qlen, actual_seq_kvlen=actual_seq_kvlen, q_start_idx=0,
        kv_start_idx=0, head_num=head_num, input_layout=input_layout, scale_value=scale_value,
        keep_prob=keep_prob, pre_tockens=pre_tockens, next_tockens=next_tockens, inner_precise=inner_precise,
        sparse_mode=sparse_mode)
    dsink = ta.graph.Const([], dtype=ta.graph.DataType.DT_FLOAT)
    return dq, dk, dv, dpse, dsink

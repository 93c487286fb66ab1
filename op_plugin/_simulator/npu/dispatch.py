"""NPU-faithful tracing on a CPU host: the graph TorchAir lowers is the one an Ascend host traces.

Some torch ops dispatch to different kernels per device. On a CPU host, AOT autograd traces the
CPU kernels' decomposition (SDPA becomes `aten._scaled_dot_product_flash_attention_for_cpu`,
`torch._weight_norm` becomes `aten._weight_norm_interface`), which no Ascend host ever produces
and TorchAir cannot lower. On an Ascend host, torch_npu registers its own kernels for these ops
under the NPU and AutogradNPU keys, so tracing runs torch_npu's C++ implementation on fake
tensors and records what it calls. `rewrite_for_npu(gm)` replaces these calls in dynamo's graph
by Python transcriptions of torch_npu's implementations, before TorchAir traces it. Only the
simulator needs this: on an Ascend host torch_npu itself does the dispatch.

Each transcription names its source (Ascend/op-plugin, the code torch_npu 2.13 is built from;
the wheel's csrc/aten/npu_native_functions_by_codegen.yaml lists the ops with NPU kernels and
lib/libtorch_npu.so has `wrapper_NPU_*`/`wrapper_AutogradNPU_*` for each):

- `scaled_dot_product_attention`: op_plugin/ops/opapi/ScaledDotProductAttentionKernelNpuOpApi.cpp
  (V2R5..newest), registered for NPU and AutogradNPU; `_fused_sdp_choice` (FusedSdpChoice
  KernelNpuOpApi.cpp) returns OVERRIDEABLE but is never consulted, as the SDPA kernel itself is
  replaced. The branch depends on the SoC (`c10_npu::GetSocVersion()`), see `SOCS`.
- `_weight_norm`: op_plugin/ops/opapi/WeightNormKernelNpuOpApi.cpp (NPU and AutogradNPU):
  `v.contiguous() * g.contiguous().div(norm_except_dim(v, 2, dim))`.
- `one_hot`: op_plugin/ops/opapi/OneHotKernelNpuOpApi.cpp (NPU and AutogradNPU). On fake tensors
  it returns `eq(self.unsqueeze(-1), arange(num_classes, long)).to(long)` and refuses
  num_classes == -1; torch's CPU decomposition adds `aten._assert_async` range checks, which
  TorchAir cannot lower (Mixtral's router, with experts_implementation="eager").

A Python function dynamo keeps whole as one node (`F.multi_head_attention_forward`, called by
`nn.MultiheadAttention`) calls SDPA inside, where AOT autograd would trace the CPU kernel; such a
node gets a copy of the function whose globals bind those names to the transcriptions (one level
deep: the calls the function itself makes; nothing global is patched).

Where a branch leads to an op this host cannot trace or TorchAir cannot lower, the rewrite fails
naming the op and the branch; it never substitutes another path.
"""
from __future__ import annotations

import functools
import math
import types

import torch

from ..._base.errors import OpPluginError

# The SoC the simulator traces as. torch_npu's SDPA takes a fused branch from Ascend910B1 on
# (c10_npu::SocVersion order: Ascend910 < Ascend310P < Ascend910B < Ascend910_93 < Ascend950).
SOCS = ("Ascend910", "Ascend310P", "Ascend910B", "Ascend910_93", "Ascend950")
_FUSED_FROM = SOCS.index("Ascend910B")
_FUSION_V1_FROM = SOCS.index("Ascend950")
# Default: a SoC whose SDPA path (the math form, on every dtype and shape) TorchAir lowers. On
# Ascend910B/910_93 torch_npu 2.13 calls npu_fusion_attention_v3, for which TorchAir has no
# converter (the compile fails there too); pick them with the npugraph option `soc`.
DEFAULT_SOC = "Ascend910"

# Constants of ScaledDotProductAttentionKernelNpuOpApi.cpp
_ATTENMASK_LIMIT = 2048
_B_LIMIT = 65536
_N_LIMIT = 2048
_FIA_N_LIMIT = 256
_D_LIMIT = 512
_TOKEN_MAX = 2147483647
_LEFT_UP_CAUSAL = 2


def check_soc(soc: str) -> str:
    if soc not in SOCS:
        raise OpPluginError(f"npugraph: soc must be one of {SOCS}, got {soc!r}")
    return soc


def _math(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa):
    # convert_boolean_attn_mask_math: bool mask -> 0 where kept, -inf where masked, query's dtype
    if attn_mask is not None and attn_mask.dtype == torch.bool:
        attn_mask = torch.zeros_like(attn_mask, dtype=query.dtype).masked_fill(attn_mask.logical_not(), -math.inf)
    return torch.ops.aten._scaled_dot_product_attention_math(
        query, key, value, attn_mask, dropout_p, is_causal, None, scale=scale, enable_gqa=enable_gqa)[0]


def _validate(query, key, value, attn_mask):
    if not (query.dtype == key.dtype == value.dtype):
        raise RuntimeError(f"Expected query, key, and value to have the same dtype, got {query.dtype}, "
                           f"{key.dtype}, {value.dtype}")
    if query.dim() < 2 or key.dim() < 2 or value.dim() < 2:
        raise RuntimeError("Expected query, key, and value to all be at least 2 dimensional")
    if attn_mask is not None and attn_mask.dtype not in (torch.bool, query.dtype):
        raise RuntimeError(f"Expected attn_mask dtype to be bool or to match query dtype, got {attn_mask.dtype}")


def _fused_branch(query, key, value, attn_mask, soc_rank) -> bool:
    return (query.dtype in (torch.float16, torch.bfloat16, torch.float32)
            and (attn_mask is None or attn_mask.dtype == torch.bool)
            and query.dim() == key.dim() == value.dim() == 4
            and query.size(1) <= _N_LIMIT and query.size(3) <= _D_LIMIT and key.size(1) <= _N_LIMIT
            and query.size(1) % key.size(1) == 0 and query.size(1) // key.size(1) > 0
            and soc_rank >= _FUSED_FROM)


def _infer_branch(query, key, value, attn_mask, soc_rank) -> bool:
    if query.requires_grad or key.requires_grad or value.requires_grad:
        return False
    if not (query.dim() == key.dim() == value.dim() == 4) or 0 in tuple(query.shape):
        return False
    if query.dtype not in (torch.float16, torch.bfloat16) or query.size(3) % 16 != 0:
        return False
    if attn_mask is not None and not (attn_mask.dtype == torch.bool and attn_mask.size(-2) == query.size(2)
                                      and attn_mask.size(-1) == key.size(2)):
        return False
    same_kv = key.shape == value.shape and query.size(0) == key.size(0) and query.size(3) == key.size(3)
    return (same_kv and query.size(0) <= _B_LIMIT and query.size(1) <= _FIA_N_LIMIT
            and query.size(3) <= _D_LIMIT and key.size(1) <= _FIA_N_LIMIT and key.size(1) != 0
            and query.size(1) % key.size(1) == 0 and query.size(1) // key.size(1) <= 64
            and soc_rank >= _FUSED_FROM)


def _npu_fused_mask(query, key, attn_mask, is_causal):
    """preprocess_attn_mask_for_npu + convert_boolean_attn_mask: True marks a masked position."""
    if is_causal:
        if attn_mask is not None:
            raise RuntimeError("The attn_mask should be none when is_causal is true")
        ones = torch.ones(_ATTENMASK_LIMIT, _ATTENMASK_LIMIT, dtype=torch.bool, device=query.device)
        return torch.triu(ones, 1)
    if attn_mask is None:
        return None
    b, n, sq, skv = query.size(0), query.size(1), query.size(2), key.size(2)
    target = (b, n, sq, skv)
    mask = attn_mask
    if 2 <= mask.dim() <= 4 and all(m == t or m == 1 for m, t in zip(mask.shape, target[4 - mask.dim():], strict=True)):
        supported = ((mask.dim() == 2 and tuple(mask.shape) == (sq, skv))
                     or (mask.dim() == 4 and mask.size(2) == sq and mask.size(3) == skv
                         and ((mask.size(0) == b and mask.size(1) in (n, 1))
                              or (mask.size(0), mask.size(1)) == (1, 1))))
        if not supported:
            mask = mask.expand(b, n, sq, skv)
    return torch.logical_not(mask)


def npu_scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, *,
                                     scale=None, enable_gqa=False, soc=DEFAULT_SOC):
    """torch_npu's `scaled_dot_product_attention` (V2R5..newest), as traced on `soc`.

    Under autocast, what the Autocast dispatch key does before any backend kernel runs:
    `scaled_dot_product_attention` is a lower-precision op of autocast (CPU's and the NPU's lists,
    torch's autocast_mode.cpp `lower_precision_fp`), so its floating inputs (mask included) are cast
    to the autocast dtype, and the kernel runs with autocast off. The rewrite replaces the call
    before AOT autograd traces it, i.e. before that key, so it is done here."""
    device = query.device.type
    if torch.is_autocast_enabled(device):
        dtype = torch.get_autocast_dtype(device)
        query, key, value, attn_mask = (t.to(dtype) if t is not None and t.is_floating_point() else t
                                        for t in (query, key, value, attn_mask))
        with torch.autocast(device, enabled=False):
            return npu_scaled_dot_product_attention(query, key, value, attn_mask, dropout_p, is_causal,
                                                    scale=scale, enable_gqa=enable_gqa, soc=soc)
    _validate(query, key, value, attn_mask)
    if query.dtype == torch.float32 and (query.size(-1) % 4 or key.size(-1) % 4 or value.size(-1) % 4):
        return _math(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa)
    # force_math (TORCH_NPU_USE_COMPATIBLE_IMPL, off by default) is not simulated: the default path.
    rank = SOCS.index(soc)
    if _fused_branch(query, key, value, attn_mask, rank):
        if rank < _FUSION_V1_FROM:
            raise OpPluginError(
                f"scaled_dot_product_attention: on {soc} torch_npu calls npu.npu_fusion_attention_v3 (fused branch "
                "of ScaledDotProductAttentionKernelNpuOpApi.cpp), which TorchAir has no converter for; the "
                "compile fails on that NPU too. Compile with options={'soc': 'Ascend910'} (math branch) or "
                "'Ascend950' (npu_fusion_attention).")
        mask = _npu_fused_mask(query, key, attn_mask, is_causal)
        inner_precise = 2 if (not is_causal and query.size(2) > 1 and attn_mask is not None) else 0
        scale_value = scale if scale is not None else 1.0 / math.sqrt(query.size(-1))
        return torch.ops.npu.npu_fusion_attention(
            query, key, value, query.size(1), "BNSD", atten_mask=mask, scale=scale_value, keep_prob=1 - dropout_p,
            pre_tockens=_TOKEN_MAX, next_tockens=0 if is_causal else _TOKEN_MAX, inner_precise=inner_precise,
            sparse_mode=_LEFT_UP_CAUSAL if is_causal else 0, gen_mask_parallel=True, sync=False)[0]
    if _infer_branch(query, key, value, attn_mask, rank):
        raise OpPluginError(
            f"scaled_dot_product_attention: on {soc} torch_npu calls npu.npu_fused_infer_attention_score for "
            f"{query.dtype} inference (ScaledDotProductAttentionKernelNpuOpApi.cpp), for which the simulator has "
            "its schema and Meta but no CPU or GE kernel yet; compile with options={'soc': 'Ascend910'} (math branch).")
    return _math(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa)


def npu_weight_norm(v, g, dim=0):
    """torch_npu's `_weight_norm` (WeightNormKernelNpuOpApi.cpp)."""
    v = v.contiguous()
    return v * g.contiguous().div(torch.norm_except_dim(v, 2, dim))


def npu_one_hot(self, num_classes=-1):
    """torch_npu's `one_hot` as it traces on fake tensors (OneHotKernelNpuOpApi.cpp)."""
    if num_classes == -1:
        raise OpPluginError(
            "one_hot: torch_npu's kernel refuses num_classes=-1 while tracing (OneHotKernelNpuOpApi.cpp: "
            "'FakeTensorMode does not support num_classes == -1.'), so an Ascend host fails too; pass num_classes")
    index = torch.arange(num_classes, dtype=torch.long, device=self.device)
    return torch.eq(self.unsqueeze(-1), index).to(torch.long)


_SDPA_TARGETS = (torch._C._nn.scaled_dot_product_attention, torch.ops.aten.scaled_dot_product_attention.default,
                 torch.ops.aten.scaled_dot_product_attention)
_WEIGHT_NORM_TARGETS = (torch._weight_norm, torch.ops.aten._weight_norm.default, torch.ops.aten._weight_norm)
_ONE_HOT_TARGETS = (torch._C._nn.one_hot, torch.ops.aten.one_hot.default, torch.ops.aten.one_hot)


# Fused fast paths dynamo records as one call, with no transcription here.
_NO_TRANSCRIPTION = {
    torch._transformer_encoder_layer_fwd: (
        "torch_npu registers no NPU kernel for aten._transformer_encoder_layer_fwd (it is not in the wheel's "
        "npu_native_functions_by_codegen.yaml), so tracing nn.TransformerEncoderLayer's inference fast path fails "
        "on an Ascend host too; torch.backends.mha.set_fastpath_enabled(False) takes the path through "
        "F.multi_head_attention_forward, which compiles"),
    torch._native_multi_head_attention: (
        "torch_npu has its own kernel for aten._native_multi_head_attention (npu_native_functions_by_codegen.yaml), "
        "whose trace is not transcribed here; torch.backends.mha.set_fastpath_enabled(False) takes the path "
        "through F.multi_head_attention_forward, which compiles"),
}


def _with_npu_globals(fn, soc):
    """A copy of `fn` whose global names bound to a rewritten torch function call the transcription
    instead, or None if `fn` calls none of them directly."""
    replacements = {}
    for name in fn.__code__.co_names:
        bound = fn.__globals__.get(name)
        if bound is None:
            continue
        if any(bound is t for t in _SDPA_TARGETS):
            replacements[name] = functools.partial(npu_scaled_dot_product_attention, soc=soc)
        elif any(bound is t for t in _WEIGHT_NORM_TARGETS):
            replacements[name] = npu_weight_norm
        elif any(bound is t for t in _ONE_HOT_TARGETS):
            replacements[name] = npu_one_hot
    if not replacements:
        return None
    copy = types.FunctionType(fn.__code__, {**fn.__globals__, **replacements}, fn.__name__, fn.__defaults__,
                              fn.__closure__)
    copy.__kwdefaults__ = fn.__kwdefaults__
    copy.__qualname__ = f"{fn.__qualname__}_as_on_npu"
    copy.__module__ = fn.__module__
    copy.wrapped_for_npu = fn
    if copy.__globals__.get(fn.__name__) is fn:
        # torch functions hand themselves to handle_torch_function by their global name (tensor
        # subclasses such as FakeTensor route through it): that must be the copy too.
        copy.__globals__[fn.__name__] = copy
    return copy


def rewrite_for_npu(gm: torch.fx.GraphModule, soc: str = DEFAULT_SOC) -> list[str]:
    """Replace, in dynamo's graph, the calls whose NPU dispatch differs from the CPU's; returns what was replaced."""
    check_soc(soc)
    replaced = []
    for node in gm.graph.nodes:
        if node.op == "get_attr":
            # the body of a higher-order op (activation checkpointing's tag_activation_checkpoint,
            # torch.cond, ...): a GraphModule of its own, which AOT autograd traces inline
            body = getattr(gm, node.target, None) if isinstance(node.target, str) else None
            if isinstance(body, torch.fx.GraphModule):
                replaced += rewrite_for_npu(body, soc)
            continue
        if node.op != "call_function":
            continue
        if node.target in _NO_TRANSCRIPTION:
            raise OpPluginError(f"npugraph: {_NO_TRANSCRIPTION[node.target]}")
        if node.target in _SDPA_TARGETS:
            node.target = npu_scaled_dot_product_attention
            node.kwargs = {**node.kwargs, "soc": soc}
            replaced.append("scaled_dot_product_attention")
        elif node.target in _WEIGHT_NORM_TARGETS:
            node.target = npu_weight_norm
            replaced.append("_weight_norm")
        elif node.target in _ONE_HOT_TARGETS:
            node.target = npu_one_hot
            replaced.append("one_hot")
        elif isinstance(node.target, types.FunctionType) and not hasattr(node.target, "wrapped_for_npu"):
            copy = _with_npu_globals(node.target, soc)
            if copy is not None:
                node.target = copy
                replaced.append(f"calls in {copy.wrapped_for_npu.__name__}")
    if replaced:
        gm.recompile()
    return replaced

"""Corrections (`when="corrects"`; `registry`) of TorchAir converters that drop a torch_npu argument:
given, it is refused by name on both hosts, as the simulator's eager op refuses it, instead of being
ignored silently (one contract per op, CANN's). Two kinds:

- reserved in torch_npu (documented as not used; CANN's op has no such input):
  `npu_incre_flash_attention` / `npu_prompt_flash_attention`'s `padding_mask` (padding is `atten_mask`,
  `actual_seq_lengths`, `kv_padding_size`); `npu_grouped_matmul`'s `activation_input`,
  `activation_quant_scale`, `activation_quant_offset` (aclnnGroupedMatmulV4: reserved).
- a dtype reinterpretation the converter never reads, so the GE op would see the tensor's storage dtype
  (int8 bytes taken as int8, not as the float8 the user named): `npu_fused_infer_attention_score_v2`'s
  `query_rope_dtype`, `key_rope_dtype`, `key_shared_prefix_dtype`, `value_shared_prefix_dtype`,
  `dequant_scale_key_rope_dtype`;
  `npu_all_to_all_quant_matmul` / `npu_quant_matmul_all_to_all`'s `comm_scale_dtype`,
  `output_scale_dtype`; `npu_add_quant_gmm(_)`'s `group_sizes` (the converter passes group_size 0);
  `npu_kv_rmsnorm_rope_cache_v2_functional`'s `k_cache_dtype`, `ckv_cache_dtype` (the converter has no
  parameter for them: TorchAir's own error was a bare TypeError).

(`npu.npu_moe_distribute_combine`'s reserved `shared_expert_x`, which TorchAir's converter drops too, needs
no correction: the wheel's Meta, `npu_moe_distribute_combine_meta`, has no such parameter, so tracing
refuses it with a TypeError naming it before any converter runs, on an NPU host as here.)
"""
from __future__ import annotations

import torch

from .cases import BF16, F16, Support, T
from .registry import aten_converter
from .schema_defaults import default_mismatches, passing_schema_defaults
from .torchair_api import TorchAirApi

_RESERVED = "a reserved argument of torch_npu's op, which it ignores"
_UNREAD = "TorchAir's converter never reads it, so the graph would compute with the tensor's storage dtype"


def _given(value) -> bool:
    """An optional argument the user set: not None, and not an empty or all-zero list (torch_npu's
    'not set' for `group_sizes`)."""
    if value is None:
        return False
    if isinstance(value, (list, tuple)):
        return any(v is not None and (not isinstance(v, int) or v != 0) for v in value)
    return True


def _refuse_given(op: str, kind: str, why: str, **arguments) -> None:
    for name, value in arguments.items():
        if _given(value):
            raise NotImplementedError(f"npu::{op}: {name}={value!r} is {kind} ({why}); refused instead of "
                                      "dropped silently")


def _original(ta: TorchAirApi):
    """TorchAir's converter, passed the schema's defaults where its own differ (`schema_defaults` leaves
    op_plugin's converters alone, so a correction that hands over to TorchAir's applies them itself:
    npu_prompt_flash_attention's pre_tokens)."""
    missing = default_mismatches(ta.op, ta.original)
    return passing_schema_defaults(ta.original, missing) if missing else ta.original


_PADDING_WHY = "CANN's op has no padding-mask input; mask with atten_mask"


@aten_converter("npu::npu_incre_flash_attention", when="corrects",
                cases=[Support(F16(1, 1, 32), F16(1, 8, 32), F16(1, 8, 32), num_heads=2, scale_value=0.25)])
def npu_incre_flash_attention(ta: TorchAirApi, *args, padding_mask=None, meta_outputs=None, **kwargs):
    """`npu.npu_incre_flash_attention` with `padding_mask`: refused; otherwise TorchAir's IncreFlashAttention."""
    _refuse_given("npu_incre_flash_attention", _RESERVED, _PADDING_WHY, padding_mask=padding_mask)
    return _original(ta)(*args, meta_outputs=meta_outputs, **kwargs)


@aten_converter("npu::npu_prompt_flash_attention", when="corrects",
                cases=[Support(F16(1, 4, 32), F16(1, 4, 32), F16(1, 4, 32), num_heads=2, scale_value=0.25)])
def npu_prompt_flash_attention(ta: TorchAirApi, *args, padding_mask=None, meta_outputs=None, **kwargs):
    """`npu.npu_prompt_flash_attention` with `padding_mask`: refused; otherwise TorchAir's PromptFlashAttention."""
    _refuse_given("npu_prompt_flash_attention", _RESERVED, _PADDING_WHY, padding_mask=padding_mask)
    return _original(ta)(*args, meta_outputs=meta_outputs, **kwargs)


@aten_converter("npu::npu_grouped_matmul", "npu::npu_grouped_matmul.List", when="corrects",
                cases=[Support([F16(4, 8)], [F16(8, 16)], split_item=0, group_type=-1)])
def npu_grouped_matmul(ta: TorchAirApi, *args, activation_input=None, activation_quant_scale=None,
                       activation_quant_offset=None, meta_outputs=None, **kwargs):
    """`npu.npu_grouped_matmul` with an `activation_*` argument: refused; otherwise TorchAir's GroupedMatmul."""
    _refuse_given("npu_grouped_matmul", _RESERVED, "aclnnGroupedMatmulV4 documents it as reserved",
                  activation_input=activation_input, activation_quant_scale=activation_quant_scale,
                  activation_quant_offset=activation_quant_offset)
    return _original(ta)(*args, meta_outputs=meta_outputs, **kwargs)


@aten_converter("npu::npu_fused_infer_attention_score_v2", when="corrects",
                cases=[Support(BF16(1, 4, 32), BF16(1, 4, 32), BF16(1, 4, 32), num_query_heads=1,
                               input_layout="BSH", softmax_scale=0.125)])
def npu_fused_infer_attention_score_v2(ta: TorchAirApi, *args, query_rope_dtype=None, key_rope_dtype=None,
                                       key_shared_prefix_dtype=None, value_shared_prefix_dtype=None,
                                       dequant_scale_key_rope_dtype=None, meta_outputs=None, **kwargs):
    """`npu.npu_fused_infer_attention_score_v2` with a dtype TorchAir's converter ignores: refused."""
    _refuse_given("npu_fused_infer_attention_score_v2", "a dtype reinterpretation", _UNREAD,
                  query_rope_dtype=query_rope_dtype, key_rope_dtype=key_rope_dtype,
                  key_shared_prefix_dtype=key_shared_prefix_dtype,
                  value_shared_prefix_dtype=value_shared_prefix_dtype,
                  dequant_scale_key_rope_dtype=dequant_scale_key_rope_dtype)
    return _original(ta)(*args, meta_outputs=meta_outputs, **kwargs)


@aten_converter("npu::npu_all_to_all_quant_matmul", "npu::npu_quant_matmul_all_to_all", when="corrects")
def npu_all_to_all_quant_matmul(ta: TorchAirApi, *args, comm_scale_dtype=None, output_scale_dtype=None,
                                meta_outputs=None, **kwargs):
    """The two all-to-all quantised matmuls with a scale dtype TorchAir's converters ignore: refused
    (no declared case: a collective with quantised operands, which the simulator has no kernel for)."""
    _refuse_given(ta.op._schema.name.split("::")[-1], "a dtype reinterpretation", _UNREAD,
                  comm_scale_dtype=comm_scale_dtype, output_scale_dtype=output_scale_dtype)
    return _original(ta)(*args, meta_outputs=meta_outputs, **kwargs)


@aten_converter("npu::npu_add_quant_gmm", "npu::npu_add_quant_gmm_", when="corrects")
def npu_add_quant_gmm(ta: TorchAirApi, *args, group_sizes=None, meta_outputs=None, **kwargs):
    """`npu.npu_add_quant_gmm(_)` with `group_sizes`: refused (TorchAir passes group_size 0 whatever is
    given; no declared case: its converter runs only for Ascend 950, which the simulator does not model)."""
    _refuse_given("npu_add_quant_gmm", "a quantisation block size", "TorchAir's converter passes group_size=0 "
                  "whatever is given", group_sizes=group_sizes)
    return _original(ta)(*args, meta_outputs=meta_outputs, **kwargs)


@aten_converter("npu::npu_kv_rmsnorm_rope_cache_v2_functional", when="corrects",
                cases=[Support(F16(2, 1, 3, 24), F16(16, value_range=(0.5, 1.5)), F16(2, 1, 3, 8), F16(2, 1, 3, 8),
                               T([0, 5, 7, 2, 9, 11], dtype=torch.int64), F16(3, 4, 1, 8), F16(3, 4, 1, 16),
                               cache_mode="PA")])
def npu_kv_rmsnorm_rope_cache_v2_functional(ta: TorchAirApi, *args, k_cache_dtype=None, ckv_cache_dtype=None,
                                            meta_outputs=None, **kwargs):
    """`npu.npu_kv_rmsnorm_rope_cache_v2_functional` with a cache dtype: refused by name (TorchAir's converter
    has no parameter for them)."""
    _refuse_given("npu_kv_rmsnorm_rope_cache_v2_functional", "a cache dtype reinterpretation (hifloat8/fp8 "
                  "caches)", "TorchAir's converter has no parameter for it", k_cache_dtype=k_cache_dtype,
                  ckv_cache_dtype=ckv_cache_dtype)
    return _original(ta)(*args, meta_outputs=meta_outputs, **kwargs)

"""Corrections (`when="corrects"`; `registry`) of TorchAir converters that drop a torch_npu argument
torch_npu documents as reserved: given, it is refused by name on both hosts, as the simulator's eager
op refuses it, instead of being ignored silently (one contract per op, CANN's).

- `npu.npu_incre_flash_attention` / `npu_prompt_flash_attention`'s `padding_mask`: torch_npu's docs
  (reserved, not used); aclnnIncreFlashAttention / PromptFlashAttention and the GE ops have no padding
  mask (padding is `atten_mask`, `actual_seq_lengths`, `kv_padding_size`); TorchAir's converters drop it.

(`npu.npu_moe_distribute_combine`'s reserved `shared_expert_x`, which TorchAir's converter drops too, needs
no correction: the wheel's Meta, `npu_moe_distribute_combine_meta`, has no such parameter, so tracing
refuses it with a TypeError naming it before any converter runs, on an NPU host as here.)
"""
from __future__ import annotations

from .cases import F16, Support
from .registry import aten_converter
from .schema_defaults import default_mismatches, passing_schema_defaults
from .torchair_api import TorchAirApi


def _refuse_given(op: str, name: str, value, why: str) -> None:
    if value is not None:
        raise NotImplementedError(f"npu::{op}: {name} is a reserved argument of torch_npu's op, which it ignores "
                                  f"({why}); refused instead of dropped silently")


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
    _refuse_given("npu_incre_flash_attention", "padding_mask", padding_mask, _PADDING_WHY)
    return _original(ta)(*args, meta_outputs=meta_outputs, **kwargs)


@aten_converter("npu::npu_prompt_flash_attention", when="corrects",
                cases=[Support(F16(1, 4, 32), F16(1, 4, 32), F16(1, 4, 32), num_heads=2, scale_value=0.25)])
def npu_prompt_flash_attention(ta: TorchAirApi, *args, padding_mask=None, meta_outputs=None, **kwargs):
    """`npu.npu_prompt_flash_attention` with `padding_mask`: refused; otherwise TorchAir's PromptFlashAttention."""
    _refuse_given("npu_prompt_flash_attention", "padding_mask", padding_mask, _PADDING_WHY)
    return _original(ta)(*args, meta_outputs=meta_outputs, **kwargs)

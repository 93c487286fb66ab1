"""The zoo's recent tier (issue 34): further public configurations, as outside checks run them.

Recent LLM families, mixtures of experts, vision transformers, audio and a diffusion UNet and VAE,
built from the libraries' own model code (transformers, diffusers) with tiny configs (2 layers,
hidden 32, 4 heads, vocab 96, 32x32 images) and random weights; nothing is downloaded. The entries
are conftest's `ZooModel`s, so test_zoo.py's test bodies run them unchanged (test_zoo_recent.py);
`make zoo` runs them, `make zoo-npu` does not (CI time).
"""
from __future__ import annotations

import torch

from tests.zoo.conftest import (IMAGE_SIZES, TEXT_SIZES, VOCAB, ZooModel, _class_labels, _lm_labels, _seeded,
                                _token_inputs)

# the decoders' shared shape: 2 layers, hidden 32, 4 query heads over 2 key/value heads of dim 8
_DECODER = dict(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                num_key_value_heads=2, max_position_embeddings=64, pad_token_id=0, bos_token_id=1, eos_token_id=2)
_MOE = dict(num_experts_per_tok=2)


def _qwen3():
    from transformers import Qwen3Config, Qwen3ForCausalLM
    return Qwen3ForCausalLM(Qwen3Config(**_DECODER, head_dim=8))


def _gemma2():
    """Alternating sliding-window (4) and global attention, tanh soft-capping of scores and logits."""
    from transformers import Gemma2Config, Gemma2ForCausalLM
    return Gemma2ForCausalLM(Gemma2Config(**_DECODER, head_dim=8, query_pre_attn_scalar=8, sliding_window=4,
                                          attn_logit_softcapping=50.0, final_logit_softcapping=30.0))


def _gemma3_text():
    """QK-norm, one sliding-window (4) layer and one global layer with their own rotary bases."""
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig
    return Gemma3ForCausalLM(Gemma3TextConfig(**_DECODER, head_dim=8, query_pre_attn_scalar=8, sliding_window=4,
                                              layer_types=["sliding_attention", "full_attention"]))


def _phi3():
    """Fused qkv and gate_up projections."""
    from transformers import Phi3Config, Phi3ForCausalLM
    return Phi3ForCausalLM(Phi3Config(**_DECODER))


def _olmo2():
    """RMSNorm after attention and MLP (not before), QK-norm over all heads."""
    from transformers import Olmo2Config, Olmo2ForCausalLM
    return Olmo2ForCausalLM(Olmo2Config(**_DECODER))


def _granite():
    """Llama with embedding, residual, attention and logit multipliers."""
    from transformers import GraniteConfig, GraniteForCausalLM
    return GraniteForCausalLM(GraniteConfig(**_DECODER, embedding_multiplier=2.0, residual_multiplier=0.5,
                                            attention_multiplier=0.2, logits_scaling=2.0))


def _cohere():
    """Parallel attention and MLP after one LayerNorm, interleaved rotary, scaled logits."""
    from transformers import CohereConfig, CohereForCausalLM
    return CohereForCausalLM(CohereConfig(**_DECODER, logit_scale=0.5, use_qk_norm=True))


def _deepseek_v3():
    """Multi-head latent attention (low-rank q and kv, a shared rotary key) and, after one dense layer,
    an MoE with a shared expert and group-limited top-k routing with a score-correction bias."""
    from transformers import DeepseekV3Config, DeepseekV3ForCausalLM
    config = DeepseekV3Config(**{**_DECODER, "num_key_value_heads": 4}, **_MOE, moe_intermediate_size=32,
                              n_routed_experts=4, n_shared_experts=1, n_group=2, topk_group=1, first_k_dense_replace=1,
                              q_lora_rank=16, kv_lora_rank=16, qk_rope_head_dim=4, qk_nope_head_dim=8, v_head_dim=8)
    model = DeepseekV3ForCausalLM(config)
    with torch.no_grad():  # zero at init: a bias that changes the routing makes the case able to fail on it
        for module in model.modules():
            if hasattr(module, "e_score_correction_bias"):
                module.e_score_correction_bias.normal_(0, 0.1)
    return model


def _qwen3_moe():
    from transformers import Qwen3MoeConfig, Qwen3MoeForCausalLM
    return Qwen3MoeForCausalLM(Qwen3MoeConfig(**_DECODER, **_MOE, head_dim=8, moe_intermediate_size=32,
                                              num_experts=4, norm_topk_prob=True))


def _granite_moe():
    from transformers import GraniteMoeConfig, GraniteMoeForCausalLM
    return GraniteMoeForCausalLM(GraniteMoeConfig(**_DECODER, **_MOE, num_local_experts=4))


def _olmoe():
    from transformers import OlmoeConfig, OlmoeForCausalLM
    return OlmoeForCausalLM(OlmoeConfig(**_DECODER, **_MOE, num_experts=4))


def _fixed(tensor, *dims):
    """`tensor` with `dims` marked static for dynamo: the sizes the three dynamic-run sizes never vary
    (channels, height, width, mel bins) stay static under dynamic=True, the batch (and length) symbolic.
    Symbolic image sizes cost torch's own tracing (the same under aot_eager) 36 s (VAE) to 90 s (Swin)."""
    for dim in dims:
        torch._dynamo.mark_static(tensor, dim)
    return tensor


def _images(batch, _length):
    g = torch.Generator().manual_seed(batch)
    return {"pixel_values": _fixed(torch.randn(batch, 3, 32, 32, generator=g), 1, 2, 3)}


_VIT = dict(image_size=32, patch_size=8, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
            intermediate_size=64)


def _deit():
    """ViT with a distillation token beside the class token.

    transformers initialises both tokens and the position embeddings to zero: the class token then
    enters LayerNorm (eps 1e-12) as a zero vector and its gradient is rounding noise times 1e6 (about
    1e5 in size; eager fp32 itself departs from a float64 run by 0.06). Trained DeiTs have nonzero
    tokens: std 0.02 as ViT initialises them."""
    from transformers import DeiTConfig, DeiTModel
    model = DeiTModel(DeiTConfig(**_VIT), add_pooling_layer=True)
    with torch.no_grad():
        for token in (model.embeddings.cls_token, model.embeddings.distillation_token,
                      model.embeddings.position_embeddings):
            torch.nn.init.trunc_normal_(token, std=0.02)
    return model


def _dinov2():
    """Layer scale, and position embeddings interpolated (bicubic) to the image's patch grid."""
    from transformers import Dinov2Config, Dinov2Model
    vit = {k: v for k, v in _VIT.items() if k != "intermediate_size"}
    return Dinov2Model(Dinov2Config(**vit, mlp_ratio=2))


def _siglip_vision():
    """SigLIP's vision tower: no class token, a multi-head attention pooling head."""
    from transformers import SiglipVisionConfig, SiglipVisionModel
    return SiglipVisionModel(SiglipVisionConfig(**_VIT))


def _swin():
    """Shifted windows (window 4 on an 8x8 patch grid), patch merging between the two stages."""
    from transformers import SwinConfig, SwinModel
    return SwinModel(SwinConfig(image_size=32, patch_size=4, embed_dim=16, depths=[1, 1], num_heads=[2, 2],
                                window_size=4))


def _hubert():
    """HuBERT's encoder; SpecAugment masking off so its training step is deterministic (the test turns
    dropouts off the same way)."""
    from transformers import HubertConfig, HubertModel
    return HubertModel(HubertConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                                    conv_dim=(16, 16), conv_stride=(5, 2), conv_kernel=(10, 3),
                                    num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=4,
                                    mask_time_prob=0.0, mask_feature_prob=0.0))


def _whisper_config():
    from transformers import WhisperConfig
    return WhisperConfig(vocab_size=VOCAB, d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                         decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64, num_mel_bins=16,
                         max_source_positions=16, max_target_positions=32, pad_token_id=0, bos_token_id=1,
                         eos_token_id=2, decoder_start_token_id=1, suppress_tokens=None, begin_suppress_tokens=None)


def _whisper():
    from transformers import WhisperForConditionalGeneration
    return WhisperForConditionalGeneration(_whisper_config())


def _whisper_inputs(batch, length):
    """32 mel frames (2 * max_source_positions, fixed) and `length` decoder tokens."""
    g = torch.Generator().manual_seed(batch * 1000 + length)
    return {"input_features": _fixed(torch.randn(batch, 16, 32, generator=g), 1, 2),
            "decoder_input_ids": torch.randint(0, VOCAB, (batch, length), generator=g)}


def _whisper_labels(inputs):
    return inputs["decoder_input_ids"]


def _audio(batch, length):
    g = torch.Generator().manual_seed(batch * 1000 + length)
    return {"input_values": torch.randn(batch, length, generator=g)}


AUDIO_SIZES = ((2, 400), (3, 560), (4, 720))


def _unet():
    """Stable Diffusion's UNet layout: a cross-attention down block and up block around a mid block,
    timestep embedding, GroupNorm; 8x8 latents with 4 channels."""
    from diffusers import UNet2DConditionModel
    return UNet2DConditionModel(sample_size=8, in_channels=4, out_channels=4, layers_per_block=1,
                                block_out_channels=(16, 32), norm_num_groups=8, cross_attention_dim=16,
                                attention_head_dim=4,
                                down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
                                up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"))


def _unet_inputs(batch, _length):
    """Latents, one timestep per sample and 8 text-encoder states to attend to (a pipeline's prompt
    length is fixed, its batch is not)."""
    g = torch.Generator().manual_seed(batch)
    return {"sample": _fixed(torch.randn(batch, 4, 8, 8, generator=g), 1, 2, 3),
            "timestep": torch.randint(0, 1000, (batch,), generator=g),
            "encoder_hidden_states": _fixed(torch.randn(batch, 8, 16, generator=g), 1, 2)}


def _vae():
    """Stable Diffusion's VAE (AutoencoderKL): encoder, the posterior's mode, decoder with a mid-block
    attention; 32x32 images to 8x8 latents."""
    from diffusers import AutoencoderKL
    return AutoencoderKL(in_channels=3, out_channels=3, latent_channels=4, block_out_channels=(16, 32),
                         down_block_types=("DownEncoderBlock2D", "DownEncoderBlock2D"),
                         up_block_types=("UpDecoderBlock2D", "UpDecoderBlock2D"), layers_per_block=1,
                         norm_num_groups=8, sample_size=32)


def _vae_inputs(batch, _length):
    g = torch.Generator().manual_seed(batch)
    return {"sample": _fixed(torch.randn(batch, 3, 32, 32, generator=g), 1, 2, 3)}


def _decoder(name, build):
    return ZooModel(name, _seeded(build), _token_inputs, TEXT_SIZES, "decoder", _lm_labels)


def _vision(name, build):
    return ZooModel(name, _seeded(build), _images, IMAGE_SIZES, "vision", _class_labels)


RECENT = {
    m.name: m for m in (
        _decoder("qwen3", _qwen3),
        _decoder("gemma2", _gemma2),
        _decoder("gemma3_text", _gemma3_text),
        _decoder("phi3", _phi3),
        _decoder("olmo2", _olmo2),
        _decoder("granite", _granite),
        _decoder("cohere", _cohere),
        _decoder("deepseek_v3", _deepseek_v3),
        _decoder("qwen3_moe", _qwen3_moe),
        _decoder("granite_moe", _granite_moe),
        _decoder("olmoe", _olmoe),
        _vision("deit", _deit),
        _vision("dinov2", _dinov2),
        _vision("siglip_vision", _siglip_vision),
        _vision("swin", _swin),
        ZooModel("hubert", _seeded(_hubert), _audio, AUDIO_SIZES, "audio", _class_labels),
        ZooModel("whisper", _seeded(_whisper), _whisper_inputs, TEXT_SIZES, "encoder-decoder", _whisper_labels),
        ZooModel("sd_unet", _seeded(_unet), _unet_inputs, IMAGE_SIZES, "diffusion", _class_labels),
        ZooModel("sd_vae", _seeded(_vae), _vae_inputs, IMAGE_SIZES, "diffusion", _class_labels),
    )
}

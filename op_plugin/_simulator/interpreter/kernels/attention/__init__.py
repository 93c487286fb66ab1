"""Attention ops (CANN ops-transformer ``attention/``) and the KV-cache writes that feed them.

* flash_attention: FlashAttentionScore, FlashAttentionScoreGrad (and the attention core the others use)
* infer_attention: PromptFlashAttention, IncreFlashAttention, FusedInferAttentionScore
* kv_cache: ScatterPaKvCache, KvRmsNormRopeCache
* mla_prolog: MlaProlog, MlaPrologV2, MlaPrologV3
"""

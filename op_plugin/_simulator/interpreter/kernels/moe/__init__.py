"""Mixture-of-experts routing ops (CANN ops-transformer ``moe/``).

* routing: MoeGatingTopK(Softmax), MoeInitRouting(V3), MoeFinalizeRouting(V2), MoeComputeExpertTokens
"""

"""Positional-embedding ops (CANN ops-transformer ``posembedding/``).

* rope: RotaryMul(Grad), RotaryPositionEmbedding(Grad), ApplyRotaryPosEmb, InterleaveRope
"""

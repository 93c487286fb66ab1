"""Matmul ops (CANN ops-nn ``matmul/``).

* matmul: MatMul(V2, V3), BatchMatMul(V2, V3), TransposeBatchMatMul
* quant_matmul: QuantBatchMatmulV3, WeightQuantBatchMatmulV2
"""

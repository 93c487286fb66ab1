"""Index ops (CANN ops-nn ``index/``).

* embedding: EmbeddingDenseGrad
* gather_scatter: Gather*, IndexByTensor, ScatterElements, InplaceIndexAdd, ReverseV2, OneHot, EmbeddingBag
* scatter: ScatterNdUpdate, ScatterList, QuantUpdateScatter
"""

"""MC2 ops: computation fused with communication (CANN ops-transformer ``mc2/``).

* matmul_comm: MatmulAllReduce, AllGatherMatmul(V2), MatmulReduceScatter(V2)
* moe_distribute: MoeDistributeDispatch(V2), MoeDistributeCombine(V2)
"""

"""Hcom collectives (CANN's HCCL ops), run on torch.distributed.

* collectives: HcomAllReduce, HcomAllGather(V), HcomReduceScatter(V), HcomBroadcast, HcomAllToAll(V), HcomSend,
  HcomReceive
"""

"""FFN ops (CANN ops-transformer ``ffn/``).

* afd_scheduler: AttentionWorkerScheduler, FfnWorkerScheduler (refused by name)
* ffn: FFN
"""

"""Grouped matmul (CANN ops-transformer ``gmm/``).

* grouped_matmul: GroupedMatmul
"""

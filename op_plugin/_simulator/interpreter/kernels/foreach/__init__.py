"""Foreach ops (CANN ops-nn ``foreach/``).

* foreach: every Foreach* type TorchAir's _foreach_* converters emit
"""

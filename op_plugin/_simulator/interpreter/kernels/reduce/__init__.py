"""Reduction ops (CANN ops-math ``reduce/``).

* reduction: Reduce*, ArgMax/ArgMin(WithValue), Cumsum, ReduceStd*, LpNormV2, Histogram
"""

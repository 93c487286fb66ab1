"""Pooling ops (CANN ops-nn ``pooling/``), forward and backward side by side.

* avg_pool: AvgPoolV2(Grad), AdaptiveAvgPool2d(Grad)
* max_pool: MaxPoolWithArgmaxV1/V3, MaxPool3DWithArgmaxV2, MaxPoolGradWithArgmaxV1/V3
"""

"""Image ops (resampling).

* sampling: ResizeNearestNeighborV2(Grad), GridSampler2D/3D, GridSampler2DGrad
"""

"""Normalisation ops (CANN ops-nn ``norm/``), forward and backward side by side.

* batch_norm: BatchNormV3, BNInfer, the BN*Grad ops, SyncBatchNorm*
* group_norm: GroupNorm(V2), GroupNormGrad, GroupNormSilu
* layer_norm: LayerNorm(V3, V4), LayerNormGradV3
* rms_norm: RmsNorm, AddRmsNorm, AddRmsNormCast, RmsNormGrad, RmsNormGradQuant
* rms_norm_quant: AddRmsNormQuant, AddRmsNormDynamicQuant, RmsNormDynamicMxQuant, AddRmsNormDynamicMxQuant
"""

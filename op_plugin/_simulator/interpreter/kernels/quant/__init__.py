"""Quantisation ops (CANN ops-nn ``quant/``).

* dynamic_quant: DynamicQuant(V2), AscendQuantV2, Quantize, AscendAntiQuantV2, TransQuantParamV2
* mx_quant: DynamicMxQuant(WithDualAxis), DynamicBlockMxQuant, GroupedDynamicMxQuant, AntiMxQuant,
  DynamicDualLevelMxQuant
* quant_max: QuantMax, GroupedQuantMax
* rotate_quant: RotateQuant, FlatQuant
* swiglu_quant: DequantSwigluQuant, SwigluMxQuant
"""

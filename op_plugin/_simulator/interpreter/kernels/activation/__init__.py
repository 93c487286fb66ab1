"""Activation ops (CANN ops-nn ``activation/``), forward and backward side by side.

* pointwise: the element-wise activations (Gelu, Relu, Swish, Elu, HardSwish, Mish, Softplus, ThresholdV2, ...) and
  their *Grad
* softmax: SoftmaxV2, LogSoftmaxV2, their grads, MaskedSoftmaxWithRelPosBias
* swiglu: GLU, GLUGrad, SwiGlu, SwiGluGrad
"""

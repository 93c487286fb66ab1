"""Convolution ops (CANN ops-nn ``conv/``).

* convolution: Conv2D/3D, Conv2D/3DTranspose, Im2col, Col2im, Conv2D/3DBackpropInput, Conv2D/3DBackpropFilter
"""

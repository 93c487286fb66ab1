"""Reference kernels and backward formulas of the shipped ops, one module per file in yaml/.

Installed as op_plugin.kernels (never as a top-level `kernels`). These are the eager
implementations used on every device and by the CPU simulator for custom GE types; half-precision
inputs are computed in float32 and cast back, as the NPU kernels do. Every module placed here is
imported when op_plugin is, so its decorators register.
"""
from op_plugin._registry.piece_modules import import_piece_modules

import_piece_modules(__name__, __path__)

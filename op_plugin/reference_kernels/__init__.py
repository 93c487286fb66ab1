"""Reference kernels and backward formulas of the shipped ops, one module per file in yaml/.

These are the eager implementations used on every device and by the CPU simulator for custom GE
types; half-precision inputs are computed in float32 and cast back, as the NPU kernels do. Every
module placed here is imported when op_plugin is, so its decorators register.

They live inside the package (not in a root folder like meta/ and converters/, which the contract
places there): a root `kernels/` claimed the top-level import name `kernels` whenever the
repository root was on sys.path, shadowing the PyPI package of that name that transformers probes.
Not to be confused with `op_plugin._simulator.interpreter.kernels`, the GE executor's kernels of
built-in GE types.
"""
from op_plugin._registry.piece_modules import import_piece_modules

import_piece_modules(__name__, __path__)

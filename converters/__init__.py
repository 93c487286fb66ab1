"""Hand-written GE converters for ops whose lowering the YAML mapping cannot express.

Imported as op_plugin.converters (never as a top-level `converters`). Each module registers its
converters with @op_plugin.converter; TorchAir is imported only when the backend needs it.
"""
from . import swiglu_mlp  # noqa: F401

"""Hand-written GE converters for ops whose lowering the YAML mapping cannot express.

Installed as op_plugin.converters (never as a top-level `converters`). Every module placed here is
imported when op_plugin is and registers its converters with the `converter` decorator; TorchAir
itself is imported only inside a converter, when the backend runs it.
"""
from op_plugin._registry.piece_modules import import_piece_modules

import_piece_modules(__name__, __path__)

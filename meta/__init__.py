"""Hand-written Meta functions for ops whose output rule the YAML `outputs:` cannot express.

Installed as op_plugin.meta_functions: not op_plugin.meta, which is the @op_plugin.meta decorator
(a package of that name would replace the decorator the moment it is imported). Every module
placed here is imported when op_plugin is, so its @meta functions register.
"""
from op_plugin._registry.piece_modules import import_piece_modules

import_piece_modules(__name__, __path__)

"""Hand-written Meta functions for ops whose output rule YAML cannot express (imported as op_plugin.meta)."""

"""Hand-written GE converters for ops whose lowering the YAML mapping cannot express (imported as op_plugin.converters)."""

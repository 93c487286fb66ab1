"""`op-plugin inspect` and `op_plugin.inspect`: the FX and GE graphs of a model (`inspect`), GE graphs
as text (`graph_text`), their nodes classified (`graph_classes`: data inputs, YAML ops, built-ins) and
drawn with Graphviz (`graph_picture`, which `op-plugin compare` uses too); the command (`command`)."""

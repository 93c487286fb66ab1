"""Stage 6: tools over the pipeline, for users and for the project's own docs.

Owns `op_plugin.inspect` (`inspect`), GE graphs as text (`graph_text`) and as Graphviz pictures
(`graph_picture`), msOpGen JSON for custom GE types (`msopgen`), the demo (`demo`) and the
generated page of executor op types (`oplist`).

May import: every stage below (`_base`, `_spec`, `_ge`, `_registry`, `_lowering`, `_simulator`,
`_backend`). Nothing imports the tools but the public package, the CLI and `testing`.
"""

"""Stage 1, the YAML side: from a file to frozen, validated `OpSpec`s.

Owns the safe YAML reader with its line map (`yaml_source`), the ATen schema seen through argument
kinds (`schema`), the `size:` language (`size_expr`), dtype names (`dtypes`), the spec records
(`model`) and their validation (`parse`, `parse_ge`, `parse_samples`). Everything a YAML entry can
get wrong is reported here with file, line, op and field, before anything is registered.

May import: `op_plugin._base`, torch, PyYAML. Nothing else of op_plugin.
"""

"""`op-plugin test` and `op_plugin.testing`: a user's own ops checked from their YAML samples. The
run over ops x samples x checks and its report (`runner`), each check (`checks`), sample cases
(`samples`, `default_samples` for an op without samples), oracles and golden values (`oracles`),
error messages trimmed for a table (`error_text`), a backend that counts compiles
(`counting_backend`); the command (`command`)."""

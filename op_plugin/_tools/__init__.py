"""Stage 6: tools over the pipeline, for users and for the project's own docs, one package per
`op-plugin` command family; each holds its command objects (`command.py`, listed in `op_plugin.cli`'s
table) beside the work they run:

- `yaml_ops`: `validate`, `list`
- `demo`: `demo` (the demo model, `demo.model`)
- `inspect`: `inspect` and `op_plugin.inspect`; GE graphs as text, classified and drawn
- `ascend_c`: `msopgen` (msOpGen JSON), `opproto` (REG_OP prototypes with infer functions)
- `declared`: `declared-cases` (TorchAir's declared converter cases as a suite)
- `user_tests`: `test` and `op_plugin.testing` (a user's ops checked from their YAML samples)
- `compare`: `compare` and `op_plugin.compare` (per FX node accuracy, data dumps diffed)
- `simulator_setup`: `setup-simulator` (the pinned torch-npu wheel unpacked for the CPU simulator)
- `virtual_npu`: `run` (any command run with the virtual NPU active, docs/virtual-npu.md)
- `_shared`: what several commands use (the `Command` base, MODULE:FACTORY loading, backend flags,
  progress bars, the tolerance rule, `--version`)

The generated doc pages are modules run with `python -m`: `oplist` (the executor's op types,
docs/ge-executor-ops.md) and `aten_gaps` (aten ops without a converter).

May import: every stage below (`_base`, `_spec`, `_ge`, `_registry`, `_lowering`, `_simulator`,
`_backend`). Nothing imports the tools but the public package, the CLI, `testing` and
`_testing_harness`; a command never imports `op_plugin.cli`.
"""

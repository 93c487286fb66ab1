"""`op-plugin compare` and `op_plugin.compare`: per FX node, where graph mode (GE on the simulator)
departs from eager (`per_node`), its report (`report`), two data-dump folders diffed op by op
(`dumps`); the command (`command`)."""

"""Stage 3: YAML ops lowered to GE IR through TorchAir's converter registry.

Owns what a YAML `ge:` mapping means in GE terms (`mapping`: output names, the IR prototype of a
custom type, the check against a built-in prototype), the converters generated from it
(`converters`), and their installation on a TorchAir module, for every op loaded or decorated
before or after (`install`). Host-independent: the same code runs against torch_npu's TorchAir on
an Ascend host and the simulator's on a CPU host, and a host adds its own per-op pieces through
the `op_hook` of `install_lowering`.

May import: `op_plugin._base`, `_spec`, `_ge`, `_registry`, torch. Never the simulator or the
backend; TorchAir only as the module handed to `install_lowering`.
"""

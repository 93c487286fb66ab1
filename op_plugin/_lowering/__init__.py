"""Stage 3: YAML ops lowered to GE IR through TorchAir's converter registry.

Owns the check of a YAML `ge:` mapping against a built-in GE prototype (`mapping`), the
converters generated from the mapping (`converters`), and their installation on a TorchAir
module, for every op loaded or decorated before or after (`install`); op_plugin's own converters
for aten ops TorchAir does not lower (`aten_converters`, `moe_converters`) and its corrections of
TorchAir's lowering (`numeric_corrections`). Host-independent: the same code runs against
torch_npu's TorchAir on an Ascend host and the simulator's on a CPU host, and a host adds its own
per-op pieces through the `op_hook` of `install_lowering`.

May import: `op_plugin._base`, `_spec`, `_ge`, `_registry`, torch. Never the simulator or the
backend; TorchAir only as the module handed to `install_lowering`.
"""

"""Stage 3: YAML ops lowered to GE IR through TorchAir's converter registry.

Owns the check of a YAML `ge:` mapping against a built-in GE prototype (`mapping`), the
converters generated from the mapping (`converters`), and their installation on a TorchAir
module, for every op loaded or decorated before or after (`install`); op_plugin's own converters
in one registry (`registry`: declared with `@aten_converter` / `@library_converter`, installed by
`when`, taken back by handle), which receive TorchAir as one object (`torchair_api`): those for
aten ops TorchAir does not lower (`aten_converters`, `moe_converters`), the completions of
TorchAir's converters (`aten_completions`; `collective_converters`: reduce_type "avg" and the
non-quantised npu_mm_all_reduce_base) and the corrections of its lowering
(`numeric_corrections`; `graph_corrections`: graphs GE refuses), each with TorchAir-style declared
cases (`cases`). Host-independent: the
same code runs against torch_npu's TorchAir on an Ascend host and the simulator's on a CPU host,
and a host adds its own per-op pieces through the `op_hook` of `install_converters`.

May import: `op_plugin._base`, `_spec`, `_ge`, `_registry`, torch. Never the simulator or the
backend; TorchAir only as the module handed to `install_converters`.
"""
# The converter modules declare op_plugin's converters in `registry` when imported: every module of
# the package is imported here (found, not listed: a new converter module is a new file), so importing
# any part of the lowering makes the registry complete.
import importlib as _importlib
import pkgutil as _pkgutil

for _module in sorted(info.name for info in _pkgutil.iter_modules(__path__) if not info.name.startswith("_")):
    _importlib.import_module(f"{__name__}.{_module}")

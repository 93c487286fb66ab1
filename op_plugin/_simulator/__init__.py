"""CPU simulator for TorchAir (private): runs TorchAir's own Python on a host without CANN.

* ``install_simulator`` / ``simulator_dir``: the pinned torch-npu wheel, unpacked aside.
* ``load_torchair`` / ``SimulatorUnavailable``: import TorchAir with a native stand-in, side effects contained.
* ``execute_graph`` / ``compile_graph`` / ``register_ge_kernel``: the GE executor and its kernel table.
* ``register_ir_prototype`` / ``IrPrototype``: GE IR prototypes TorchAir asks the native library for.
* ``capture_graphs`` / ``loaded_graphs``: the GE graphs TorchAir handed to the simulator.

Names are imported on first use, so ``python -m op_plugin._simulator.install`` does not pay
for importing torch.
"""

import importlib

_EXPORTS = {
    "GeExecutionError": "._ge_executor",
    "compile_graph": "._ge_executor",
    "execute_graph": "._ge_executor",
    "register_ge_kernel": "._ge_registry",
    "supported_op_types": "._ge_registry",
    "install_simulator": "._install",
    "simulator_dir": "._install",
    "IrPrototype": "._ir_registry",
    "register_ir_prototype": "._ir_registry",
    "SimulatorUnavailable": "._loader",
    "load_torchair": "._loader",
    "capture_graphs": "._native_stub",
    "loaded_graphs": "._native_stub",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name):
    module_name = _EXPORTS.get(name)
    if module_name is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module_name, __name__), name)
    globals()[name] = value  # cache: later lookups skip __getattr__
    return value


def __dir__():
    return sorted(set(globals()) | set(_EXPORTS))

"""Stage 4 on a CPU host: TorchAir's own Python run without CANN, and the GE graph run on the CPU.

Owns the pinned torch-npu wheel unpacked aside (`install`), TorchAir imported with its side
effects contained (`loader`), the stand-in for TorchAir's one native module (`native_stub`), the
IR prototypes it answers (`ir_registry`), the GE executor (`executor`), the CPU kernels of
built-in GE types (`kernels`), the per-op pieces of YAML ops with custom GE types
(`custom_ops`, the `op_hook` of the lowering), torch_npu's own operators defined from the wheel
(`npu_ops`, `npu_ops_wheel`, `npu_ops_reference`, `npu_ops_attention`; docs/torch-npu-ops.md),
the FX shapes recorded during lowering (`fx_meta`), and the containment of TorchAir's torch
patches (`torchair_patches`) and its contained fixes (`torchair_fixes`), and TorchAir's
collective remaps in place before a distributed process's first trace (`distributed`).

May import: `op_plugin._base`, `_ge`, `_spec`, `_registry`, `_lowering`, torch, TorchAir (the
unpacked one). Never the backend or the tools. Names below are imported on first use, so
`python -m op_plugin._simulator.hosting.install` does not import the executor.
"""

import importlib

_EXPORTS = {
    "GeExecutionError": ".interpreter.executor",
    "compile_graph": ".interpreter.executor",
    "execute_graph": ".interpreter.executor",
    "register_ge_kernel": ".interpreter.kernels",
    "supported_op_types": ".interpreter.kernels",
    "install_simulator": ".hosting.install",
    "simulator_dir": ".hosting.install",
    "register_ir_prototype": ".hosting.ir_registry",
    "SimulatorUnavailable": ".hosting.loader",
    "load_torchair": ".hosting.loader",
    "capture_graphs": ".hosting.native_stub",
    "loaded_graphs": ".hosting.native_stub",
    "lowering_hook": ".hosting.custom_ops",
    "builtin_ge_types": ".hosting.builtin_types",
    "define_npu_ops": ".npu.ops",
    "load_torchair_before_collectives_trace": ".hosting.collectives_trace",
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

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

TorchAir on a CPU host, two ways: `load_simulated_torchair()` imports it (the loader, what op_plugin's
own steps call before they install anything); `torchair_with_yaml_ops()` also installs every YAML op's
lowering on it (converters, and for custom GE types their IR prototype and executor kernel), which is
what `op_plugin.load_torchair()` returns on a CPU host. `load_torchair`, this package's name for the
loader in earlier versions, now does the full set-up with a DeprecationWarning naming the public call:
scripts that used it got TorchAir without the YAML ops' custom types ("No AscendIR ... was found").
"""

import importlib
import warnings

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
    "load_simulated_torchair": (".hosting.loader", "load_torchair"),
    "capture_graphs": ".hosting.native_stub",
    "loaded_graphs": ".hosting.native_stub",
    "lowering_hook": ".hosting.custom_ops",
    "builtin_ge_types": ".hosting.builtin_types",
    "define_npu_ops": ".npu.ops",
    "load_torchair_before_collectives_trace": ".hosting.collectives_trace",
    "enable_compile_cache": (".hosting.compile_cache", "enable_for"),
    "source_digest": ".hosting.compile_key",
}

__all__ = sorted([*_EXPORTS, "torchair_with_yaml_ops"])


def torchair_with_yaml_ops():
    """The simulator's TorchAir with every YAML op lowered on it: its converter installed, and for a
    custom GE type its IR prototype and executor kernel, now for the YAML loaded so far and at
    `load_yaml` for later files (what `op_plugin.load_torchair()` returns on a CPU host)."""
    from .._lowering.install import install_converters, refresh_library_converters
    from .hosting.custom_ops import lowering_hook
    from .hosting.loader import load_torchair as load

    torchair = load()
    install_converters(torchair, op_hook=lowering_hook)
    refresh_library_converters()  # a model library imported since (transformers' MoE ops)
    return torchair


def load_torchair():
    """Deprecated: use `op_plugin.load_torchair()`. Kept for scripts written against earlier versions,
    where this private name loaded TorchAir without installing the YAML ops' lowering (their custom GE
    types then failed with TorchAir's "No AscendIR ... was found"); it now does the full set-up."""
    warnings.warn("op_plugin._simulator.load_torchair() is private and deprecated: call op_plugin.load_torchair(), "
                  "which returns the same TorchAir with every YAML op lowered on it (done here too)",
                  DeprecationWarning, stacklevel=2)
    return torchair_with_yaml_ops()


def __getattr__(name):
    entry = _EXPORTS.get(name)
    if entry is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module_name, attribute = entry if isinstance(entry, tuple) else (entry, name)
    value = getattr(importlib.import_module(module_name, __name__), attribute)
    globals()[name] = value  # cache: later lookups skip __getattr__
    return value


def __dir__():
    return sorted(set(globals()) | set(_EXPORTS))

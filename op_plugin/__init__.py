"""op_plugin: one YAML entry per custom NPU operator is enough.

Importing op_plugin registers the shipped ops (torch.ops.npu.<name>). For your own ops, write a
YAML file (see docs/yaml-format.md), attach Python pieces with the decorators below and call
`load_yaml` (its handle's `unload()` takes the ops back).

This module is the public API only; the pipeline lives in private packages, one per stage, whose
imports run one way (checked by `lint-imports`, see docs/design.md):
`_base` -> `_ge` -> `_spec` -> `_registry` -> `_lowering` -> `_simulator` -> `_backend` -> `_tools`.

`op_plugin.testing` (checks of your own ops, `@op_plugin.testing.oracle`) is imported on first use.
"""
__version__ = "0.1.0"   # before the imports: `op-plugin --version` reads it from here before they run

# First, before torch: `op-plugin --help` answered, a command's first line printed (_cli_entry.py);
# nothing in any other process.
from . import _cli_entry  # noqa: F401
from . import _backend
from ._backend import NpuGraphConfig, load_torchair, npugraph_backend, register_ge_kernel
from ._base.errors import MissingImplementationError, OpPluginError, YamlSpecError
from ._registry.decorators import backward, converter, meta, reference, setup_context
from ._registry.load import LoadedOps, is_loaded, load_yaml
from ._spec.shipped import shipped_yaml_files

__all__ = [
    "backward", "converter", "is_loaded", "load_torchair", "load_yaml", "LoadedOps", "meta", "reference",
    "setup_context",
    "npugraph_backend", "register_ge_kernel",
    "NpuGraphConfig", "inspect", "InspectReport", "compare", "CompareReport",
    "MissingImplementationError", "OpPluginError", "YamlSpecError", "shipped_yaml_files",
]


def _load_shipped() -> None:
    # The shipped ops' Python pieces (reference kernels, Meta functions, converters) register with
    # the decorators on import; each of these packages imports every module placed in it.
    from . import converters, meta_functions, reference_kernels  # noqa: F401

    for path in shipped_yaml_files():
        load_yaml(path)


_load_shipped()
_backend.prepare_host()


# The tools load on first use: `import op_plugin` stays cheap for a user who only loads YAML (issue 36);
# `op_plugin.testing.oracle` works after a plain `import op_plugin`. Importing a module sets the attribute,
# so this runs once per name.
_LAZY = {"testing": ("testing", None),
         "compare": ("_tools.compare.per_node", "compare"), "CompareReport": ("_tools.compare.report", "CompareReport"),
         "inspect": ("_tools.inspect.inspect", "inspect"), "InspectReport": ("_tools.inspect.inspect", "InspectReport")}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        module_name, attr = _LAZY[name]
        module = importlib.import_module(f"{__name__}.{module_name}")
        return module if attr is None else getattr(module, attr)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))

"""op_plugin: one YAML entry per custom NPU operator is enough.

Importing op_plugin registers the shipped ops (torch.ops.npu.<name>). For your own ops, write a
YAML file (see docs/yaml-format.md), attach Python pieces with the decorators below and call
`load_yaml`.
"""
from ._decorators import backward, converter, meta, reference, setup_context
from ._errors import MissingImplementationError, OpPluginError, YamlSpecError
from ._backend import NpuGraphConfig, npugraph_backend
from ._inspect import InspectReport, inspect
from ._load import load_yaml

__all__ = [
    "backward", "converter", "load_yaml", "meta", "reference", "setup_context", "npugraph_backend",
    "NpuGraphConfig", "inspect", "InspectReport",
    "MissingImplementationError", "OpPluginError", "YamlSpecError", "shipped_yaml_files",
]
__version__ = "0.1.0"


def shipped_yaml_files():
    """Paths of the shipped op definitions (yaml/*.yaml), in load order."""
    from pathlib import Path

    here = Path(__file__).resolve().parent
    # A wheel installs yaml/ as op_plugin/shipped_yaml; an editable install runs from the source tree.
    # yaml/ has no __init__.py on purpose: a package named `yaml` would shadow PyYAML.
    for folder in (here / "shipped_yaml", here.parent / "yaml"):
        found = sorted(folder.glob("*.yaml"))
        if found:
            return found
    raise OpPluginError(f"the shipped YAML files are missing next to {here}; reinstall op_plugin")


def _load_shipped() -> None:
    from . import _shipped_kernels, converters, meta as _meta_pkg  # noqa: F401  (decorators register)

    for path in shipped_yaml_files():
        load_yaml(path)


_load_shipped()

"""Where the shipped op definitions (the repository's yaml/) are, editable install or wheel."""
from __future__ import annotations

from pathlib import Path

from .._base.errors import OpPluginError

_PACKAGE = Path(__file__).resolve().parents[1]   # the op_plugin package folder


def shipped_yaml_files() -> list[Path]:
    """Paths of the shipped op definitions (yaml/*.yaml), in load order."""
    # A wheel installs yaml/ as op_plugin/shipped_yaml; an editable install runs from the source tree.
    # yaml/ has no __init__.py on purpose: a package named `yaml` would shadow PyYAML.
    for folder in (_PACKAGE / "shipped_yaml", _PACKAGE.parent / "yaml"):
        found = sorted(folder.glob("*.yaml"))
        if found:
            return found
    raise OpPluginError(f"the shipped YAML files are missing next to {_PACKAGE}; reinstall op_plugin")

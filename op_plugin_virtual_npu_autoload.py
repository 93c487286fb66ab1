"""The `torch.backends` autoload entry of op_plugin's virtual NPU (docs/virtual-npu.md).

`import torch` calls `_autoload()` (entry point `op_plugin_virtual_npu` in pyproject.toml, the
group torch_npu registers itself in). It returns at once, importing nothing, unless
`OP_PLUGIN_VIRTUAL_NPU` is "1" and the installed torch_npu is not importable (`op_plugin._base.installed`: a
folder that merely shares its name does not count, and is never imported); only then does it import
op_plugin's device job and bring the `npu` device up. A top-level module of its own so that the
common case (the variable unset) never imports the op_plugin package inside `import torch`.
"""
import os


def _autoload() -> None:
    if os.environ.get("OP_PLUGIN_VIRTUAL_NPU") != "1":
        return
    from op_plugin._base.installed import real_torch_npu

    if real_torch_npu():
        return  # the installed torch_npu brings its own device up (a folder named torch_npu is no torch_npu)
    from op_plugin._simulator.device.activation import activate

    activate()

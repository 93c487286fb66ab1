"""The shipped op names do not collide with operators torch_npu 2.13.0 defines in the npu namespace.

The list comes from the pinned wheel that `make setup` unpacks for the simulator: the `custom:`
section of its codegen YAML (the ops registered as torch.ops.npu.*), the op docs module, and the
schema strings compiled into its shared libraries (ops defined in C++ TORCH_LIBRARY blocks).
"""
import re

import yaml

import op_plugin
from op_plugin._registry.load import parse_yaml
from op_plugin._simulator import simulator_dir


def torch_npu_names() -> set[str]:
    root = simulator_dir() / "torch_npu"
    codegen = yaml.safe_load((root / "csrc/aten/npu_native_functions_by_codegen.yaml").read_text())
    names = {entry["func"].split("(")[0].split(".")[0] for entry in codegen["custom"]}
    names |= set(re.findall(r'_add_torch_npu_docstr\(\s*"(\w+)"', (root / "_op_plugin_docs.py").read_text()))
    for library in root.glob("lib/*.so"):
        found = re.findall(rb"\b(npu_\w+)(?:\.\w+)?\((?:Tensor|int|SymInt)", library.read_bytes())
        names |= {m.decode() for m in found}
    return names


def test_the_name_list_is_real():
    names = torch_npu_names()
    # torch_npu's own RMSNorm / rotary / SwiGLU ops: exactly the names we must not take
    assert {"npu_rms_norm", "npu_add_rms_norm", "npu_rotary_mul", "npu_swiglu"} <= names
    assert len(names) > 300


def test_shipped_ops_do_not_collide_with_torch_npu():
    taken = torch_npu_names()
    shipped = [spec.name for path in op_plugin.shipped_yaml_files() for spec in parse_yaml(path)]
    assert shipped and not set(shipped) & taken, sorted(set(shipped) & taken)

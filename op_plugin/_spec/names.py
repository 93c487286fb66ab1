"""Which namespaces and op names a YAML file may claim.

A namespace owned by torch, TorchAir or torch_npu is refused: an op defined there (`aten::relu.evil`)
would change what existing code resolves to. `npu` is the exception, for new op names (a name that
already exists there is refused at load). Names that `torch.ops` or an op namespace already use as
attributes (`name`, `load_library`, `__class__`, ...) are refused, since `torch.ops.<ns>.<name>`
would return that attribute instead of the op.

torch_npu's own operators (`torch.ops.npu.npu_rms_norm` & co.) are read from the pinned torch-npu
wheel's operator list (`torch_npu_op_names`), not from what this process happens to have defined: a
YAML op may not take one of their names, whether or not torch_npu (or the simulator's definition of
its ops) is loaded here, so `op-plugin validate` and `load_yaml` answer alike on every host.
"""
from __future__ import annotations

import functools
import re
from pathlib import Path

import torch
import yaml

from .._base.wheel import TORCH_NPU_VERSION, simulator_dir

OPEN_NAMESPACE = "npu"
# TorchAir's (air, npu_define, npu_inference) and torch_npu's own; TorchAir registers its namespaces
# only when it is imported, so they are listed here rather than read from the dispatcher.
_TORCHAIR_AND_TORCH_NPU = frozenset({"air", "npu_define", "npu_inference", "torchair", "torch_npu", "npu_graph"})
# torch's: every namespace with ops when op_plugin is imported (before any YAML is loaded), plus
# the ones torch.ops resolves specially.
_TORCH = frozenset({name.split("::", 1)[0] for name in torch._C._dispatch_get_all_op_names()}
                   | {"aten", "prim", "prims", "higher_order", "_native"})
OWNED_NAMESPACES = (_TORCH | _TORCHAIR_AND_TORCH_NPU) - {OPEN_NAMESPACE}

_RESERVED_NAMESPACES = frozenset(dir(torch.ops)) | frozenset(vars(torch.ops)) | frozenset(dir(type(torch.ops)))
_RESERVED_OP_NAMES = frozenset(dir(torch._ops._OpNamespace)) | frozenset(vars(torch._ops._OpNamespace("probe")))


def namespace_problem(namespace: str) -> str | None:
    """Why `namespace` cannot hold YAML ops, or None."""
    if namespace in OWNED_NAMESPACES:
        return (f"the namespace '{namespace}' belongs to torch, TorchAir or torch_npu; defining ops there would change "
                f"what existing code calls. Use your own namespace, or '{OPEN_NAMESPACE}' for new op names")
    if namespace in _RESERVED_NAMESPACES or namespace.startswith("__"):
        return f"'{namespace}' is an attribute of torch.ops, so torch.ops.{namespace} would not be your namespace"
    return None


def op_name_problem(name: str) -> str | None:
    """Why `name` cannot be an op name, or None."""
    if name in _RESERVED_OP_NAMES or name.startswith("__"):
        return f"'{name}' is an attribute of torch.ops namespaces, so torch.ops.<namespace>.{name} would not be the op"
    return None


# The wheel's operator list: the `custom:` entries of this file are the ops torch_npu defines in `npu`
# (`_simulator.npu.wheel_meta` reads their schemas from the same file to define them on a CPU host).
TORCH_NPU_OPERATOR_LIST = "torch_npu/csrc/aten/npu_native_functions_by_codegen.yaml"


def torch_npu_op_names() -> frozenset[str] | None:
    """torch_npu's operators in the `npu` namespace, overloads included ("npu_rms_norm",
    "npu_grouped_matmul.List"), as the pinned torch-npu wheel lists them; None when the wheel is not
    unpacked here (then only the dispatcher can tell: on an Ascend host torch_npu has defined them)."""
    path = simulator_dir() / TORCH_NPU_OPERATOR_LIST
    try:
        stamp = path.stat().st_mtime_ns
    except OSError:
        return None
    return _operator_list(str(path), stamp)


@functools.lru_cache(maxsize=2)
def _operator_list(path: str, stamp: int) -> frozenset[str] | None:
    del stamp  # part of the cache key only: a re-unpacked wheel is read again
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError:
        return None
    section = re.search(r"^custom:\n(.*?)(?=^\w+:|\Z)", text, re.S | re.M)
    if section is None:
        return None
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # a safe loader; libyaml's where PyYAML has it
    names = set()
    for entry in yaml.load(section.group(1), Loader=loader) or ():
        match = re.match(r"\s*([\w.]+)\(", str(entry.get("func", ""))) if isinstance(entry, dict) else None
        if match:
            names.add(match.group(1))
    return frozenset(names)


def torch_npu_clash(namespace: str, name: str, overload: str = "") -> str | None:
    """Why `namespace::name[.overload]` cannot be a YAML op because torch_npu has it (the exact op, or,
    for a new overload, its base name), or None. Read from the wheel's operator list."""
    if namespace != OPEN_NAMESPACE:
        return None
    names = torch_npu_op_names() or frozenset()
    full = f"{name}.{overload}" if overload else name
    if full in names:
        return (f"{namespace}::{full} is one of torch_npu's own operators (the torch-npu {TORCH_NPU_VERSION} "
                "wheel's operator list), so it already exists in the 'npu' namespace on an Ascend host; "
                "choose another name")
    if overload and any(n == name or n.startswith(name + ".") for n in names):
        return (f"{namespace}::{name} is one of torch_npu's own operators (the torch-npu {TORCH_NPU_VERSION} "
                "wheel's operator list); a file may add overloads only to ops it defines itself, so existing "
                "calls keep resolving to the op they meant")
    return None

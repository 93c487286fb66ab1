"""Which namespaces and op names a YAML file may claim.

A namespace owned by torch, TorchAir or torch_npu is refused: an op defined there (`aten::relu.evil`)
would change what existing code resolves to. `npu` is the exception, for new op names (a name that
already exists there is refused at load). Names that `torch.ops` or an op namespace already use as
attributes (`name`, `load_library`, `__class__`, ...) are refused, since `torch.ops.<ns>.<name>`
would return that attribute instead of the op.
"""
from __future__ import annotations

import torch

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

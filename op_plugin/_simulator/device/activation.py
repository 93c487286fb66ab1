"""Bringing the virtual NPU up in this process: `should_activate()` and `activate()`.

`should_activate()`: `OP_PLUGIN_VIRTUAL_NPU` is "1" and the real torch_npu is not importable (no installed torch-npu
distribution's torch_npu is found: an Ascend host's torch_npu registers its own device). `activate()` (once per
process): loads the built C++ part (`native.load_native`, which names `make setup` when it is missing), sets the
device count (`OP_PLUGIN_VIRTUAL_NPU_COUNT`, default 8), renames PrivateUse1 to `npu`, registers `torch.npu`
(`npu_module`), generates `.npu()`, `is_npu` and the Module and Storage methods, registers the hooks and the Python
side of the fallback (`fallback`: PrivateUse1 kernels for the aten ops that run GE kernels and for torch_npu's ops;
the boxed fallback itself comes with the C++ part), the kernels of ops torch sends only to device backends
(`device_only_ops`: convolution, the fused RNN cells), autocast for npu (`amp`), makes `import torch_npu` give the
façade (`torch_npu_facade`) and registers the "hccl" process-group backend for npu (`hccl`).
op_plugin (imported first, by the import of this module) has defined torch_npu's ops by then: the
façade is never visible to op_plugin's own `find_spec("torch_npu")` checks.
"""
from __future__ import annotations

import os

ENV_VAR = "OP_PLUGIN_VIRTUAL_NPU"
COUNT_VAR = "OP_PLUGIN_VIRTUAL_NPU_COUNT"
DEFAULT_COUNT = 8
_ACTIVE = False


def should_activate() -> bool:
    """The variable is "1" and no installed torch-npu is importable (`_base.installed`: a folder that merely
    shares torch_npu's name does not count)."""
    from ..._base.installed import real_torch_npu

    return os.environ.get(ENV_VAR) == "1" and not real_torch_npu()


def is_active() -> bool:
    return _ACTIVE


def device_count_setting() -> int:
    raw = os.environ.get(COUNT_VAR, "").strip()
    if not raw:
        return DEFAULT_COUNT
    try:
        count = int(raw)
    except ValueError:
        raise ValueError(f"{COUNT_VAR}={raw!r}: expected a whole number of devices (1..64)") from None
    if not 1 <= count <= 64:
        raise ValueError(f"{COUNT_VAR}={raw!r}: expected a whole number of devices (1..64)")
    return count


def activate() -> None:
    """Bring the `npu` device up (idempotent)."""
    global _ACTIVE
    if _ACTIVE:
        return
    import torch
    import torch.utils.backend_registration  # not yet imported while `import torch` autoloads

    from . import amp, device_only_ops, fallback, hccl, npu_module, streams, torch_npu_facade
    from .native import load_native

    native = load_native()
    native.set_device_count(device_count_setting())
    current = torch._C._get_privateuse1_backend_name()
    if current != "npu":
        if current not in ("privateuseone", "privateuse1"):
            raise RuntimeError(f"the virtual NPU cannot start: PrivateUse1 is already the {current!r} backend")
        torch.utils.backend_registration.rename_privateuse1_backend("npu")
    npu_module._bind(native)
    torch._register_device_module("npu", npu_module)
    torch.utils.backend_registration.generate_methods_for_privateuse1_backend(
        for_tensor=True, for_module=True, for_packed_sequence=True, for_storage=True)
    native.register_hooks()
    fallback.install(native)
    device_only_ops.install()  # conv, the fused RNN cells: ops torch sends only to device backends
    amp.install()
    fallback.register_npu_ops()
    streams.install()
    torch_npu_facade.install()
    hccl.install()
    from ..._registry import aclnn_kernel

    aclnn_kernel.on_a_device_without_cann("the virtual NPU")  # YAML ops' `aclnn:` kernels: their reference
    _ACTIVE = True

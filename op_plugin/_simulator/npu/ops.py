"""torch_npu's own operators (``torch.ops.npu.npu_rms_norm`` ...) defined on a CPU host.

Code written for an Ascend host calls torch_npu's operators directly. On a CPU host with the
simulator installed, ``define_npu_ops()`` defines the ops in ``COVERED`` in the ``npu`` namespace
with one ``torch.library`` fragment, kept by the returned RegistrationHandle (``destroy()``
undoes it):

* schema: the ``custom:`` entry of the wheel's codegen YAML (with its tags);
* Meta: the wheel's own Meta function, parsed out of ``_meta_registrations.py`` and compiled
  without importing torch_npu (``npu_ops_wheel``), so FakeTensor tracing matches an NPU host;
* CPU: a reference kernel (``npu_ops_reference``, ``npu_ops_attention``) where one exists;
* Autograd: a refusal when an input requires grad (no backward is covered; torch's fallback
  would otherwise differentiate the CPU kernel's insides with only a warning).
  Ops with only schema + Meta trace and compile (TorchAir lowers them) but raise the dispatcher's
  "no kernel for CPU" error when called eagerly.

Why before TorchAir: TorchAir's converters for these ops (``ge_converter/custom/*.py``) register
against ``torch.ops.npu.<op>`` when its ``custom`` package is imported (at the first converter
lookup); a missing op makes that module's import fail with an AttributeError that TorchAir turns
into a warning, and the converter is lost for the process. So the loader calls this before it
imports TorchAir.

When: the ops exist once the simulator is set up for the process, i.e. from
``load_torchair()`` (the first npugraph compile on a CPU host) — and from ``import op_plugin`` on a
CPU host if the package calls ``define_npu_ops()`` at import (requested from the lead: then eager
``torch.ops.npu.npu_rms_norm`` works right after ``import op_plugin``). Never on an Ascend host:
nothing is defined when ``torch_npu`` is importable or imported, or when a name already exists.
"""
from __future__ import annotations

import importlib.util
import sys
import threading

import torch

from ..._base.handles import RegistrationHandle
from . import attention as npu_ops_attention, reference as npu_ops_reference, wheel_meta as npu_ops_wheel
from ..._base import wheel as install  # where the unpacked wheel is, and whether it is complete

NAMESPACE = "npu"

# torch_npu ops defined here; those with a CPU reference kernel are in CPU_KERNELS.
COVERED = (
    "npu_rms_norm",
    "npu_add_rms_norm",
    "npu_rotary_mul",
    "npu_swiglu",
    "npu_fusion_attention",
    "npu_prompt_flash_attention",
    "npu_incre_flash_attention",
)
CPU_KERNELS = {**npu_ops_reference.KERNELS, **npu_ops_attention.KERNELS}

_lock = threading.Lock()
_handle: RegistrationHandle | None = None


def torch_npu_present() -> bool:
    """An Ascend host's torch_npu is imported or importable: it defines these ops itself."""
    return "torch_npu" in sys.modules or importlib.util.find_spec("torch_npu") is not None


def define_npu_ops() -> RegistrationHandle | None:
    """Define the COVERED ops (idempotent); None when torch_npu is present or the wheel is missing.

    Ops whose name the dispatcher already has (a user's own definition) are left alone.
    """
    global _handle
    with _lock:
        if _handle is not None and not _handle.destroyed:
            return _handle
        if torch_npu_present():
            return None
        folder = install.simulator_dir()
        if install.missing_parts(folder):
            return None
        names = [name for name in COVERED if not _defined(name)]
        _handle = _define(folder / "torch_npu", names)
        return _handle


def _defined(name: str) -> bool:
    return torch._C._dispatch_has_kernel(f"{NAMESPACE}::{name}") or _has_schema(name)


def _has_schema(name: str) -> bool:
    try:
        torch._C._dispatch_find_schema_or_throw(f"{NAMESPACE}::{name}", "")
    except RuntimeError:
        return False
    return True


def _define(wheel_root, names) -> RegistrationHandle:
    schemas = npu_ops_wheel.schema_entries(wheel_root, names)
    metas = npu_ops_wheel.meta_functions(wheel_root, names)
    library = torch.library.Library(NAMESPACE, "FRAGMENT")  # pylint: disable=no-member
    try:
        for name in names:
            tags = tuple(getattr(torch.Tag, tag) for tag in schemas[name].tags)
            library.define(schemas[name].schema, tags=tags)
            library.impl(name, metas[name], "Meta")
            library.impl(name, _no_gradient_kernel(name), "Autograd", with_keyset=True)
            if name in CPU_KERNELS:
                library.impl(name, CPU_KERNELS[name], "CPU")
    except BaseException:
        library._destroy()  # pylint: disable=protected-access
        raise
    return RegistrationHandle(lambda: _undefine(library), f"torch_npu ops on the CPU simulator ({len(names)})")


def _no_gradient_kernel(name: str):
    """Refuse inputs that require grad instead of letting autograd differentiate the CPU kernel's
    insides (torch's fallback only warns): torch_npu's backward ops are not covered here."""
    def kernel(keyset, *args, **kwargs):
        if torch.is_grad_enabled() and any(
                isinstance(t, torch.Tensor) and t.requires_grad for t in torch.utils._pytree.tree_leaves((args, kwargs))):
            raise NotImplementedError(
                f"npu::{name} has no backward on the CPU simulator (torch_npu's backward ops are not covered, "
                "docs/torch-npu-ops.md); call it under torch.no_grad() or on tensors that do not require grad")
        op = getattr(getattr(torch.ops, NAMESPACE), name).default
        with torch._C._AutoDispatchBelowAutograd():
            return op.redispatch(keyset & torch._C._after_autograd_keyset, *args, **kwargs)

    return kernel


def _undefine(library) -> None:
    global _handle
    library._destroy()  # pylint: disable=protected-access
    with _lock:
        _handle = None

"""torch_npu's own operators (``torch.ops.npu.npu_rms_norm`` ...) defined on a CPU host.

Code written for an Ascend host calls torch_npu's operators directly. On a CPU host with the
simulator installed, ``define_npu_ops()`` defines every op of the wheel's schema list (the
``custom:`` section of its codegen YAML, 419 overloads) in the ``npu`` namespace with one
``torch.library`` fragment, kept by the returned RegistrationHandle (``destroy()`` undoes it):

* schema: the ``custom:`` entry of the wheel's codegen YAML (with its tags);
* Meta: the wheel's own Meta function, parsed out of ``_meta_registrations.py`` and compiled
  without importing torch_npu (``npu_ops_wheel``), so FakeTensor tracing matches an NPU host.
  Ops the wheel has no Python Meta function for (``SCHEMA_ONLY``: torch_npu gives them a C++
  Meta or none) are defined by schema alone: TorchAir's converters register against them, but
  tracing them fails with the dispatcher's "no Meta kernel" error. An op whose schema cannot be
  defined on this torch is skipped and listed by ``undefined_ops()`` with the reason;
* CPU: a reference kernel (``npu_ops_reference``, ``npu_ops_attention``) where one exists;
* Autograd: a refusal when an input requires grad (no backward is covered; torch's fallback
  would otherwise differentiate the CPU kernel's insides with only a warning).
  Every op without an eager kernel gets a CPU kernel that refuses by name and says whether graph mode can run
  it (``eager_refusals``): with schema + Meta it traces and compiles (TorchAir lowers it), and runs where the
  simulator has the GE kernels of what TorchAir's converter builds.

Why before TorchAir: TorchAir's converters for these ops (``ge_converter/custom/*.py``) register
against ``torch.ops.npu.<op>`` when its ``custom`` package is imported (at the first converter
lookup); a missing op makes that module's import fail with an AttributeError that TorchAir turns
into a warning, and the converter is lost for the process. So the loader calls this before it
imports TorchAir.

When: from ``import op_plugin`` on a CPU host (``_backend.prepare_host`` calls ``define_npu_ops()``), and
from ``load_torchair()`` (the first npugraph compile). Never on an Ascend host: nothing is defined when
``torch_npu`` is importable or imported, or when a name already exists.
"""
from __future__ import annotations

import importlib
import os
import pkgutil
import threading
import warnings
from pathlib import Path

import torch

from ..._base.handles import RegistrationHandle
from ..._base.installed import real_torch_npu
from . import backward as npu_ops_backward, eager_refusals, wheel_meta as npu_ops_wheel
from .checks import naming_errors
from ..._base import wheel as install  # where the unpacked wheel is, and whether it is complete

NAMESPACE = "npu"

def _family_modules() -> tuple:
    """The op-family modules of this package: each module that defines ``KERNELS`` (op name -> eager
    kernel; "op" is its default overload, "op.overload" another: "npu_grouped_matmul.List", as the
    wheel's schema list names it), and optionally ``META`` (see below). Found, not listed: a new family
    is a new module."""
    package = __name__.rpartition(".")[0]
    modules = [importlib.import_module(f"{package}.{info.name}")
               for info in pkgutil.iter_modules([str(Path(__file__).parent)]) if info.name != "ops"]
    return tuple(module for module in modules if isinstance(getattr(module, "KERNELS", None), dict))


def _kernels_by_op(modules) -> dict:
    kernels, owner = {}, {}
    for module in modules:
        for name, kernel in module.KERNELS.items():
            if name in kernels and kernels[name] is not kernel:
                raise ValueError(f"two eager kernels for npu op {name}: in {owner[name]} and {module.__name__}")
            kernels[name], owner[name] = kernel, module.__name__
    return kernels


_KERNEL_MODULES = _family_modules()
CPU_KERNELS = _kernels_by_op(_KERNEL_MODULES)
# Meta functions of ops whose Meta torch_npu writes in C++ (the wheel's Python has none), where a family
# module defines one (``META``); used only when the wheel has no Meta for the op.
META_KERNELS = {name: fn for module in _KERNEL_MODULES for name, fn in getattr(module, "META", {}).items()}
# Ops a family module lists in ``EAGER_ONLY``: eager kernels of ops torch_npu gives no Meta function and TorchAir
# no converter (the static-workspace forms TorchAir's aclgraph capture calls), as on an Ascend host.
EAGER_ONLY = frozenset(name for module in _KERNEL_MODULES for name in getattr(module, "EAGER_ONLY", ()))
# The ops with CPU reference kernels and GE kernels, tested end to end.
COVERED = tuple(name for name in CPU_KERNELS if name not in EAGER_ONLY)

_lock = threading.Lock()
_handle: RegistrationHandle | None = None
_undefined: dict[str, str] = {}   # op (with overload) -> why its schema could not be defined here
_schema_only: list[str] = []      # ops defined without a Meta function (the wheel has none)


def torch_npu_present() -> bool:
    """An Ascend host's torch_npu (the installed torch-npu distribution, `_base.installed`: not a folder that
    shares its name, nor the virtual NPU's façade) is importable: it defines these ops itself."""
    return real_torch_npu()


class NpuOpsUndefinedWarning(UserWarning):
    """torch_npu's operators could not be defined on this CPU host: the unpacked wheel is missing."""


_warned_folders: set[str] = set()


def missing_wheel_message() -> str | None:
    """Why torch_npu's operators are not defined here, naming the folder and the fix; None when the unpacked
    wheel is complete (or torch_npu itself is present)."""
    if torch_npu_present():
        return None
    folder = install.simulator_dir()
    missing = install.missing_parts(folder)
    return _missing_wheel_text(folder, missing) if missing else None


def _missing_wheel_text(folder: Path, missing: list[str]) -> str:
    from ..._base.paths import shown

    configured = bool(os.environ.get(install.ENV_VAR))
    where = f"${install.ENV_VAR} = '{shown(folder)}'" if configured else f"'{shown(folder)}'"
    what = "does not exist" if missing == [str(folder)] else f"lacks {shown(missing[0])}"
    fix = (f"run `op-plugin setup-simulator '{shown(folder)}'` (a new or empty folder), or unset ${install.ENV_VAR} "
           "for the default folder" if configured else "run `op-plugin setup-simulator` (or `make setup`)")
    return (f"torch_npu's operators (torch.ops.npu.npu_rms_norm, ...) are not defined on this CPU host: the "
            f"simulator's unpacked torch-npu {install.TORCH_NPU_VERSION} wheel, where they are read from, is missing "
            f"({where} {what}); {fix}")


def _warn_missing_wheel(folder: Path, missing: list[str]) -> None:
    """Once per folder and process. Not when $OP_PLUGIN_SIMULATOR_DIR names no folder: `simulator_dir()` has
    just said so, with the same fix."""
    override = os.environ.get(install.ENV_VAR)
    if str(folder) in _warned_folders or (override and not Path(override).is_dir()) or install.installing_it():
        return
    _warned_folders.add(str(folder))
    warnings.warn(_missing_wheel_text(folder, missing), NpuOpsUndefinedWarning, stacklevel=3)


def define_npu_ops() -> RegistrationHandle | None:
    """Define the COVERED ops (idempotent); None when torch_npu is present or the wheel is missing (warned
    about once: NpuOpsUndefinedWarning names the folder and the fix).

    Ops whose name the dispatcher already has (a user's own definition) are left alone.
    """
    global _handle
    with _lock:
        if _handle is not None and not _handle.destroyed:
            return _handle
        if torch_npu_present():
            return None
        folder = install.simulator_dir()
        missing = install.missing_parts(folder)
        if missing:
            _warn_missing_wheel(folder, missing)
            return None
        _handle = _define(folder / "torch_npu")
        return _handle


def overload_of(name: str):
    """The OpOverload a KERNELS key names: "npu_rms_norm" -> npu.npu_rms_norm.default,
    "npu_grouped_matmul.List" -> npu.npu_grouped_matmul.List."""
    base, overload = _split(name)
    return getattr(getattr(getattr(torch.ops, NAMESPACE), base), overload or "default")


def undefined_ops() -> dict[str, str]:
    """The wheel's ops (with overload) that the last define_npu_ops() could not define, with the reason."""
    return dict(_undefined)


def schema_only_ops() -> list[str]:
    """The wheel's ops defined by schema alone: the wheel has no Python Meta function for them."""
    return list(_schema_only)


def _split(name: str) -> tuple[str, str]:
    base, _, overload = name.partition(".")
    return base, overload


def _defined(name: str) -> bool:
    base, overload = _split(name)
    if not overload and torch._C._dispatch_has_kernel(f"{NAMESPACE}::{base}"):
        return True
    return _has_schema(base, overload)


def _has_schema(name: str, overload: str = "") -> bool:
    try:
        torch._C._dispatch_find_schema_or_throw(f"{NAMESPACE}::{name}", overload)
    except RuntimeError:
        return False
    return True


def _define(wheel_root) -> RegistrationHandle:
    entries = npu_ops_wheel.all_schema_entries(wheel_root)
    unknown = sorted(set(CPU_KERNELS) - set(entries))
    if unknown:  # a KERNELS key must name an op ("op" or "op.overload") of the wheel's list, or it is never registered
        raise ValueError(f"CPU kernels for ops the wheel's schema list does not have: {', '.join(unknown)}; "
                         "name them as its custom: entries do (\"op\" or \"op.overload\")")
    names = [name for name in entries if not _defined(name)]  # a user's own definition is left alone
    metas = npu_ops_wheel.meta_functions(wheel_root)  # every Meta function the wheel registers
    library = torch.library.Library(NAMESPACE, "FRAGMENT")
    undefined, schema_only = {}, []
    try:
        for name in names:
            reason = _define_schema(library, entries[name])
            if reason:
                undefined[name] = reason
                continue
            if name in metas:
                library.impl(name, metas[name], "Meta")
            elif name in META_KERNELS:
                library.impl(name, META_KERNELS[name], "Meta")
            else:
                schema_only.append(name)
            gradient = npu_ops_backward.AUTOGRAD.get(name, _no_gradient_kernel)(name)
            library.impl(name, gradient, "Autograd", with_keyset=True)
            if name in CPU_KERNELS:
                library.impl(name, naming_errors(name, CPU_KERNELS[name]), "CPU")
            else:  # refused by name, saying whether graph mode runs it (not torch's bare "Could not run")
                library.impl(name, eager_refusals.refusing_kernel(name, traced=name not in schema_only), "CPU")
        for name, functional in _functional_variants(entries, names, undefined).items():
            library.impl(name, _functionalize_kernel(name, functional), "Functionalize")
        for name, (functional, mutated) in _functional_twins(entries, names, undefined).items():
            library.impl(name, _functionalize_twin_kernel(name, functional, mutated), "Functionalize")
    except BaseException:
        library._destroy()
        raise
    _undefined.clear()
    _undefined.update(undefined)
    _schema_only[:] = schema_only
    count = len(names) - len(undefined)
    return RegistrationHandle(lambda: _undefine(library), f"torch_npu ops on the CPU simulator ({count})")


def _define_schema(library, entry) -> str:
    """Define one schema; "" when done, else why this torch refuses it."""
    unknown = [tag for tag in entry.tags if not hasattr(torch.Tag, tag)]
    if unknown:
        return f"its tags {unknown} are not tags of torch {torch.__version__}"
    try:
        library.define(entry.schema, tags=tuple(getattr(torch.Tag, tag) for tag in entry.tags))
    except RuntimeError as error:
        return f"torch {torch.__version__} refuses its schema: {str(error).splitlines()[0]}"
    return ""


def _functional_variants(entries, names, undefined) -> dict[str, str]:
    """{in-place op: its functional variant} for the ops torch_npu functionalizes itself: an op
    ``<base>_`` whose only mutated argument is its first (``Tensor(a!) self``), returning it, beside
    an op ``<base>`` with the same arguments returning one new Tensor (npu_scatter_nd_update_ /
    npu_scatter_nd_update, ...)."""
    pairs = {}
    for name in names:
        base, overload = _split(name)
        if not base.endswith("_") or overload or name in undefined or base[:-1] not in entries:
            continue
        inplace = torch._C.parse_schema(f"{NAMESPACE}::{entries[name].schema}")
        functional = torch._C.parse_schema(f"{NAMESPACE}::{entries[base[:-1]].schema}")
        mutated = [a.name for a in inplace.arguments if a.alias_info is not None and a.alias_info.is_write]
        same_args = ([(a.name, str(a.type)) for a in inplace.arguments]
                     == [(a.name, str(a.type)) for a in functional.arguments])
        if (mutated == [inplace.arguments[0].name] and same_args and len(inplace.returns) == 1
                and len(functional.returns) == 1 and functional.returns[0].alias_info is None
                and str(functional.returns[0].type) == "Tensor"):
            pairs[name] = base[:-1]
    return pairs


def _functional_twins(entries, names, undefined) -> dict[str, tuple[str, list[int]]]:
    """{op: (its ``<op>_functional`` twin, positions of the mutated args)} for torch_npu's ops that write
    several inputs (``Tensor(a!) key_cache, Tensor(b!) value_cache``) and return nothing aliased, beside a
    ``<op>_functional`` with the same arguments returning the op's own results followed by the new value of
    each mutated input, in order (npu_scatter_pa_kv_cache, npu_kv_rmsnorm_rope_cache_v2, ...: their Meta
    functions and TorchAir's converters read them so)."""
    pairs = {}
    for name in names:
        twin = f"{name}_functional"
        if "." in name or name in undefined or twin not in entries or twin in undefined:
            continue
        op = torch._C.parse_schema(f"{NAMESPACE}::{entries[name].schema}")
        functional = torch._C.parse_schema(f"{NAMESPACE}::{entries[twin].schema}")
        mutated = [i for i, a in enumerate(op.arguments) if a.alias_info is not None and a.alias_info.is_write]
        same_args = [(a.name, str(a.type)) for a in op.arguments] == [(a.name, str(a.type)) for a in
                                                                      functional.arguments]
        if (mutated and same_args and all(r.alias_info is None for r in op.returns)
                and len(functional.returns) == len(op.returns) + len(mutated)
                and all(str(r.type) == "Tensor" and r.alias_info is None for r in functional.returns)):
            pairs[name] = (twin, mutated)
    return pairs


def _unwrap_functional(value):
    """A functional tensor synced and unwrapped (any other value as it is), for a call below Functionalize."""
    if isinstance(value, torch.Tensor) and torch._is_functional_tensor(value):
        torch._sync(value)
        return torch._from_functional_tensor(value)
    return value


def _functionalize_twin_kernel(name: str, functional: str, mutated: list[int]):
    """torch_npu's functionalization of an op writing several inputs: the ``_functional`` twin below
    Functionalize, its trailing results replace_ + commit_update + sync the mutated inputs, its leading
    results are the op's own (wrapped as functional tensors)."""
    functional_op = getattr(getattr(torch.ops, NAMESPACE), functional).default
    inplace_op = getattr(getattr(torch.ops, NAMESPACE), name).default
    arg_names = [a.name for a in inplace_op._schema.arguments]
    skip = torch._C.DispatchKeySet(torch._C.DispatchKey.Functionalize)

    def kernel(*args, **kwargs):
        targets = [args[i] if i < len(args) else kwargs[arg_names[i]] for i in mutated]
        inner_args = [_unwrap_functional(a) for a in args]
        inner_kwargs = {k: _unwrap_functional(v) for k, v in kwargs.items()}
        if not any(torch._is_functional_tensor(t) for t in targets):  # nothing to functionalize
            with torch._C._ExcludeDispatchKeyGuard(skip):
                return inplace_op(*inner_args, **inner_kwargs)
        with torch._C._ExcludeDispatchKeyGuard(skip):
            results = functional_op(*inner_args, **inner_kwargs)
        own, new_values = results[:len(results) - len(mutated)], results[len(results) - len(mutated):]
        for target, value in zip(targets, new_values, strict=True):
            torch._functionalize_replace(target, value)
            torch._functionalize_commit_update(target)
            torch._functionalize_sync(target)
        wrapped = tuple(torch._to_functional_tensor(t) for t in own)
        if not inplace_op._schema.returns:
            return None
        return wrapped[0] if len(wrapped) == 1 else wrapped

    return kernel


def _functionalize_kernel(name: str, functional: str):
    """torch_npu's functionalization of an in-place op (its codegen, like torchgen's for aten's in-place
    ops): sync and unwrap the functional tensors, call the functional variant below Functionalize,
    then replace_ + commit_update + sync the mutated input, so the graph holds the functional op and a
    copy back into the input (a KV-cache write works in graph mode)."""
    functional_op = getattr(getattr(torch.ops, NAMESPACE), functional).default
    inplace_op = getattr(getattr(torch.ops, NAMESPACE), name).default
    skip = torch._C.DispatchKeySet(torch._C.DispatchKey.Functionalize)

    def kernel(self, *args, **kwargs):
        inner_self = _unwrap_functional(self)
        inner_args = [_unwrap_functional(a) for a in args]
        inner_kwargs = {k: _unwrap_functional(v) for k, v in kwargs.items()}
        if not torch._is_functional_tensor(self):  # nothing to functionalize: run the in-place op itself
            with torch._C._ExcludeDispatchKeyGuard(skip):
                return inplace_op(inner_self, *inner_args, **inner_kwargs)
        with torch._C._ExcludeDispatchKeyGuard(skip):
            result = functional_op(inner_self, *inner_args, **inner_kwargs)
        torch._functionalize_replace(self, result)
        torch._functionalize_commit_update(self)
        torch._functionalize_sync(self)
        return self

    return kernel


def _no_gradient_kernel(name: str):
    """Refuse inputs that require grad instead of letting autograd differentiate the CPU kernel's
    insides (torch's fallback only warns): torch_npu's backward ops are not covered here."""
    def kernel(keyset, *args, **kwargs):
        if torch.is_grad_enabled() and any(
                isinstance(t, torch.Tensor) and t.requires_grad
                for t in torch.utils._pytree.tree_leaves((args, kwargs))):
            raise NotImplementedError(
                f"npu::{name} has no backward on the CPU simulator (torch_npu's backward ops are not covered, "
                "docs/torch-npu-ops.md); call it under torch.no_grad() or on tensors that do not require grad")
        base, overload = _split(name)
        op = getattr(getattr(getattr(torch.ops, NAMESPACE), base), overload or "default")
        with torch._C._AutoDispatchBelowAutograd():
            return op.redispatch(keyset & torch._C._after_autograd_keyset, *args, **kwargs)

    return kernel


def _undefine(library) -> None:
    global _handle
    library._destroy()
    with _lock:
        _handle = None


DOC_BEGIN = "<!-- generated: wheel ops (tests/simulator/npu/test_wheel_ops.py) -->"
DOC_END = "<!-- end of generated section -->"


def coverage_markdown() -> str:
    """The generated section of docs/torch-npu-ops.md: what define_npu_ops() could not define or
    defined without a Meta function (run it after define_npu_ops() on a CPU host)."""
    lines = [DOC_BEGIN, ""]
    undefined = undefined_ops()
    lines.append(f"Ops of the wheel's schema list that cannot be defined on this torch: {len(undefined) or 'none'}.")
    lines += [f"- `{name}`: {reason}" for name, reason in sorted(undefined.items())]
    schema_only = schema_only_ops()
    lines += ["", f"Ops defined by schema alone ({len(schema_only)}): the wheel's `_meta_registrations.py` has no "
              "Meta function for them (torch_npu gives them a C++ Meta kernel or none), so TorchAir's converters "
              "register against them but FakeTensor tracing (torch.compile) fails with the dispatcher's missing-kernel "
              "error naming the op, and an eager call is refused by name (npu/eager_refusals.py):", ""]
    lines.append(", ".join(f"`{name}`" for name in schema_only))
    lines += ["", DOC_END]
    return "\n".join(lines) + "\n"

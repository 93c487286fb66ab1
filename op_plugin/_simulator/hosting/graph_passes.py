"""TorchAir's FX graph passes on a CPU host take the branches they take on an Ascend host.

TorchAir rewrites each graph before lowering it (`npu_fx_compiler._optimize_fx`), and two of its passes look
at the environment rather than the graph:

* its pattern fusions (`torchair/patterns/`: npu_add_rms_norm + cast -> npu_add_rms_norm_cast, the
  add-rms-norm quant fusions, batch-matmul-transpose) register only when `'torch_npu' in sys.modules`, which on
  an Ascend host is always so, and here never (the simulator has no torch_npu module: op_plugin reads "Ascend
  host" from it). So a GE-mode graph here kept AddRmsNorm + Cast where an Ascend host lowers AddRmsNormCast.
* `recover_view_inplace_pattern` runs only if `from torch_npu.npu.utils import _is_gte_cann_version` says CANN
  >= 8.3.RC1; here the import failed, so the pass never ran.

Here, the pattern modules see a `sys` whose `modules` has `torch_npu` (the CPU-host stand-in,
`npu/torch_npu_standin.py`) when the real `sys.modules` has none, and `_optimize_fx` runs inside
`converter_torch_npu.converter_call`, whose import hook serves `import torch_npu` in functions of the pattern
modules as it does in converters (CANN 8.5.0, the version the stand-in reports everywhere). Nothing enters the
real `sys.modules`; nothing else in the process sees a torch_npu.
"""
from __future__ import annotations

import functools
import importlib
import sys
import types
from collections.abc import MutableMapping

from ..npu import torch_npu_standin as standin
from . import converter_torch_npu

# The pattern modules that decide on `'torch_npu' in sys.modules` (torch-npu 2.13.0's TorchAir).
PATTERN_MODULES = ("torchair.patterns.add_rms_norm_cast", "torchair.patterns.add_rms_norm_quant",
                   "torchair.patterns.add_rms_norm_dynamic_quant", "torchair.patterns.batch_matmul_transpose")


class _ModulesWithTorchNpu(MutableMapping):
    """`sys.modules`, with the stand-in as `torch_npu` while the process has no torch_npu; writes go through."""

    def __getitem__(self, name):
        if name == "torch_npu" and name not in sys.modules:
            return standin.TORCH_NPU
        return sys.modules[name]

    def __setitem__(self, name, module):
        sys.modules[name] = module

    def __delitem__(self, name):
        del sys.modules[name]

    def __iter__(self):
        yield from sys.modules
        if "torch_npu" not in sys.modules:
            yield "torch_npu"

    def __len__(self):
        return len(sys.modules) + ("torch_npu" not in sys.modules)

    def __contains__(self, name):
        return name == "torch_npu" or name in sys.modules


class _SysAsOnAnAscendHost(types.ModuleType):
    """The `sys` a pattern module sees: the real one, but for `modules`."""

    modules = _ModulesWithTorchNpu()

    def __getattr__(self, name):
        return getattr(sys, name)


_VIEW = _SysAsOnAnAscendHost("sys")


def give_pattern_modules_the_view() -> None:
    """Import the pattern modules (torch._inductor's pattern matcher with them) and give each its `sys` view.
    Done at the first `_optimize_fx`, which a compile reaches only on a compile-cache miss, not at TorchAir's
    load: a warm-cache process never imports the pattern matcher (loader_deferred)."""
    for name in PATTERN_MODULES:
        module = sys.modules.get(name)
        if module is None:
            from ..._base.gc_scope import no_automatic_gc

            with no_automatic_gc():
                module = importlib.import_module(name)
        if getattr(module, "sys", None) is sys:
            module.sys = _VIEW


def install(torchair) -> None:
    """Run TorchAir's FX passes with the stand-in, the pattern modules seeing their view of `sys` (idempotent)."""
    del torchair
    from torchair import npu_fx_compiler

    optimize = npu_fx_compiler._optimize_fx
    if getattr(optimize, "_op_plugin_graph_passes", False):
        return

    @functools.wraps(optimize)
    def optimize_fx(*args, **kwargs):
        give_pattern_modules_the_view()
        with converter_torch_npu.converter_call():
            return optimize(*args, **kwargs)

    optimize_fx._op_plugin_graph_passes = True
    npu_fx_compiler._optimize_fx = optimize_fx

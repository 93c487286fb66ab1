"""TorchAir's process-wide patches to torch, active only while TorchAir compiles (CPU simulator).

`get_npu_backend` calls `torchair._utils.add_npu_patch`, which rewrites torch for the whole process:
`npu_patch_meta` puts NPU Meta functions and decompositions for `aten.native_dropout`,
`native_dropout_backward` and `_native_batch_norm_legit_no_training` into
`torch._decomp.decomposition_table` and the ops' Meta `py_kernels`, and replaces
`fake_tensor.torch_decomp_decompositions`; `adjust_implicit_decomposition` drops or replaces
Autograd / CompositeImplicitAutograd `py_kernels` of some aten ops. On an Ascend host that is
TorchAir's behaviour and stays. On a CPU host the process is not an NPU process: after one npugraph
compile, `make_fx` with the public decomposition table would build dropout graphs from the NPU
decomposition, which returns uninitialised memory on the CPU.

So here the patched state is swapped in for TorchAir's own work only — `get_npu_backend`, the
backend it returns (AOT tracing), and `_NpuFxCompiler.__call__` (which also runs when AOT compiles
the backward graph lazily, at the first backward) — and the state from before is put back after.
TorchAir therefore traces exactly as on an Ascend host. Not contained: torch.library
registrations TorchAir makes (its own namespaces; kernels for PrivateUse1 keys a CPU never
dispatches to). Not thread-safe: two threads compiling at once share one torch.
"""
from __future__ import annotations

import contextlib
import functools
from typing import NamedTuple

import torch
from torch._decomp import decomposition_table
from torch._subclasses import fake_tensor

from ..._base.gc_scope import old_objects_frozen


class _TorchState(NamedTuple):
    decompositions: dict
    py_kernels: dict  # op -> copy of op.py_kernels
    fake_decompositions: object


def _ops_to_track(extra) -> set:
    return {op for op in (*decomposition_table, *extra) if isinstance(op, torch._ops.OpOverload)}


def _capture(ops) -> _TorchState:
    return _TorchState(dict(decomposition_table), {op: dict(op.py_kernels) for op in ops},
                       fake_tensor.torch_decomp_decompositions)


def _apply(state: _TorchState) -> None:
    changed = {op for op in set(decomposition_table) | set(state.decompositions)
               if decomposition_table.get(op) is not state.decompositions.get(op)}
    decomposition_table.clear()
    decomposition_table.update(state.decompositions)
    for op, kernels in state.py_kernels.items():
        if op.py_kernels != kernels:
            changed.add(op)
            op.py_kernels.clear()
            op.py_kernels.update(kernels)
            op._dispatch_cache.clear()
    if fake_tensor.torch_decomp_decompositions is not state.fake_decompositions:
        fake_tensor.torch_decomp_decompositions = state.fake_decompositions
    _drop_fake_results_of(changed)


def _drop_fake_results_of(ops: set) -> None:
    """Fake tensor mode caches op results by op and inputs (class-wide; symbolic ones live in each
    compile's ShapeEnv): results of the swapped ops computed with the other state's Meta functions
    (a bool dropout mask instead of TorchAir's uint8 bits) must not leak. Only their entries go, so
    every other op keeps its cached results across compiles."""
    if not ops:
        return
    cache = fake_tensor.FakeTensorMode.cache
    try:
        stale = [key for key in cache if key.key[0] in ops]
    except (AttributeError, IndexError, TypeError):  # another torch's cache layout: drop it all
        fake_tensor.FakeTensorMode.cache_clear()
        return
    for key in stale:
        del cache[key]


class TorchAirPatches:
    """Keeps TorchAir's patched torch state aside and swaps it in around TorchAir's compiles."""

    def __init__(self, npu_meta_table):
        self._npu_ops = tuple(npu_meta_table)
        self._torchair_state: _TorchState | None = None
        self._depth = 0

    @property
    def compiling(self) -> bool:
        """TorchAir is compiling (its patched torch state is in)."""
        return self._depth > 0

    @contextlib.contextmanager
    def active(self):
        if self._depth:  # nested (the backend calls the graph compiler): already swapped in
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1
            return
        ops = _ops_to_track(self._npu_ops)
        outside = _capture(ops)
        if self._torchair_state is not None:
            _apply(self._torchair_state)
        self._depth = 1
        try:
            yield
        finally:
            self._depth = 0
            ops |= _ops_to_track(self._npu_ops)   # TorchAir may have added decompositions
            self._torchair_state = _capture(ops)
            # py_kernels of ops not seen at entry are left alone: nothing to restore them to.
            _apply(outside)

    def wrap(self, fn):
        # Also outside dynamo's frame evaluation: AOT compiles the backward graph lazily, inside
        # loss.backward(), and when that call sits in a function being compiled (a training step
        # under torch.compile) dynamo would otherwise trace TorchAir's own Python with fake tensors.
        @torch._dynamo.disable
        @functools.wraps(fn)
        def wrapped(*args, **kwargs):
            # TorchAir's own API (get_npu_backend) too: collections walk only what the compile makes
            with self.active(), old_objects_frozen():
                return fn(*args, **kwargs)

        return wrapped


def install(torchair) -> TorchAirPatches:
    """Route TorchAir's compile entry points through one `TorchAirPatches` (idempotent)."""
    from torchair import npu_fx_compiler
    from torchair._utils import npu_meta_table

    existing = getattr(npu_fx_compiler, "_op_plugin_patches", None)
    if existing is not None:
        return existing
    patches = TorchAirPatches(npu_meta_table)
    get_backend = npu_fx_compiler.get_npu_backend

    @functools.wraps(get_backend)
    def get_npu_backend(*args, **kwargs):
        with patches.active():
            return patches.wrap(get_backend(*args, **kwargs))

    npu_fx_compiler.get_npu_backend = get_npu_backend
    if getattr(torchair, "get_npu_backend", None) is get_backend:
        torchair.get_npu_backend = get_npu_backend
    npu_fx_compiler._NpuFxCompiler.__call__ = patches.wrap(npu_fx_compiler._NpuFxCompiler.__call__)
    npu_fx_compiler._op_plugin_patches = patches
    return patches

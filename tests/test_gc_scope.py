"""The collector's windows around op_plugin's own work (op_plugin/_base/gc_scope.py): inside a compile, collections
walk only the objects it makes; afterwards every object is collectable again, nothing is left frozen, and a
process that froze objects itself keeps them frozen."""
import gc
import weakref

import pytest
import torch

from op_plugin._base import gc_scope


class _Node:
    def __init__(self):
        self.other = None


def _cycle():
    """Two objects referring to each other (only the cyclic collector frees them), and a weak reference to one."""
    a, b = _Node(), _Node()
    a.other, b.other = b, a
    return weakref.ref(a), a


@pytest.fixture(autouse=True)
def _nothing_frozen():
    assert gc.get_freeze_count() == 0
    yield
    assert gc.get_freeze_count() == 0


def test_garbage_made_inside_is_collected_inside_and_older_garbage_after():
    old_ref, old = _cycle()
    with gc_scope.old_objects_frozen():
        assert gc.get_freeze_count() > 0
        del old  # garbage now, but made before the window: its collections leave it alone
        new_ref, new = _cycle()
        del new
        gc.collect()
        assert new_ref() is None
        assert old_ref() is not None
    gc.collect()
    assert old_ref() is None  # back in the oldest generation: collected as before


def test_objects_frozen_inside_are_unfrozen_at_the_end():
    with gc_scope.old_objects_frozen():
        ref, obj = _cycle()
        gc_scope.freeze_new_objects()  # e.g. TorchAir's modules, just imported
        del obj
        gc.collect()
        assert ref() is not None
    gc.collect()
    assert ref() is None


def test_nested_windows_unfreeze_once_at_the_outermost_end():
    with gc_scope.old_objects_frozen():
        with gc_scope.old_objects_frozen():
            pass
        assert gc.get_freeze_count() > 0
    assert gc.get_freeze_count() == 0


def test_a_process_that_froze_objects_itself_keeps_them_frozen():
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        with gc_scope.old_objects_frozen():
            gc_scope.freeze_new_objects()
        assert gc.get_freeze_count() == frozen
    finally:
        gc.unfreeze()


def test_no_automatic_gc_restores_the_collector():
    with gc_scope.no_automatic_gc():
        assert not gc.isenabled()
    assert gc.isenabled()


def test_an_npugraph_compile_leaves_nothing_frozen_and_calls_inside_a_window(monkeypatch):
    from op_plugin import _backend

    seen = []
    original = _backend._compile_graph

    def recording(*args, **kwargs):
        seen.append(gc.get_freeze_count() > 0)
        return original(*args, **kwargs)

    monkeypatch.setattr(_backend, "_compile_graph", recording)
    torch._dynamo.reset()
    compiled = torch.compile(lambda x: torch.relu(x) * 2, backend="npugraph", fullgraph=True)
    x = torch.randn(4, 3)
    assert torch.equal(compiled(x), torch.relu(x) * 2)
    assert seen == [True]


def test_torchair_s_own_backend_compiles_inside_a_window(monkeypatch):
    """torchair.get_npu_backend(...) used directly (TorchAir's API, not npugraph) gets the same window."""
    import op_plugin
    from torchair import npu_fx_compiler

    torchair = op_plugin.load_torchair()
    seen = []
    original = npu_fx_compiler._NpuFxCompiler._gen_compiled_gm

    def recording(self, *args, **kwargs):
        seen.append(gc.get_freeze_count() > 0)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(npu_fx_compiler._NpuFxCompiler, "_gen_compiled_gm", recording)
    torch._dynamo.reset()
    backend = torchair.get_npu_backend(compiler_config=torchair.CompilerConfig())
    compiled = torch.compile(lambda x: torch.tanh(x) + 1, backend=backend, fullgraph=True)
    x = torch.randn(3, 5)
    assert torch.allclose(compiled(x), torch.tanh(x) + 1)
    assert seen and all(seen)

"""`torch.npu.NPUGraph` and `torch.npu.graph` on the virtual NPU, with the static-memory semantics of CUDA and
NPU graphs (issue 33 item 2).

Capture (`capture_begin()` ... `capture_end()`, or `with torch.npu.graph(g):`) runs each aten op once, so its
outputs exist as on hardware, and records it (a `TorchDispatchMode`: the op, its arguments, its outputs; tensors
kept by identity, and kept alive by the graph as a real graph keeps its memory pool). `replay()` runs the
recorded ops again in order, on the same tensor objects: the captured inputs are read with their current
contents, and each op's fresh result is copied into the output tensor captured for it (`copy_`), so later ops
and the user read the captured buffers. The user-visible tensors are the captured ones: the pattern
`static_x.copy_(new); g.replay(); static_y` gives the result for `new`, and replay leaves no new tensor behind
(each op's fresh result is a temporary freed at once: `memory_allocated()` is the same after a replay).

Differences from hardware: nothing is faster (the ops run one by one through the dispatcher, on the CPU); ops
run under `torch.no_grad()` at replay (a captured backward replays its aten ops like any other); random ops
draw new numbers from the CPU generator at each replay.

Refused with an error naming the call: a capture begun inside another capture, `capture_end()` without a
capture, `replay()` before a capture or after `reset()`, and `replay()` when a captured tensor's storage was
freed or resized since the capture (its data pointer or byte size changed). `make_graphed_callables` is in
`graphed_callables.py`.
"""
from __future__ import annotations

import contextlib

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

_CAPTURING: list[NPUGraph] = []


class _Recorder(TorchDispatchMode):
    def __init__(self, graph: NPUGraph):
        super().__init__()
        self.graph = graph

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if func not in _ALLOCATION_ONLY:
            self.graph._ops.append((func, args, kwargs, out))
        return out


# Ops that launch no kernel: on an NPU, captured they only take memory from the graph's pool, and a replay does
# not run them. Rerun at replay here, their fresh (uninitialised) result would be copied over the captured
# tensor, which later ops or the caller fill: TorchAir's capture makes its static inputs with empty_like.
_ALLOCATION_ONLY = frozenset({torch.ops.aten.empty.memory_format, torch.ops.aten.empty_like.default,
                              torch.ops.aten.empty_strided.default, torch.ops.aten.new_empty.default,
                              torch.ops.aten.new_empty_strided.default})


def _storage_key(tensor: torch.Tensor) -> tuple[int, int]:
    storage = tensor.untyped_storage()
    return storage.data_ptr(), storage.nbytes()


class NPUGraph:
    """A captured sequence of ops, replayed on the captured tensors (module docstring)."""

    def __init__(self, keep_graph: bool = False):
        self._ops: list | None = None
        self._recorder: _Recorder | None = None
        self._storages: list[tuple[torch.Tensor, tuple[int, int]]] = []
        self._was_reset = False

    def capture_begin(self, pool=None, capture_error_mode: str = "global") -> None:
        if _CAPTURING:
            raise RuntimeError("torch.npu.NPUGraph.capture_begin: a capture is already under way (capture inside "
                               "capture is not allowed, as on an NPU)")
        self._ops = []
        self._storages = []
        self._was_reset = False
        self._recorder = _Recorder(self)
        _CAPTURING.append(self)
        self._recorder.__enter__()

    def capture_end(self) -> None:
        if self._recorder is None or not _CAPTURING or _CAPTURING[-1] is not self:
            raise RuntimeError("torch.npu.NPUGraph.capture_end: this graph is not capturing")
        recorder, self._recorder = self._recorder, None
        _CAPTURING.pop()
        recorder.__exit__(None, None, None)
        seen = set()
        for _, args, kwargs, out in self._ops:
            for leaf in tree_flatten((args, kwargs, out))[0]:
                if isinstance(leaf, torch.Tensor) and id(leaf) not in seen:
                    seen.add(id(leaf))
                    self._storages.append((leaf, _storage_key(leaf)))

    def replay(self) -> None:
        if self._ops is None or self._recorder is not None:
            what = "the graph was reset" if self._was_reset else "nothing was captured"
            if self._recorder is not None:
                what = "the capture has not ended"
            raise RuntimeError(f"torch.npu.NPUGraph.replay: {what}; capture it again before replaying")
        for tensor, key in self._storages:
            if _storage_key(tensor) != key:
                raise RuntimeError(
                    f"torch.npu.NPUGraph.replay: a captured tensor (shape {tuple(tensor.shape)}, {tensor.dtype}, "
                    f"{tensor.device}) had its storage freed or resized since the capture (data_ptr, nbytes "
                    f"{key} -> {_storage_key(tensor)}); the graph reads and writes the captured memory: "
                    f"capture it again")
        with torch.no_grad():
            for func, args, kwargs, out in self._ops:
                fresh = func(*args, **kwargs)
                for captured, new in zip(tree_flatten(out)[0], tree_flatten(fresh)[0], strict=True):
                    if not isinstance(captured, torch.Tensor) or captured is new:
                        continue
                    if (new.untyped_storage().data_ptr() == captured.untyped_storage().data_ptr()
                            and new.storage_offset() == captured.storage_offset()
                            and new.stride() == captured.stride()):
                        continue  # a view or in-place result: already the captured memory
                    captured.copy_(new)
                del fresh

    def reset(self) -> None:
        """Drops the captured ops and tensors; a later `replay()` is refused until a new capture."""
        if self._recorder is not None:
            raise RuntimeError("torch.npu.NPUGraph.reset: the graph is capturing; end the capture first")
        self._ops = None
        self._storages = []
        self._was_reset = True

    def pool(self):
        """A handle for `capture_begin(pool=...)`; memory is not pooled on the virtual NPU, so it is unused."""
        return id(self)

    def enable_debug_mode(self) -> None:
        """Nothing to debug-dump: the recorded ops are kept as Python objects."""

    def debug_dump(self, debug_path: str) -> None:
        raise RuntimeError(f"torch.npu.NPUGraph.debug_dump({debug_path!r}): the virtual NPU does not provide "
                           f"debug_dump (docs/virtual-npu.md)")


def is_current_stream_capturing() -> bool:
    return bool(_CAPTURING)


@contextlib.contextmanager
def graph(npu_graph: NPUGraph, pool=None, stream=None, capture_error_mode: str = "global"):
    """`with torch.npu.graph(g):` captures the block into `g` (capture_begin / capture_end around it)."""
    if not isinstance(npu_graph, NPUGraph):
        raise TypeError(f"torch.npu.graph: expected a torch.npu.NPUGraph, got {type(npu_graph).__name__}")
    context = torch.npu.stream(stream) if stream is not None else contextlib.nullcontext()
    with context:
        npu_graph.capture_begin(pool=pool, capture_error_mode=capture_error_mode)
        try:
            yield npu_graph
        finally:
            npu_graph.capture_end()


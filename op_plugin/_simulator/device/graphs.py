"""`torch.npu.NPUGraph` and `torch.npu.graph` on the virtual NPU, with the static-memory semantics of CUDA and
NPU graphs (issue 33 item 2).

Capture (`capture_begin()` ... `capture_end()`, or `with torch.npu.graph(g):`) records each aten op (a
`TorchDispatchMode`: the op, its arguments, its outputs; tensors kept by identity, and kept alive by the graph as
a real graph keeps its memory pool) and computes nothing, as on hardware, where a capture launches no kernel:
views are made, in-place and out= ops return their written argument, other results are fresh memory shaped by
the op's Meta kernel, filled at the first replay (their contents after capture are undefined, as on an NPU), and
a torch_npu `.out` form (`Tensor[] out`, no Meta kernel) returns its `out` tensors, filled at replay;
allocation-only ops (`empty_like`, ...) allocate and are not replayed; an op reading a value on the host
(`.item()`) is refused. So data-dependent checks of the kernels see the replayed inputs, never the
uninitialised buffers a capture is given (TorchAir's capture clones its inputs with `empty_like`). `replay()` runs the
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
from typing import NamedTuple

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_map

from ..._base.dispatch_modes import outside_python_dispatch_modes

_CAPTURING: list[NPUGraph] = []


def capturing_graph() -> NPUGraph | None:
    """The graph being captured, if any."""
    return _CAPTURING[-1] if _CAPTURING else None


class EventStep(NamedTuple):
    """A captured ExternalEvent call (graph_tasks.py): "wait" stops a replay until the event is recorded, "reset"
    clears it, "record" records it."""

    kind: str
    event: object


class _Recorder(TorchDispatchMode):
    def __init__(self, graph: NPUGraph):
        super().__init__()
        self.graph = graph

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in _ALLOCATION_ONLY:
            return func(*args, **kwargs)
        if func in _READS_VALUES:
            raise RuntimeError(f"torch.npu.NPUGraph capture: {func} reads a tensor's value on the host, which a "
                               "capture cannot do (on an NPU: operation not permitted when stream is capturing)")
        out = _captured(func, args, kwargs)
        self.graph._ops.append((func, args, kwargs, out))
        return out


def _to_meta(value):
    if isinstance(value, torch.Tensor):
        return torch.empty_strided(value.shape, value.stride(), dtype=value.dtype, device="meta")
    if isinstance(value, torch.device):
        return torch.device("meta")
    return value


def _device_of(args, kwargs) -> torch.device:
    for leaf in tree_flatten((args, kwargs))[0]:
        if isinstance(leaf, torch.Tensor) and leaf.device.type != "meta":
            return leaf.device
    device = kwargs.get("device")
    return torch.device(device) if device is not None else torch.device("npu", torch.npu.current_device())


def _captured(func, args, kwargs):
    """What capturing `func` gives, computing nothing (a capture launches no kernel on an NPU): views are made
    (they read no data), an in-place or out= op returns its written argument (an out= resized to the shape the
    op's Meta kernel gives), any other result is fresh memory of the Meta kernel's shape, strides and dtype,
    filled at replay. An op without a Meta kernel runs once, as the first replay would."""
    schema = func._schema
    if any(r.alias_info is not None and not r.alias_info.is_write for r in schema.returns):
        return func(*args, **kwargs)  # a view: no data read
    meta_args, meta_kwargs = tree_map(_to_meta, (args, kwargs))
    try:
        meta_out = func(*meta_args, **meta_kwargs)
    except (NotImplementedError, RuntimeError):
        out_list = _out_list(schema, kwargs)
        if out_list is not None:  # torch_npu's `.out` form: launches nothing, the replay fills `out`
            return out_list
        return func(*args, **kwargs)
    written = {}
    for index, argument in enumerate(schema.arguments):
        if argument.alias_info is not None and argument.alias_info.is_write:
            positional = not argument.kwarg_only and index < len(args)
            real = args[index] if positional else kwargs.get(argument.name)
            meta = meta_args[index] if positional else meta_kwargs.get(argument.name)
            if isinstance(real, torch.Tensor) and isinstance(meta, torch.Tensor):
                if not argument.kwarg_only and (meta.shape != real.shape or meta.stride() != real.stride()):
                    return func(*args, **kwargs)  # an in-place metadata op (unsqueeze_, as_strided_): host-side
                if meta.shape != real.shape:
                    real.resize_(meta.shape)
            written[frozenset(argument.alias_info.before_set)] = real
    device = _device_of(args, kwargs)

    def fresh(meta):
        if not isinstance(meta, torch.Tensor):
            return meta
        return torch.empty_strided(meta.shape, meta.stride(), dtype=meta.dtype, device=device)

    results = []
    outs = meta_out if len(schema.returns) > 1 else (meta_out,)
    for declared, meta in zip(schema.returns, outs, strict=False):
        alias = declared.alias_info
        if alias is not None and alias.is_write and frozenset(alias.before_set) in written:
            results.append(written[frozenset(alias.before_set)])
        else:
            results.append(tree_map(fresh, meta))
    if not schema.returns:
        return meta_out
    return results[0] if len(schema.returns) == 1 else tuple(results)


def _out_list(schema, kwargs):
    """What a torch_npu `.out` overload called on `Tensor[] out` returns, without running it: torch_npu registers
    its multi-output `.out` forms so (npu/registered_schemas.py), without a Meta kernel; they write their results
    into `out` and return it (here, as the eager call's results come back: `fallback.as_handed_back`). None for
    any other op."""
    out = kwargs.get("out")
    if not isinstance(out, (list, tuple)) or not all(isinstance(t, torch.Tensor) for t in out):
        return None
    if not any(a.name == "out" and str(a.type) == "List[Tensor]" for a in schema.arguments):
        return None
    if len(schema.returns) != len(out):
        return None
    from .fallback import as_handed_back  # the tensors the eager call returns for them

    handed = tuple(as_handed_back(tensor) for tensor in out)
    return handed[0] if len(handed) == 1 else handed


# Ops that launch no kernel: on an NPU, captured they only take memory from the graph's pool, and a replay does
# not run them. Rerun at replay here, their fresh (uninitialised) result would be copied over the captured
# tensor, which later ops or the caller fill: TorchAir's capture makes its static inputs with empty_like.
# Ops that read a tensor's value on the host: a capture cannot (on an NPU the capture fails).
_READS_VALUES = frozenset({torch.ops.aten._local_scalar_dense.default, torch.ops.aten.item.default})
_ALLOCATION_ONLY = frozenset({torch.ops.aten.empty.memory_format, torch.ops.aten.empty_like.default,
                              torch.ops.aten.empty_strided.default, torch.ops.aten.new_empty.default,
                              torch.ops.aten.new_empty_strided.default})


def _rerun(func, args, kwargs, out) -> None:
    """One captured op again, its fresh results copied into the tensors captured for them."""
    fresh = func(*args, **kwargs)
    for captured, new in zip(tree_flatten(out)[0], tree_flatten(fresh)[0], strict=True):
        if not isinstance(captured, torch.Tensor) or captured is new:
            continue
        if (new.untyped_storage().data_ptr() == captured.untyped_storage().data_ptr()
                and new.storage_offset() == captured.storage_offset()
                and new.stride() == captured.stride()):
            continue  # a view or in-place result: already the captured memory
        captured.copy_(new)


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
        self._waiting_at: int | None = None  # the step a replay waits at (an ExternalEvent wait), else None
        self.open_task_group: int | None = None  # first step of a task group begun in this capture (graph_tasks)

    def capture_begin(self, pool=None, capture_error_mode: str = "global") -> None:
        if _CAPTURING:
            raise RuntimeError("torch.npu.NPUGraph.capture_begin: a capture is already under way (capture inside "
                               "capture is not allowed, as on an NPU)")
        self._ops = []
        self._storages = []
        self._was_reset = False
        self.open_task_group = None
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
        for step in self._ops:
            if isinstance(step, EventStep):
                continue
            for leaf in tree_flatten(step[1:])[0]:
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
        if self._waiting_at is not None:
            raise RuntimeError("torch.npu.NPUGraph.replay: the previous replay still waits at a captured "
                               "ExternalEvent wait; record the event first (graph_tasks.py)")
        self._waiting_at = 0
        self._run()

    def _run(self) -> None:
        """Run the captured steps from where the replay stands, to the end or to a wait for an ExternalEvent no
        stream has recorded yet (then the event's record runs the rest: graph_tasks.ExternalEvent)."""
        position, steps = self._waiting_at, self._ops
        # A replay launches captured kernels natively on an NPU: no Python dispatch mode around it (AOT's check of
        # custom ops' aliasing on a compiled function's first call, a user's mode) sees them.
        with torch.no_grad(), outside_python_dispatch_modes():
            while position < len(steps):
                step = steps[position]
                if isinstance(step, EventStep):
                    if step.kind == "wait" and not step.event._recorded:
                        self._waiting_at = position
                        step.event._waiting.append(self)
                        return
                    if step.kind == "reset":
                        step.event._recorded = False
                    elif step.kind == "record":
                        step.event._signal()
                else:
                    _rerun(*step)
                position += 1
        self._waiting_at = None

    def waiting(self) -> bool:
        """True while a replay waits for an ExternalEvent's record."""
        return self._waiting_at is not None

    def reset(self) -> None:
        """Drops the captured ops and tensors; a later `replay()` is refused until a new capture."""
        if self._recorder is not None:
            raise RuntimeError("torch.npu.NPUGraph.reset: the graph is capturing; end the capture first")
        self._ops = None
        self._storages = []
        self._was_reset = True
        self._waiting_at = None

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


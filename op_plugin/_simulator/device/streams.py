"""`torch.npu.Stream`, `torch.npu.Event` and the current-stream calls on the virtual NPU (issue 33 item 2).

The virtual NPU runs every kernel synchronously on the host CPU, at the moment it is called: there is no
queue and no concurrency. So a stream is a name that code can pass around (`torch.npu.Stream(device,
priority)` is a `torch.Stream` of device type npu, accepted by `tensor.record_stream(s)` and `torch.Stream`
APIs), `torch.npu.stream(s)` makes it the current stream of its device inside the block (and, as on CUDA and
torch_npu, makes its device the current device there), and every wait or synchronisation returns at once:
`query()` is always True because nothing is ever pending.

`Event(enable_timing=True).record()` reads a host clock (`time.perf_counter`) at the call. Since the work
submitted before the record has already run when it is called, record time is completion time, and
`start.elapsed_time(end)` is the host time in milliseconds between the two records: host time of the CPU
kernels, not NPU kernel time.

`ExternalEvent()` (torch_npu's `graph_external=True` event) may be waited on before it is recorded: captured in an
NPUGraph, its wait stops a replay until the event is recorded (graphs.py, graph_tasks.py); outside a capture a
wait on an event nobody recorded is refused, since no later record can reach a call that has already run.

Refused with an error naming the call: a stream that is not an npu stream (another device type), a device
index past `device_count()`, an event recorded on a stream of another device than its earlier record,
`elapsed_time` of events not both recorded or not both created with `enable_timing=True`.
"""
from __future__ import annotations

import contextlib
import itertools
import threading
import time

import torch

from . import graphs

PRIVATEUSE1 = 20  # c10::DeviceType::PrivateUse1, renamed npu
_IDS = itertools.count(1)  # stream 0 is each device's default stream
_LOCAL = threading.local()
_LIBRARY = None


def _device_index(device, call: str) -> int:
    if device is None:
        return torch.npu.current_device()
    if isinstance(device, str):
        device = torch.device(device)
    if isinstance(device, torch.device):
        if device.type != "npu":
            raise ValueError(f"{call}: expected an npu device, got {device}")
        index = torch.npu.current_device() if device.index is None else device.index
    else:
        index = int(device)
    count = torch.npu.device_count()
    if not 0 <= index < count:  # a RuntimeError, as set_device's and the device guard's (and CUDA's)
        raise RuntimeError(f"{call}: device npu:{index} does not exist: the virtual NPU has device_count() == "
                           f"{count} (indices 0..{count - 1}; OP_PLUGIN_VIRTUAL_NPU_COUNT sets the count)")
    return index


class Stream(torch.Stream):
    """An npu stream (a `torch.Stream` of device type npu). Work is never queued on it: the CPU ran each kernel
    at its call, so `synchronize()` returns at once and `query()` is True."""

    def __new__(cls, device=None, priority: int = 0, *, _stream_id: int | None = None):
        index = _device_index(device, "torch.npu.Stream")
        stream_id = next(_IDS) if _stream_id is None else _stream_id
        self = super().__new__(cls, stream_id=stream_id, device_index=index, device_type=PRIVATEUSE1)
        self._npu_priority = int(priority)
        return self

    def __init__(self, device=None, priority: int = 0, *, _stream_id: int | None = None):
        pass  # torch.Stream is set up by __new__

    @property
    def npu_stream(self) -> int:
        return self.stream_id

    def wait_stream(self, stream) -> None:
        """Returns at once: `stream`'s work has already run."""
        _check_npu(stream, "torch.npu.Stream.wait_stream")

    def wait_event(self, event) -> None:
        """Returns at once for an Event: the work it marks has already run. An ExternalEvent's wait is its own
        (graph_tasks.py: captured, it is a node of the graph)."""
        if isinstance(event, ExternalEvent):
            event.wait(self)
            return
        if not isinstance(event, Event):
            raise TypeError(f"torch.npu.Stream.wait_event: expected a torch.npu.Event, got {type(event).__name__}")

    def record_event(self, event=None):
        """Records `event` (a new one when None) on this stream, at the host time of the call."""
        event = Event() if event is None else event
        event.record(self)
        return event

    def query(self) -> bool:
        """True: nothing is ever pending on the virtual NPU."""
        return True

    def synchronize(self) -> None:
        """Returns at once: nothing is ever pending on the virtual NPU."""

    def __eq__(self, other) -> bool:
        return isinstance(other, torch.Stream) and (other.device_type, other.device_index, other.stream_id) == (
            self.device_type, self.device_index, self.stream_id)

    def __hash__(self) -> int:
        return hash((self.device_type, self.device_index, self.stream_id))

    def __repr__(self) -> str:
        return f"<torch.npu.Stream device=npu:{self.device_index} npu_stream={self.stream_id}>"


def _check_npu(stream, call: str) -> Stream:
    if not isinstance(stream, torch.Stream) or stream.device.type != "npu":
        where = stream.device if isinstance(stream, torch.Stream) else type(stream).__name__
        raise ValueError(f"{call}: expected an npu stream (torch.npu.Stream), got a stream of {where}")
    if not isinstance(stream, Stream):
        stream = Stream(stream.device_index, _stream_id=stream.stream_id)
    return stream


def _current() -> dict:
    streams = getattr(_LOCAL, "streams", None)
    if streams is None:
        streams = _LOCAL.streams = {}
    return streams


def default_stream(device=None) -> Stream:
    """The device's default stream (stream id 0)."""
    return Stream(_device_index(device, "torch.npu.default_stream"), _stream_id=0)


def current_stream(device=None) -> Stream:
    """The stream `torch.npu.stream(s)` / `set_stream(s)` made current on the device (per thread), else its
    default stream."""
    index = _device_index(device, "torch.npu.current_stream")
    return _current().get(index) or default_stream(index)


def set_stream(stream) -> None:
    """Makes `stream` the current stream of its device and its device the current device (as CUDA and
    torch_npu do). None does nothing."""
    if stream is None:
        return
    stream = _check_npu(stream, "torch.npu.set_stream")
    torch.npu.set_device(stream.device_index)
    _current()[stream.device_index] = stream


@contextlib.contextmanager
def stream(stream):
    """`with torch.npu.stream(s):` makes `s` the current stream of its device, and its device the current device,
    inside the block; both are restored after it. None is a no-op."""
    if stream is None:
        yield
        return
    stream = _check_npu(stream, "torch.npu.stream")
    previous_device = torch.npu.current_device()
    streams = _current()
    previous = streams.get(stream.device_index)
    torch.npu.set_device(stream.device_index)
    streams[stream.device_index] = stream
    try:
        yield
    finally:
        if previous is None:
            streams.pop(stream.device_index, None)
        else:
            streams[stream.device_index] = previous
        torch.npu.set_device(previous_device)


class Event:
    """An npu event. `record()` takes the host time (`time.perf_counter`) at the call: the virtual NPU has run
    every kernel submitted before it already, so record time is completion time, and `elapsed_time` is host
    time in milliseconds, not NPU kernel time. `wait`, `synchronize` return at once; `query()` is True."""

    def __init__(self, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False):
        self.enable_timing = bool(enable_timing)
        self.blocking = bool(blocking)
        self.interprocess = bool(interprocess)
        self._time: float | None = None
        self._device: int | None = None

    def record(self, stream=None) -> None:
        stream = current_stream() if stream is None else _check_npu(stream, "torch.npu.Event.record")
        if self._device is not None and stream.device_index != self._device:
            raise ValueError(f"torch.npu.Event.record: the event was recorded on npu:{self._device}, the stream "
                             f"is on npu:{stream.device_index} (an event stays on one device, as on an NPU)")
        self._device = stream.device_index
        self._time = time.perf_counter()

    def wait(self, stream=None) -> None:
        """Returns at once: the recorded work has already run."""
        if stream is not None:
            _check_npu(stream, "torch.npu.Event.wait")

    def query(self) -> bool:
        return True

    def synchronize(self) -> None:
        """Returns at once: the recorded work has already run."""

    def elapsed_time(self, end_event: Event) -> float:
        """Milliseconds of host time between this event's record and `end_event`'s."""
        if not (self.enable_timing and getattr(end_event, "enable_timing", False)):
            raise RuntimeError("torch.npu.Event.elapsed_time: both events must be created with "
                               "enable_timing=True")
        if self._time is None or end_event._time is None:
            raise RuntimeError("torch.npu.Event.elapsed_time: both events must be recorded before calculating "
                               "elapsed time")
        return (end_event._time - self._time) * 1000.0

    def __repr__(self) -> str:
        state = "recorded" if self._time is not None else "not recorded"
        return f"<torch.npu.Event {state}>"


class ExternalEvent:
    """An event that may be waited on before it is recorded (torch_npu's `graph_external=True` event). Captured,
    `wait`, `reset` and `record` are steps of the graph (graphs.EventStep): a replay stops at the wait until the
    event is recorded, and the record runs the rest of it (graph_tasks.py says why TorchAir needs it)."""

    def __init__(self):
        self._recorded = False
        self._waiting: list = []  # graphs whose replay stopped at a wait for this event

    def record(self, stream=None) -> None:
        if self._captured("record", stream):
            return
        self._signal()

    def wait(self, stream=None) -> None:
        if self._captured("wait", stream):
            return
        if not self._recorded:
            raise RuntimeError("torch.npu.ExternalEvent.wait outside a graph capture, on an event no stream has "
                               "recorded: an NPU stream would wait for a later record, which the virtual NPU "
                               "(each call runs when it is made) cannot; record it first")

    def reset(self, stream=None) -> None:
        if self._captured("reset", stream):
            return
        self._recorded = False

    def query(self) -> bool:
        return self._recorded

    def _captured(self, kind: str, stream) -> bool:
        """Validates `stream`; during a capture, records the call as a step of the graph and says so."""
        _stream_or_current(stream, f"torch.npu.ExternalEvent.{kind}")
        graph = graphs.capturing_graph()
        if graph is None:
            return False
        graph._ops.append(graphs.EventStep(kind, self))
        return True

    def _signal(self) -> None:
        """Recorded: the replays waiting for it run on (graphs.NPUGraph._run)."""
        self._recorded = True
        waiting, self._waiting = self._waiting, []
        for graph in waiting:
            graph._run()

    def __repr__(self) -> str:
        return f"<torch.npu.ExternalEvent {'recorded' if self._recorded else 'not recorded'}>"


def _stream_or_current(stream, call: str) -> Stream:
    return current_stream() if stream is None else _check_npu(stream, call)


def _record_stream(tensor, stream) -> None:
    """`tensor.record_stream(s)`: accepted; nothing to do, the allocator never reuses memory a stream still uses
    because no stream ever has work pending."""
    _check_npu(stream, "Tensor.record_stream")


def install() -> None:
    """A PrivateUse1 kernel for `aten::record_stream` (once per process)."""
    global _LIBRARY
    if _LIBRARY is not None:
        return
    _LIBRARY = torch.library.Library("aten", "IMPL")  # kept for the process: dropping it unregisters
    _LIBRARY.impl("record_stream", _record_stream, "PrivateUse1")

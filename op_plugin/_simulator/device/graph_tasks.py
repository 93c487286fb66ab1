"""The task-update calls of NPU graphs on the virtual NPU, with `torch.npu.ExternalEvent` (streams.py):
`graph_task_group_begin`, `graph_task_group_end`, `graph_task_update_begin`, `graph_task_update_end`
(torch_npu/npu/graphs.py, streams.py).

What an NPU does, and TorchAir's aclgraph capture relies on (`_acl_concrete_graph`: CapturedGraphUpdateAndReplay):

* an ExternalEvent can be waited on before it is recorded; captured, `wait` and `reset` become nodes of the graph:
  a replay stops at the wait until some stream records the event, then resets it for the next replay;
* a task group (`graph_task_group_begin` ... `graph_task_group_end(stream)` during capture) marks the captured
  kernels of a call (a fused attention's `.out`); its handle names them;
* between `graph_task_update_begin(stream, handle)` and `graph_task_update_end(stream)`, on a stream other than
  the capture's, the same call with new arguments (another `actual_seq_lengths`) launches nothing: it rewrites
  the captured kernels' arguments, which the next run of the group uses.

Here (graphs.py) a captured wait suspends `replay()` at that point while the event is not recorded; recording it
runs the rest of the replay, before the record returns. So both orders work as on an NPU: update and record,
then replay (torch_npu's documented example), or replay, then update and record (TorchAir's). Refused with an
error naming the call: a task group or an update outside their phase, an update on the capture's stream, an update
whose calls are not the group's ops, a second replay while one waits, and `wait` outside a capture on an
event no stream has recorded (an NPU stream would wait for a later record; the virtual NPU runs each call when it
is made, so it cannot). Reading a captured output while its replay waits gives the previous replay's values,
where an NPU would block: record the event first, as TorchAir does.
"""
from __future__ import annotations

from torch.utils._python_dispatch import TorchDispatchMode

from . import graphs
from .streams import _check_npu


class TaskGroup:
    """`graph_task_group_end`'s handle: the captured steps [start, stop) of one graph, and the capture's stream."""

    def __init__(self, graph, start: int, stop: int, stream):
        self.graph, self.start, self.stop, self.stream = graph, start, stop, stream

    def __repr__(self) -> str:
        return f"<torch.npu graph task group: {self.stop - self.start} captured op(s)>"


def graph_task_group_begin(stream) -> None:
    stream = _check_npu(stream, "torch.npu.graph_task_group_begin")
    graph = graphs.capturing_graph()
    if graph is None:
        raise RuntimeError("torch.npu.graph_task_group_begin: no graph is capturing (a task group marks captured "
                           "kernels)")
    if graph.open_task_group is not None:
        raise RuntimeError("torch.npu.graph_task_group_begin: a task group is already open in this capture")
    graph.open_task_group = len(graph._ops)  # its first step; a new capture starts with none open


def graph_task_group_end(stream) -> TaskGroup:
    stream = _check_npu(stream, "torch.npu.graph_task_group_end")
    graph = graphs.capturing_graph()
    if graph is None or graph.open_task_group is None:
        raise RuntimeError("torch.npu.graph_task_group_end: no task group is open (graph_task_group_begin first, "
                           "in the same capture)")
    start, graph.open_task_group = graph.open_task_group, None
    return TaskGroup(graph, start, len(graph._ops), stream)


class _Updater(TorchDispatchMode):
    """Between graph_task_update_begin and _end: each op call is taken as the new arguments of the group's next
    captured op, and runs nothing (on an NPU it rewrites the captured kernel's parameters)."""

    def __init__(self, group: TaskGroup):
        super().__init__()
        self.group = group
        self.calls: list = []
        self.refused = False  # a call was refused: graph_task_update_end closes the update, changing nothing

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        steps = [step for step in self.group.graph._ops[self.group.start:self.group.stop]
                 if not isinstance(step, graphs.EventStep)]
        index = len(self.calls)
        if index >= len(steps) or steps[index][0] is not func:
            self.refused = True
            captured = [str(step[0]) for step in steps]
            raise RuntimeError(f"torch.npu.graph_task_update: call {index + 1} of the update is {func}, where the "
                               f"task group captured {captured}: an update repeats the group's calls with new "
                               "arguments")
        self.calls.append((func, args, kwargs or {}))
        return steps[index][3]  # the captured outputs, which the next run of the group writes


_UPDATING: dict = {}  # stream -> its _Updater


def graph_task_update_begin(stream, handle) -> None:
    stream = _check_npu(stream, "torch.npu.graph_task_update_begin")
    if not isinstance(handle, TaskGroup):
        raise TypeError(f"torch.npu.graph_task_update_begin: expected the handle graph_task_group_end returned, "
                        f"got {type(handle).__name__}")
    if stream == handle.stream:
        raise RuntimeError("torch.npu.graph_task_update_begin: the update stream must differ from the stream the "
                           "group was captured on (torch_npu's constraint)")
    if _UPDATING:
        raise RuntimeError("torch.npu.graph_task_update_begin: an update is already under way "
                           "(graph_task_update_end first)")
    updater = _Updater(handle)
    _UPDATING[stream] = updater
    updater.__enter__()


def graph_task_update_end(stream) -> None:
    stream = _check_npu(stream, "torch.npu.graph_task_update_end")
    updater = _UPDATING.pop(stream, None)
    if updater is None:
        raise RuntimeError("torch.npu.graph_task_update_end: no update is under way on this stream")
    updater.__exit__(None, None, None)
    if updater.refused:
        return  # the refusal was raised at the call; the captured arguments stay as they were
    group = updater.group
    positions = [i for i in range(group.start, group.stop) if not isinstance(group.graph._ops[i], graphs.EventStep)]
    if len(updater.calls) != len(positions):
        raise RuntimeError(f"torch.npu.graph_task_update_end: the update made {len(updater.calls)} call(s), the "
                           f"task group captured {len(positions)}")
    for position, (func, args, kwargs) in zip(positions, updater.calls, strict=True):
        out = group.graph._ops[position][3]
        group.graph._ops[position] = (func, args, kwargs, out)

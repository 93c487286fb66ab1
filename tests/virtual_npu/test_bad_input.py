"""Bad input to the virtual NPU (issue 33 item 2): each is refused with an error naming the call, or, where
torch refuses before any op_plugin code runs, with torch's own message (documented in docs/virtual-npu.md).
Each check runs a script in a child process."""
from __future__ import annotations

from .test_device import _ok, _python, built_extension  # noqa: F401  (the module fixture builds the C++ part)

_REFUSED = """
    def refused(name, call, kind=RuntimeError):
        try:
            call()
        except kind as error:
            print(name, "|", type(error).__name__, "|", str(error).splitlines()[0])
            return str(error)
        raise AssertionError(f"{name}: accepted")
"""


def test_npu_with_the_virtual_npu_off_fails_as_on_a_stock_host(tmp_path):
    # torch's C++ device-string parser and Tensor's attributes answer before any op_plugin code runs (the autoload
    # entry imports nothing when the variable is unset), so the message cannot name OP_PLUGIN_VIRTUAL_NPU.
    code = _REFUSED + """
    import torch
    for name, call in {"torch.device": lambda: torch.device("npu"), "torch.device:1": lambda: torch.device("npu", 1),
                       "torch.empty": lambda: torch.empty(1, device="npu"), "to": lambda: torch.ones(1).to("npu")
                       }.items():
        assert "device type at start of device string: npu" in refused(name, call)
    assert refused(".npu()", lambda: torch.ones(1).npu(), AttributeError) == "'Tensor' object has no attribute 'npu'"
    assert refused("torch.npu", lambda: torch.npu.device_count(), AttributeError) == (
        "module 'torch' has no attribute 'npu'")
    """
    for value in (None, "0"):
        extra = {} if value is None else {"OP_PLUGIN_VIRTUAL_NPU": value}
        result = _python(code, tmp_path, active=False, **extra)
        assert result.returncode == 0, result.stderr[-4000:]
        assert result.stdout.count("|") == 2 * 6, result.stdout


def test_a_device_index_past_the_count(tmp_path):
    out = _ok(_REFUSED + """
    import torch
    torch.npu.set_device(1)
    calls = {
        "set_device": lambda: torch.npu.set_device(9),
        "device": lambda: torch.npu.device(9).__enter__(),
        "device str": lambda: torch.npu.device("npu:9").__enter__(),
        "Stream": lambda: torch.npu.Stream(device=9),
        "Stream str": lambda: torch.npu.Stream(device="npu:9"),
        "current_stream": lambda: torch.npu.current_stream(9),
        "default_stream": lambda: torch.npu.default_stream(9),
        "synchronize": lambda: torch.npu.synchronize(9),
        "to": lambda: torch.ones(2).to("npu:9"),
        "npu(9)": lambda: torch.ones(2).npu(9),
        "empty": lambda: torch.empty(2, 3, device="npu:9"),
        "module.to": lambda: torch.nn.Linear(2, 2).to("npu:9"),
    }
    for name, call in calls.items():
        text = refused(name, call)
        assert "device npu:9 does not exist" in text and "device_count() == 8" in text, (name, text)
        assert "OP_PLUGIN_VIRTUAL_NPU_COUNT" in text, (name, text)
        assert torch.npu.current_device() == 1, name  # a refused call leaves the current device alone
    assert torch.device("npu:9").index == 9  # a device object alone is not checked, as on CUDA
    """, tmp_path)
    lines = dict(line.split(" | ", 1) for line in out.splitlines())
    assert lines["set_device"].startswith("RuntimeError | torch.npu.set_device(9): device npu:9")
    assert lines["device"].startswith("RuntimeError | torch.npu.set_device(9): ")  # what torch.npu.device runs
    assert lines["Stream"].startswith("RuntimeError | torch.npu.Stream: device npu:9")
    assert lines["current_stream"].startswith("RuntimeError | torch.npu.current_stream: ")
    assert lines["to"].startswith("RuntimeError | torch.empty_strided (aten::empty_strided; also .to(), .npu())")
    assert lines["empty"].startswith("RuntimeError | torch.empty (aten::empty.memory_format): device npu:9")


def test_streams_of_another_device(tmp_path):
    out = _ok(_REFUSED + """
    import torch
    s1 = torch.npu.Stream(device=1)
    assert torch.npu.current_device() == 0
    with torch.npu.stream(s1):  # as on CUDA and torch_npu: the stream's device is current inside, not an error
        assert torch.npu.current_device() == 1 and torch.ones(1, device="npu").device.index == 1
    assert torch.npu.current_device() == 0 and torch.npu.current_stream(1) == torch.npu.default_stream(1)
    event = torch.npu.Event()
    event.record(s1)  # a first record on a stream of another device than the current one: as on CUDA
    text = refused("Event.record", lambda: event.record(), ValueError)  # CUDA: a RuntimeError
    assert "the event was recorded on npu:1, the stream is on npu:0" in text, text
    refused("Event.record cpu", lambda: event.record(torch.Stream(stream_id=0, device_index=0, device_type=0)),
            ValueError)
    refused("Stream cpu", lambda: torch.npu.Stream(device="cpu"), ValueError)
    """, tmp_path)
    assert "Event.record | ValueError | torch.npu.Event.record: the event was recorded on npu:1" in out
    assert "Stream cpu | ValueError | torch.npu.Stream: expected an npu device, got cpu" in out


def test_graph_memory_and_misuse(tmp_path):
    out = _ok(_REFUSED + """
    import gc, torch
    base = torch.npu.memory_allocated()
    static_x = torch.ones(256, device="npu")
    g = torch.npu.NPUGraph()
    with torch.npu.graph(g):
        static_y = static_x * 2 + 1
    held = torch.npu.memory_allocated() - base
    assert held >= 3 * 1024, held  # x, the product and y
    del static_x, static_y
    gc.collect()  # the graph keeps its tensors alive, as a real graph keeps its pool: nothing is freed
    assert torch.npu.memory_allocated() - base == held
    g.replay()
    assert torch.npu.memory_allocated() - base == held
    g.reset()
    gc.collect()
    assert torch.npu.memory_allocated() == base  # reset() lets them go
    assert "reset" in refused("replay after reset", g.replay)

    def captured():
        x = torch.ones(4, device="npu")
        graph = torch.npu.NPUGraph()
        with torch.npu.graph(graph):
            y = x.exp()
        return graph, x, y

    graph, x, y = captured()
    y.untyped_storage().resize_(0)  # the output's storage freed behind the graph's back
    text = refused("output storage freed", graph.replay)
    assert "torch.npu.NPUGraph.replay" in text and "freed or resized" in text and "shape (4,)" in text, text
    graph, x, y = captured()
    x.set_(torch.zeros(4, device="npu"))  # the input moved to other memory
    assert "freed or resized" in refused("input storage replaced", graph.replay)
    graph, x, y = captured()
    x.resize_(1000)  # grown: a new allocation
    assert "freed or resized" in refused("input resized", graph.replay)

    outer, inner = torch.npu.NPUGraph(), torch.npu.NPUGraph()
    with torch.npu.graph(outer):
        z = torch.ones(2, device="npu") + 1
        text = refused("capture inside capture", lambda: torch.npu.graph(inner).__enter__())
        assert "capture inside capture is not allowed" in text, text
        refused("replay during capture", outer.replay)
        refused("reset during capture", outer.reset)
    outer.replay()  # the outer capture ended normally
    assert z.tolist() == [2.0, 2.0] and not torch.npu.is_current_stream_capturing()
    refused("capture_end without capture", torch.npu.NPUGraph().capture_end)
    refused("replay before capture", torch.npu.NPUGraph().replay)
    refused("graph of a non-graph", lambda: torch.npu.graph(object()).__enter__(), TypeError)
    """, tmp_path)
    lines = dict(line.split(" | ", 1) for line in out.splitlines())
    assert lines["replay during capture"] == (
        "RuntimeError | torch.npu.NPUGraph.replay: the capture has not ended; capture it again before replaying")
    assert lines["reset during capture"].startswith("RuntimeError | torch.npu.NPUGraph.reset: the graph is capturing")
    assert lines["capture_end without capture"] == (
        "RuntimeError | torch.npu.NPUGraph.capture_end: this graph is not capturing")
    assert lines["replay before capture"].startswith("RuntimeError | torch.npu.NPUGraph.replay: nothing was captured")
    assert lines["graph of a non-graph"] == "TypeError | torch.npu.graph: expected a torch.npu.NPUGraph, got object"

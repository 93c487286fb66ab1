"""Streams, events and NPUGraph on the virtual NPU (issue 33 item 2): each check runs a script in a child process
with OP_PLUGIN_VIRTUAL_NPU=1. The oracle for a replayed graph is the same expression computed on CPU tensors."""
from __future__ import annotations

from .test_device import _ok, built_extension  # noqa: F401  (the module fixture builds the C++ part)


def test_streams_and_events(tmp_path):
    out = _ok("""
        import torch
        s = torch.npu.Stream(priority=-1)
        assert isinstance(s, torch.Stream) and s.device == torch.device("npu", 0) and s.query()
        default = torch.npu.default_stream()
        assert torch.npu.current_stream() == default and s != default
        with torch.npu.stream(s):
            assert torch.npu.current_stream() == s
        assert torch.npu.current_stream() == default
        s1 = torch.npu.Stream(device="npu:1")
        with torch.npu.stream(s1):  # as on CUDA and torch_npu: the stream's device is current inside
            assert torch.npu.current_device() == 1 and torch.npu.current_stream() == s1
            assert torch.npu.current_stream(0) == default
        assert torch.npu.current_device() == 0 and torch.npu.current_stream(1) == torch.npu.default_stream(1)
        x = torch.ones(1000, device="npu")
        x.record_stream(s)
        s.wait_stream(torch.npu.current_stream())
        s.synchronize()
        start, end = torch.npu.Event(enable_timing=True), torch.npu.Event(enable_timing=True)
        start.record()
        y = (x * 2).sum()
        end.record(s)
        end.wait()
        end.synchronize()
        assert end.query() and start.elapsed_time(end) >= 0.0
        assert y.item() == 2000.0
        event = s.record_event()
        torch.npu.current_stream().wait_event(event)
        cpu_stream = torch.Stream(stream_id=0, device_index=0, device_type=0)
        for call in (lambda: torch.npu.stream(cpu_stream).__enter__(), lambda: x.record_stream(cpu_stream),
                     lambda: start.record(cpu_stream)):
            try:
                call()
            except ValueError as error:
                print("refused:", error)
            else:
                raise AssertionError("a cpu stream accepted as an npu stream")
        try:
            start.record(s1)
        except ValueError as error:
            print("refused:", error)
        else:
            raise AssertionError("an event recorded on two devices")
        try:
            torch.npu.Event().elapsed_time(torch.npu.Event())
        except RuntimeError as error:
            assert "enable_timing" in str(error)
        else:
            raise AssertionError("elapsed_time without timing")
    """, tmp_path)
    assert "torch.npu.stream: expected an npu stream" in out
    assert "Tensor.record_stream: expected an npu stream" in out
    assert "torch.npu.Event.record: expected an npu stream" in out
    assert "torch.npu.Event.record: the event was recorded on npu:0" in out


def test_graph_replay_reads_inputs_and_writes_the_captured_outputs(tmp_path):
    _ok("""
        import torch
        torch.manual_seed(0)
        x_cpu, w_cpu = torch.randn(4, 5), torch.randn(5, 3)
        x, w = x_cpu.npu(), w_cpu.npu()
        g = torch.npu.NPUGraph()
        with torch.npu.graph(g):
            y = x @ w + 1          # a capture computes nothing, as on an NPU: y is filled by a replay
        g.replay()
        assert torch.allclose(y.cpu(), x_cpu @ w_cpu + 1, rtol=1e-6, atol=1e-6)
        y_ptr = y.data_ptr()
        for _ in range(3):
            new = torch.randn(4, 5)
            x.copy_(new.npu())
            g.replay()
            assert y.data_ptr() == y_ptr
            assert torch.allclose(y.cpu(), new @ w_cpu + 1, rtol=1e-6, atol=1e-6)
            assert torch.equal(y, x @ w + 1)  # replay equals eager on the device bit for bit
        before = torch.npu.memory_allocated()
        for _ in range(10):
            g.replay()
        assert torch.npu.memory_allocated() == before, (before, torch.npu.memory_allocated())
        g.reset()
        try:
            g.replay()
        except RuntimeError as error:
            assert "torch.npu.NPUGraph.replay" in str(error) and "reset" in str(error), error
        else:
            raise AssertionError("replay after reset")
    """, tmp_path)


def test_graph_refusals(tmp_path):
    _ok("""
        import torch
        x = torch.ones(4, 4, device="npu")
        g, inner = torch.npu.NPUGraph(), torch.npu.NPUGraph()
        with torch.npu.graph(g):
            assert torch.npu.is_current_stream_capturing()
            y = x * 2
            try:
                inner.capture_begin()
            except RuntimeError as error:
                assert "torch.npu.NPUGraph.capture_begin" in str(error), error
            else:
                raise AssertionError("capture inside capture")
        assert not torch.npu.is_current_stream_capturing()
        try:
            torch.npu.NPUGraph().replay()
        except RuntimeError as error:
            assert "nothing was captured" in str(error), error
        else:
            raise AssertionError("replay before capture")
        x.resize_(0)
        x.untyped_storage().resize_(0)
        try:
            g.replay()
        except RuntimeError as error:
            assert "torch.npu.NPUGraph.replay" in str(error) and "freed or resized" in str(error), error
        else:
            raise AssertionError("replay over freed memory")
    """, tmp_path)


def test_graph_of_a_module_with_in_place_ops(tmp_path):
    _ok("""
        import torch
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
        npu_model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4)).npu()
        npu_model.load_state_dict({k: v.npu() for k, v in model.state_dict().items()})
        static_x = torch.zeros(2, 8, device="npu")
        g = torch.npu.NPUGraph()
        with torch.no_grad(), torch.npu.graph(g):
            h = npu_model(static_x)
            h.mul_(3)
            out = h.softmax(-1)
        for _ in range(2):
            new = torch.randn(2, 8)
            static_x.copy_(new.npu())
            g.replay()
            with torch.no_grad():
                expected = (model(new) * 3).softmax(-1)
            assert torch.allclose(out.cpu(), expected, rtol=1e-5, atol=1e-6), (out.cpu(), expected)
    """, tmp_path)


def test_capture_runs_no_kernel_on_the_uninitialised_buffers(tmp_path):
    """A capture launches no kernel (the inputs it is given may be uninitialised, as TorchAir's empty_like
    clones are): a value-checking kernel sees only replayed inputs; .item() inside a capture is refused."""
    _ok("""
        import torch, torch_npu
        var = torch.zeros(20, 16).npu()
        indices = torch.empty(4, 1, dtype=torch.int64).npu()   # garbage until the caller fills it
        updates = torch.ones(4, 16).npu()
        g = torch.npu.NPUGraph()
        with torch.npu.graph(g):
            torch_npu.npu_scatter_nd_update_(var, indices, updates)   # its kernel refuses out-of-range indices
            total = var.sum()
        indices.copy_(torch.tensor([[0], [3], [5], [19]]).npu())
        g.replay()
        expected = torch.zeros(20, 16); expected[[0, 3, 5, 19]] = 1
        assert torch.equal(var.cpu(), expected) and total.item() == 64.0
        try:
            with torch.npu.graph(torch.npu.NPUGraph()):
                var.sum().item()
        except RuntimeError as error:
            assert "reads a tensor's value" in str(error), error
        else:
            raise AssertionError(".item() inside a capture")
    """, tmp_path)

"""torch.npu.ExternalEvent and the task-update calls of NPU graphs (device/graph_tasks.py), and TorchAir's aclgraph
capture of a fused attention whose sequence lengths change between calls (its static-workspace pass and its
update-and-replay module). Each check in a child process (test_device.py). The oracle for numbers is the fused
attention called eagerly with the same arguments (its own numbers are checked against a head-by-head loop in
tests/simulator/npu/test_attention_inference.py)."""
from __future__ import annotations

import json

from .test_device import _ok, _python, built_extension  # noqa: F401  (the module fixture builds the C++ part)

_CAPTURED = """
import torch, torch_npu
torch.manual_seed(0)
q = torch.randn(2, 4, 1, 16, dtype=torch.float16).npu()
k = torch.randn(2, 4, 64, 16, dtype=torch.float16).npu()
args = dict(num_heads=4, input_layout="BNSD", scale=0.25, softmax_lse_flag=False)
def eager(lengths):
    return torch_npu.npu_fused_infer_attention_score(q, k, k, actual_seq_lengths_kv=lengths, **args)[0].cpu()
def fia_out(lengths, workspace, out):
    torch_npu.npu_fused_infer_attention_score.out(q, k, k, actual_seq_lengths_kv=lengths, workspace=workspace,
                                                   out=out, **args)
event, update_stream = torch.npu.ExternalEvent(), torch.npu.Stream()
graph = torch.npu.NPUGraph()
with torch.no_grad():
    with torch.npu.graph(graph):
        stream = torch.npu.current_stream()
        workspace = torch_npu._npu_fused_infer_attention_score_get_max_workspace(q, k, k, actual_seq_lengths_kv=[8, 9],
                                                                                  **args)
        out = [torch.empty(2, 4, 1, 16, dtype=torch.float16, device="npu"),
               torch.empty(1, dtype=torch.float16, device="npu")]   # not written: softmax_lse_flag=False
        event.wait(stream)
        event.reset(stream)
        torch.npu.graph_task_group_begin(stream)
        fia_out([8, 9], workspace, out)
        handle = torch.npu.graph_task_group_end(stream)

def update(lengths):
    with torch.npu.stream(update_stream):
        torch.npu.graph_task_update_begin(update_stream, handle)
        fia_out(lengths, workspace, out)
        torch.npu.graph_task_update_end(update_stream)
"""


def test_update_then_replay_and_replay_then_update_both_run_the_new_arguments(tmp_path):
    out = _ok(_CAPTURED + """
with torch.no_grad():
    out[1].fill_(7)
    update([30, 64]); event.record(update_stream); graph.replay()          # torch_npu's documented order
    assert torch.equal(out[0].cpu(), eager([30, 64])) and not torch.equal(out[0].cpu(), eager([8, 9]))
    graph.replay()                                                           # TorchAir's order: the replay
    assert graph.waiting()                                                   # stops at the captured wait
    update([5, 17]); update_stream.record_event(event)                       # and runs on at the record
    assert not graph.waiting() and torch.equal(out[0].cpu(), eager([5, 17]))
    assert not torch.equal(out[0].cpu(), eager([30, 64]))
    assert out[1].cpu().tolist() == [7.0]                                    # lse not asked for: left alone
print("ok")
""", tmp_path)
    assert "ok" in out


def test_misuse_is_refused_naming_the_call(tmp_path):
    out = _ok(_CAPTURED + """
def refused(call, text):
    try:
        call()
    except (RuntimeError, TypeError) as error:
        assert text in str(error), (text, str(error))
        return
    raise AssertionError(f"not refused: {text}")

with torch.no_grad():
    refused(lambda: torch.npu.ExternalEvent().wait(), "no stream has recorded")
    refused(lambda: torch.npu.graph_task_group_begin(update_stream), "no graph is capturing")
    refused(lambda: torch.npu.graph_task_update_begin(stream, handle), "must differ from the stream")
    refused(lambda: torch.npu.graph_task_update_begin(update_stream, object()), "expected the handle")
    def wrong_op():
        torch.npu.graph_task_update_begin(update_stream, handle)
        try:
            q.add(1)
        finally:
            torch.npu.graph_task_update_end(update_stream)
    refused(wrong_op, "an update repeats the group's calls")
    graph.replay()
    refused(graph.replay, "still waits at a captured ExternalEvent wait")
    event.record(update_stream)
    assert not graph.waiting()
    again = torch.npu.NPUGraph()  # a capture that failed with a group open leaves none open for the next one
    try:
        with torch.npu.graph(again):
            torch.npu.graph_task_group_begin(torch.npu.current_stream())
            raise ValueError("the user's code failed mid-capture")
    except ValueError:
        pass
    with torch.npu.graph(again):
        torch.npu.graph_task_group_begin(torch.npu.current_stream())
        torch.npu.graph_task_group_end(torch.npu.current_stream())
print("ok")
""", tmp_path)
    assert "ok" in out


def test_torchair_aclgraph_updates_the_captured_attention_for_new_lengths(tmp_path):
    """reduce-overhead: TorchAir replaces the attention by its workspace query and `.out` form, captures it in a
    task group behind an ExternalEvent, and on later calls replays the graph and updates the group's lengths;
    each call equals eager with that call's lengths, and once the lengths are symbols one graph serves them all."""
    out = _ok("""
import torch, torch_npu, torchair
import op_plugin._simulator.device.graphs as graphs
captures = []
begin = graphs.NPUGraph.capture_begin
graphs.NPUGraph.capture_begin = lambda self, *a, **k: (captures.append(self), begin(self, *a, **k))[1]

class Attention(torch.nn.Module):
    def forward(self, q, k, v, lengths):
        return torch_npu.npu_fused_infer_attention_score(q, k, v, num_heads=4, input_layout="BNSD", scale=0.25,
                                                         softmax_lse_flag=False, actual_seq_lengths_kv=lengths)[0]

torch.manual_seed(0)
q, k, v = (torch.randn(2, 4, s, 16, dtype=torch.float16).npu() for s in (1, 64, 64))
for t in (q, k, v):
    torch._dynamo.mark_static(t)
config = torchair.CompilerConfig()
config.mode = "reduce-overhead"
compiled = torch.compile(Attention(), backend=torchair.get_npu_backend(compiler_config=config), dynamic=True)
counts = []
for lengths in ([9, 40], [33, 2], [64, 64], [9, 40], [1, 1]):
    got = compiled(q, k, v, lengths)
    assert torch.equal(got.cpu(), Attention()(q, k, v, lengths).cpu()), lengths
    counts.append(len(captures))
print("captures after each call", counts)
""", tmp_path)
    # dynamo compiles the lengths as constants first, then as symbols; from then on new lengths update the capture
    counts = json.loads(out.split("captures after each call ")[1].strip())
    assert counts[1] == counts[-1], counts


def test_a_replay_is_not_seen_by_python_dispatch_modes(tmp_path):
    """On an NPU a replay launches the captured kernels natively: a dispatch mode around it (AOT's aliasing check
    on a compiled function's first call, which TorchAir's capture-and-replay runs inside) sees none of them."""
    out = _ok("""
import torch
from torch.utils._python_dispatch import TorchDispatchMode

class Seen(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.ops = []
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.append(str(func))
        return func(*args, **(kwargs or {}))

x = torch.arange(4.0, device="npu")
graph = torch.npu.NPUGraph()
with torch.npu.graph(graph):
    y = x * 2 + 1
x.copy_(torch.full((4,), 3.0))
with Seen() as seen:
    graph.replay()
assert seen.ops == [], seen.ops
assert y.cpu().tolist() == [7.0] * 4, y
print("ok")
""", tmp_path)
    assert "ok" in out

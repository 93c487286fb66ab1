"""The GE graph runs below torch's Python dispatch modes, as in the native runtime on an NPU.

A TorchDispatchMode active around the compiled graph's compile and run sees TorchAir's Python, never the aten
calls the simulator makes (on an NPU the graph is compiled and its GE kernels run inside the native runtime). The
one such mode on the npugraph path is AOT autograd's custom-op aliasing check, which wraps the first
call of every compiled function (a user's mode around a compiled call makes dynamo skip the frame).
"""

import torch
from torch._functorch._aot_autograd import runtime_wrappers


def _model(x, w):
    return torch.relu(x @ w) * 2.0


def _kernel_ops(ops):
    return sorted({op for op in ops if op.split(".")[1] in ("mm", "matmul", "bmm", "relu", "mul")})


def test_first_call_kernels_bypass_aots_aliasing_check(torchair, monkeypatch):
    torch._dynamo.reset()
    seen = []
    original = runtime_wrappers._AnalyzeCustomOpInputOutputMode.__torch_dispatch__

    def counting(self, func, types, args=(), kwargs=None):
        seen.append(str(func))
        return original(self, func, types, args, kwargs)

    monkeypatch.setattr(runtime_wrappers._AnalyzeCustomOpInputOutputMode, "__torch_dispatch__", counting)
    x, w = torch.randn(5, 8), torch.randn(8, 2)
    eager_seen_before = len(seen)
    got = torch.compile(_model, backend="npugraph", fullgraph=True)(x, w)
    torch.testing.assert_close(got, _model(x, w))
    assert eager_seen_before == 0
    assert _kernel_ops(seen) == [], seen
    # nor the graph's compile at its first run (its Consts decoded: empty, view, clone), native on an NPU too;
    # what it sees is TorchAir's record_function around the run
    assert [op for op in seen if not op.startswith("profiler.")] == [], seen
    # the check itself is active on first calls (aot_eager runs its kernels under it): else this proves nothing
    torch._dynamo.reset()
    torch.compile(_model, backend="aot_eager", fullgraph=True)(x, w)
    assert _kernel_ops(seen), "AOT's aliasing check did not run on aot_eager's first call"

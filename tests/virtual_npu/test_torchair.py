"""TorchAir on npu tensors (issue 33 item 4): an Ascend program's `import torch_npu`, `import torchair`,
`get_npu_backend()` / `backend="npu"` on the virtual NPU, TorchAir taking its NPU-device branches. Each check in a
child process (test_device.py). The oracle for numbers is the CPU-tensor path in a process without the virtual
NPU (the same GE graph on the same kernels must give the same bits), or eager on CPU tensors."""
from __future__ import annotations

from .test_device import _ok, _python, built_extension  # noqa: F401  (the module fixture builds the C++ part)

_MODEL = """
import torch
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.LayerNorm(32),
                            torch.nn.Linear(32, 4)).eval()
x = torch.randn(8, 16)
"""


def test_get_npu_backend_on_npu_tensors_gives_the_cpu_paths_bits(tmp_path):
    _ok(_MODEL + """
import op_plugin
with torch.no_grad():
    torch.save(torch.compile(model, backend="npugraph")(x), "cpu_path.pt")
""", tmp_path, active=False)
    out = _ok(_MODEL + """
import torch_npu, torchair
from torchair.configs.compiler_config import CompilerConfig
from op_plugin._simulator.hosting.native_stub import capture_graphs
model, x = model.npu(), x.npu()
with torch.no_grad(), capture_graphs() as graphs:
    out = torch.compile(model, backend=torchair.get_npu_backend(compiler_config=CompilerConfig()))(x)
assert out.device == torch.device("npu", 0), out.device
assert torch.equal(out.cpu(), torch.load("cpu_path.pt")), "npu path differs from the CPU path"
print("executor", [g.attr["_executor_type"].i for g in graphs])
""", tmp_path)
    assert "executor [1]" in out  # TorchAir's NPU executor type: it took its torch_npu branches


def test_import_torchair_and_backend_npu_as_on_an_ascend_host(tmp_path):
    out = _ok(_MODEL + """
import sys
import torchair                                   # no op_plugin call, no torch_npu import first
assert "torch_npu" in sys.modules                 # TorchAir's __init__ brings torch_npu in, as on an NPU host
from torchair.configs.compiler_config import CompilerConfig  # noqa: F401
model, x = model.npu(1), x.npu(1)
with torch.no_grad():
    out = torch.compile(model, backend="npu")(x)
    eager = model(x)
assert out.device == torch.device("npu", 1), out.device
print("max", (out.cpu() - eager.cpu()).abs().max().item())
print("same module", torchair is __import__("op_plugin").load_torchair())
""", tmp_path)
    assert float(out.split("max ")[1].split()[0]) < 1e-5 and "same module True" in out


def test_training_step_through_get_npu_backend(tmp_path):
    _ok("""
import torch, torch_npu, torchair
torch.manual_seed(0)
def make():
    torch.manual_seed(1)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1)).npu()
compiled, reference = make(), make()
step = torch.compile(compiled, backend=torchair.get_npu_backend())
x = torch.randn(8, 16).npu()
step(x).sum().backward()
reference(x).sum().backward()
for a, b in zip(compiled.parameters(), reference.parameters()):
    assert a.grad.device.type == "npu"
    torch.testing.assert_close(a.grad.cpu(), b.grad.cpu(), rtol=1e-5, atol=1e-6)
""", tmp_path)


def test_torchairs_npu_settings_are_torch_npus(tmp_path):
    out = _ok("""
import torch, torch_npu
assert torch.npu.matmul.allow_hf32 is False and torch.npu.conv.allow_hf32 is True   # torch_npu's defaults
assert torch.npu._get_deterministic_level() == 0
torch.use_deterministic_algorithms(True)
assert torch.npu._get_deterministic_level() == 1   # reconciled with torch's flag, as torch_npu does
torch.use_deterministic_algorithms(False)
torch.npu.set_deterministic_level(2)
assert torch.are_deterministic_algorithms_enabled() and torch.npu._get_deterministic_level() == 2
x = torch.ones(2, 3).npu()
print(torch_npu.get_npu_format(x), torch_npu.get_storage_size(x[:, 1:]))
try:
    torch.npu.set_deterministic_level(5)
except ValueError as error:
    print("refused", "set_deterministic_level" in str(error))
""", tmp_path)
    assert out.split() == ["2", "6", "refused", "True"]  # ACL_FORMAT_ND; the view's storage holds 6 elements


def test_graph_inputs_on_two_devices_are_refused_naming_the_graph(tmp_path):
    result = _python("""
import torch, op_plugin
from op_plugin._simulator.device.graph_io import host_inputs
host_inputs([torch.ones(2).npu(0), torch.ones(2).npu(1)], "graph_7")
""", tmp_path)
    assert result.returncode != 0 and "GE graph 'graph_7'" in result.stderr and "npu:0 and npu:1" in result.stderr


def test_without_the_virtual_npu_the_cpu_path_is_unchanged(tmp_path):
    result = _python("import torch, op_plugin\nimport torchair", tmp_path, active=False)
    assert result.returncode != 0 and "No module named 'torchair'" in result.stderr, result.stderr[-2000:]


_CACHED = """
import sys
import torch, torch_npu, torchair
from torch._dynamo.utils import counters

class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(8, 8)
        self.cached = torchair.inference.cache_compile(self._forward, cache_dir=sys.argv[1])

    def _forward(self, x):
        return torch.nn.functional.gelu(self.linear(x))

    def forward(self, x):
        return self.cached(x)

torch.manual_seed(0)
model, x = Model().npu(1), torch.randn(4, 8).npu(1)
with torch.no_grad():
    out = model(x)
    assert out.device == torch.device("npu", 1), out.device
    torch.testing.assert_close(out.cpu(), model._forward(x).cpu(), rtol=1e-6, atol=1e-6)
print("graphs traced", counters["stats"]["unique_graphs"])
"""


def test_cache_compile_on_npu_tensors_is_reused_by_a_second_process(tmp_path):
    (tmp_path / "cached.py").write_text(_CACHED)
    cache = tmp_path / "cache"
    runs = [_ok(f"import runpy, sys; sys.argv = ['cached.py', {str(cache)!r}]; runpy.run_path('cached.py')", tmp_path)
            for _ in range(2)]
    assert "graphs traced 1" in runs[0] and any(cache.iterdir()), runs[0]  # the first traced, wrote the cache
    assert "graphs traced 0" in runs[1], runs[1]                            # the second ran from it, no trace


def test_aclgraph_modes_capture_into_the_virtual_npugraph(tmp_path):
    """reduce-overhead / npugraph_ex (TorchAir's CompilerConfig.mode, and dynamo's backend "npugraph_ex"): TorchAir's
    own capture runs the eager kernels into torch.npu.NPUGraph and replays them; each call equals eager bit for bit
    (the same kernels), and new input shapes capture again."""
    out = _ok("""
import torch, torch_npu, torchair
import op_plugin._simulator.device.graphs as graphs
replays = []
replay = graphs.NPUGraph.replay
graphs.NPUGraph.replay = lambda self: (replays.append(self), replay(self))[1]

def model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.LayerNorm(16),
                               torch.nn.Linear(16, 4)).npu()

backends = {}
for mode in ("reduce-overhead", "npugraph_ex"):
    config = torchair.CompilerConfig()
    config.mode = mode
    backends[mode] = torchair.get_npu_backend(compiler_config=config)
backends["dynamo npugraph_ex"] = "npugraph_ex"
for name, backend in backends.items():
    torch._dynamo.reset()
    m, replays[:] = model(), []
    compiled = torch.compile(m, backend=backend)
    with torch.no_grad():
        for batch in (4, 4, 4, 6):
            x = torch.randn(batch, 8).npu()
            y = compiled(x)
            assert y.device == torch.device("npu", 0) and torch.equal(y.cpu(), m(x).cpu()), (name, batch)
    print(name, "replays", len(replays), "graphs", len({id(g) for g in replays}))
""", tmp_path)
    for name in ("reduce-overhead", "npugraph_ex", "dynamo npugraph_ex"):
        line = next(row for row in out.splitlines() if row.startswith(name + " "))
        replays, graphs = int(line.split()[-3]), int(line.split()[-1])
        assert replays == 4 and graphs == 2, line   # every call replays; batch 6 captured a second graph


def test_import_torchair_in_a_spawned_process(tmp_path):
    """A process started by multiprocessing's spawn inherits sys.path with the wheel's TorchAir folder on it; its
    `import torchair` must still give the simulator's TorchAir (TorchAir's multi-rank smoke tests spawn ranks)."""
    (tmp_path / "spawned.py").write_text('''
import torch, torch_npu, torchair
import torch.multiprocessing as mp

def child(rank):
    import torchair, op_plugin
    assert torchair is op_plugin.load_torchair()
    out = torch.compile(lambda t: t * 2, backend=torchair.get_npu_backend())(torch.ones(3).npu())
    print("child", out.device, out.cpu().tolist(), flush=True)

if __name__ == "__main__":
    mp.spawn(child, nprocs=1)
''')
    out = _ok("import runpy; runpy.run_path('spawned.py', run_name='__main__')", tmp_path)
    assert "child npu:0 [2.0, 2.0, 2.0]" in out, out


def test_experimental_npu_fx_pass_fuses_rms_norm_on_npu_tensors(tmp_path):
    """TorchAir's joint-graph passes (experimental_config.npu_fx_pass) trace their patterns on npu tensors and
    need torch_npu: on the virtual NPU they rewrite a decomposed RMS norm to npu_rms_norm as on an Ascend host
    (on CPU tensors they skip themselves: docs/npu-faithful-lowering.md). Oracle: eager on the same module."""
    out = _ok("""
import torch, torch_npu, torchair
from torch._dynamo.utils import counters
class RMS(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.rand(64) + 0.5)
    def forward(self, h):
        dtype = h.dtype
        h = h.to(torch.float32)
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6)
        return self.weight * h.to(dtype)
torch.manual_seed(0)
model, x = RMS().npu(), torch.randn(4, 64, device="npu", requires_grad=True)
config = torchair.CompilerConfig()
config.experimental_config.npu_fx_pass = True
out = torch.compile(model, backend=torchair.get_npu_backend(compiler_config=config))(x)
out.sum().backward()
grad, x.grad = x.grad.clone(), None
eager = model(x)
eager.sum().backward()
torch.testing.assert_close(out.cpu(), eager.cpu(), rtol=1e-5, atol=1e-5)
torch.testing.assert_close(grad.cpu(), x.grad.cpu(), rtol=1e-4, atol=1e-5)
print("fused", counters["inductor"]["npu_rms_norm"])
""", tmp_path)
    assert "fused 2" in out

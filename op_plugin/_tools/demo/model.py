"""`op-plugin demo`: a small decoder-style block built from the shipped ops, run eagerly, through
its Meta functions, and compiled with backend="npugraph"; prints the FX and GE graphs and checks
the compiled numbers against eager."""
from __future__ import annotations

import torch
from torch import nn

from ..._backend import load_torchair_for_host, npugraph_backend
from ..inspect.inspect import inspect

npu = torch.ops.npu


class DemoBlock(nn.Module):
    """RMSNorm -> QKV projection -> rotary -> causal softmax attention -> add-RMSNorm -> SwiGLU MLP."""

    def __init__(self, hidden: int = 32, heads: int = 2, inter: int = 48):
        super().__init__()
        self.heads, self.head_dim = heads, hidden // heads
        self.norm = nn.Parameter(torch.ones(hidden))
        self.qkv = nn.Parameter(torch.randn(3 * hidden, hidden) / hidden ** 0.5)
        self.out = nn.Parameter(torch.randn(hidden, hidden) / hidden ** 0.5)
        self.norm2 = nn.Parameter(torch.ones(hidden))
        self.gate = nn.Parameter(torch.randn(hidden, inter) / hidden ** 0.5)
        self.up = nn.Parameter(torch.randn(hidden, inter) / hidden ** 0.5)
        self.down = nn.Parameter(torch.randn(hidden, inter) / inter ** 0.5)

    def forward(self, x, cos, sin):
        b, s, h = x.shape
        normed, _ = npu.npu_custom_rms_norm(x, self.norm, 1e-6)
        q, k, v = npu.npu_custom_linear(normed, self.qkv).split(h, dim=-1)
        q, k, v = (t.reshape(b, s, self.heads, self.head_dim) for t in (q, k, v))
        q, k = npu.npu_custom_rotary_mul(q, cos, sin), npu.npu_custom_rotary_mul(k, cos, sin)
        scores = q.transpose(1, 2) @ k.transpose(1, 2).transpose(-1, -2)
        probs = npu.npu_custom_scaled_softmax(scores, self.head_dim ** -0.5, [-1], True)
        attn = (probs @ v.transpose(1, 2)).transpose(1, 2).reshape(b, s, h)
        y, _, residual = npu.npu_custom_add_rms_norm(x, npu.npu_custom_linear(attn, self.out), self.norm2, 1e-6)
        return residual + npu.npu_custom_linear(npu.npu_swiglu_mlp(y, self.gate, self.up), self.down)


def rotary_tables(seq: int, head_dim: int) -> tuple[torch.Tensor, torch.Tensor]:
    inv_freq = 1.0 / (10000 ** (torch.arange(0, head_dim, 2).float() / head_dim))
    angles = torch.outer(torch.arange(seq).float(), inv_freq)
    angles = torch.cat((angles, angles), dim=-1)[None, :, None, :]
    return angles.cos(), angles.sin()


def example_inputs(batch: int = 2, seq: int = 8, hidden: int = 32, heads: int = 2):
    cos, sin = rotary_tables(seq, hidden // heads)
    return torch.randn(batch, seq, hidden), cos, sin


def run_demo() -> int:
    torch.manual_seed(0)
    model = DemoBlock().eval()
    inputs = example_inputs()
    print("== eager (reference kernels) ==")
    with torch.no_grad():
        eager = model(*inputs)
    print(f"output {tuple(eager.shape)} {eager.dtype}, mean {eager.mean():.6f}")

    print("\n== Meta functions (FakeTensorMode, no data) ==")
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode(allow_non_fake_inputs=True) as mode, torch.no_grad():
        fake = model(*(mode.from_tensor(t) for t in inputs))
    print(f"output {tuple(fake.shape)} {fake.dtype}")

    print("\n== torch.compile(backend='npugraph', dynamic=True, fullgraph=True) ==")
    _, simulated = load_torchair_for_host()
    print("host:", "CPU, GE graph executed by the op_plugin simulator" if simulated else "Ascend NPU")
    report = inspect(model, *inputs, dynamic=True)
    compiles = []

    def counting_npugraph(gm, example_inputs):
        compiles.append(gm)
        return npugraph_backend()(gm, example_inputs)

    compiled = torch.compile(model, backend=counting_npugraph, dynamic=True, fullgraph=True)
    worst = 0.0
    for batch, seq in ((2, 8), (3, 5), (4, 11)):
        args = example_inputs(batch, seq)
        with torch.no_grad():
            got, want = compiled(*args), model(*args)
        error = (got - want).abs().max().item()
        worst = max(worst, error)
        print(f"batch {batch} seq {seq:2d}: max |npugraph - eager| = {error:.2e}")
    print(f"compiles: {len(compiles)} (one graph serves all three shapes)")
    print("\nFX graph (dynamo):")
    print(report.fx_graph.code.strip())
    print("\nGE graph (TorchAir lowering; custom and fused ops come from the YAML ge: mappings):")
    print(report.ge_text())
    tolerance = 1e-4
    ok = len(compiles) == 1 and worst <= tolerance
    print(f"\n{'OK' if ok else 'FAILED'}: npugraph matches eager (max error {worst:.2e}, tolerance {tolerance})")
    return 0 if ok else 1

"""Zoo graph (iii) of issue 23: a W8A8 linear stack as vllm-ascend's W8A8_DYNAMIC linear method runs it
(vllm_ascend/quantization/methods/w8a8_dynamic.py, AscendW8A8DynamicLinearMethod.apply): per layer
`npu_dynamic_quant(x)` (per-token int8 and its float32 scale), then `npu_quant_matmul(x_q, weight, weight_scale,
pertoken_scale=scale, bias=bias, output_dtype=x.dtype)` with the int8 weight stored (n, k) and transposed to
(k, n) after loading, its per-channel scale flattened to (n,): bfloat16 scales for a bfloat16 model, float32
ones (what CANN takes with a per-token scale) for float16. Compiled with backend="npugraph" in GE mode (static,
and dynamic=True over token counts with one compile) and in aclgraph mode, it must match eager and an
independent integer reference in plain torch (per-token absmax quantisation, an int32 product of the int8
tensors, then the scales), computed on CPU tensors, bit for bit.

With --zoo-device npu the stack and the tokens live on the virtual NPU (eager on its kernels, the graphs on npu
tensors, the aclgraph mode captured into torch.npu.NPUGraph and replayed)."""
import copy

import pytest
import torch
import torch._dynamo.testing

import op_plugin
from op_plugin._simulator import load_torchair
from op_plugin._simulator.hosting.native_stub import capture_graphs

npu = torch.ops.npu
SIZES = (32, 48, 40, 24)   # hidden sizes through the stack
GE_TYPES = {"DynamicQuant", "QuantBatchMatmulV3"}


@pytest.fixture(scope="module", autouse=True)
def torch_npu_ops():
    load_torchair()  # defines torch_npu's ops on this CPU host


class W8A8Linear(torch.nn.Module):
    """One W8A8_DYNAMIC linear after vllm-ascend's process_weights_after_loading."""

    def __init__(self, k, n, dtype, generator):
        super().__init__()
        weight = torch.randint(-128, 128, (n, k), dtype=torch.int8, generator=generator)  # checkpoint layout
        self.register_buffer("weight", weight.transpose(0, 1).contiguous())                # (k, n)
        scale_dtype = torch.bfloat16 if dtype == torch.bfloat16 else torch.float32
        scale = torch.rand(n, 1, generator=generator) * 2e-3 + 1e-4
        self.register_buffer("weight_scale", scale.to(scale_dtype).flatten())
        self.register_buffer("bias", (torch.randn(n, generator=generator) * 0.1).to(dtype))
        self.dtype = dtype

    def forward(self, x):
        quantized_x, pertoken_scale = npu.npu_dynamic_quant(x)
        return npu.npu_quant_matmul(quantized_x, self.weight, self.weight_scale, pertoken_scale=pertoken_scale,
                                    bias=self.bias, output_dtype=self.dtype)


class W8A8Stack(torch.nn.Module):
    def __init__(self, dtype):
        super().__init__()
        generator = torch.Generator().manual_seed(0)
        shapes = zip(SIZES[:-1], SIZES[1:], strict=True)
        self.layers = torch.nn.ModuleList(W8A8Linear(k, n, dtype, generator) for k, n in shapes)

    def forward(self, x):
        for i, layer in enumerate(self.layers):
            x = layer(x)
            if i < len(self.layers) - 1:
                x = torch.nn.functional.silu(x)
        return x


def integer_reference(stack, x):
    """The same stack from the formulas, in plain torch: q = rint(x * (127 / rowmax|x|)) clamped to int8, its
    scale 1 / (127 / rowmax|x|) (ops-nn dynamic_quant.h); acc = sum_k q[m, k] * w[k, n] in int32;
    y = acc * weight_scale * scale + bias."""
    for i, layer in enumerate(stack.layers):
        wide = x.float()
        absmax = wide.abs().max(dim=-1, keepdim=True).values
        factor = torch.full_like(absmax, 127.0) / absmax   # IEEE division (torch's `127.0 / t` is 127 * (1 / t))
        q = torch.clamp(torch.round(wide * factor), -128, 127).to(torch.int8)
        acc = (q.to(torch.int32).unsqueeze(-1) * layer.weight.to(torch.int32)).sum(dim=-2, dtype=torch.int32)
        pertoken = torch.reciprocal(factor)   # the scale DynamicQuant writes: 1 / (127 / max)
        y = acc.float() * layer.weight_scale.float() * pertoken + layer.bias.float()
        x = y.to(layer.dtype)
        if i < len(stack.layers) - 1:
            x = torch.nn.functional.silu(x)
    return x


def _tokens(n, dtype, device="cpu"):
    return torch.randn(n, SIZES[0], generator=torch.Generator().manual_seed(n)).to(dtype).to(device)


def _reference(stack, x):
    """integer_reference on CPU copies of the stack and the tokens."""
    return integer_reference(copy.deepcopy(stack).cpu(), x.cpu())


def _close(got, want, dtype, device="cpu"):
    """Bitwise: the integer accumulation is exact and every later step is the same float32 operation. `got` is
    on `device`; the comparison is on CPU."""
    assert got.dtype == want.dtype == dtype
    assert got.device.type == device, got.device
    torch.testing.assert_close(got.cpu(), want.cpu(), rtol=0, atol=0)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_eager_stack_matches_the_integer_reference(dtype, zoo_device):
    stack = W8A8Stack(dtype).to(zoo_device)
    x = _tokens(7, dtype, zoo_device)
    _close(stack(x), _reference(stack, x), dtype, zoo_device)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("dynamic", [False, True])
def test_ge_mode(dtype, dynamic, zoo_device):
    stack = W8A8Stack(dtype).to(zoo_device)
    torch._dynamo.reset()
    counter = torch._dynamo.testing.CompileCounterWithBackend("npugraph")
    compiled = torch.compile(stack, backend=counter, dynamic=dynamic, fullgraph=True)
    sizes = (6, 9, 13) if dynamic else (6,)
    with torch.no_grad():
        for n in sizes:
            x = _tokens(n, dtype, zoo_device)
            with capture_graphs() as graphs:
                got = compiled(x)
            _close(got, stack(x), dtype, zoo_device)
            _close(got, _reference(stack, x), dtype, zoo_device)
            if n == sizes[0]:
                types = {op.type for graph in graphs for op in graph.op}
                assert GE_TYPES <= types, sorted(types)
    assert counter.frame_count == 1, f"{counter.frame_count} compiles for token counts {sizes}"


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_aclgraph_mode(dtype, zoo_device, aclgraph_calls):
    """On cpu tensors the AOT graph runs on the reference kernels (with a warning); on npu tensors each token
    count is captured into torch.npu.NPUGraph and replayed."""
    stack = W8A8Stack(dtype).to(zoo_device)
    torch._dynamo.reset()
    counter = torch._dynamo.testing.CompileCounterWithBackend(op_plugin.npugraph_backend(mode="aclgraph"))
    compiled = torch.compile(stack, backend=counter, dynamic=True)
    with torch.no_grad(), aclgraph_calls() as replays:
        for n in (6, 9):
            x = _tokens(n, dtype, zoo_device)
            got = compiled(x)
            _close(got, stack(x), dtype, zoo_device)
            _close(got, _reference(stack, x), dtype, zoo_device)
    if replays is not None:  # npu: one replay per call, of the graph captured for its token count
        assert (len(replays), len({id(graph) for graph in replays})) == (2, 2)
    assert counter.frame_count == 1

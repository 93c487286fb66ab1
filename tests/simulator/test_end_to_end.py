"""Small aten-only models through TorchAir's GE backend and the simulator: numbers equal eager.

Tolerances: the project's rule (op_plugin._testing_harness's "eager" row): float32 atol=1e-5,
rtol=1.3e-6 (torch.testing's float32 defaults); float16 atol=1e-3, rtol=1e-3 (the simulator
computes matmul/norm/softmax in float32 and rounds once, like the NPU; eager CPU rounds at other points).
"""

import pytest
import torch

from op_plugin._simulator import capture_graphs
from op_plugin._testing_harness import Npugraph, assert_close, data_dims


class Mlp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = torch.nn.Linear(8, 16), torch.nn.Linear(16, 4)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


class Softmax(torch.nn.Module):
    def forward(self, x):
        return torch.softmax(x * 2.0, dim=-1)


class LayerNormGelu(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = torch.nn.LayerNorm(8)
        self.act = torch.nn.GELU(approximate="tanh")

    def forward(self, x):
        return self.act(self.norm(x))


class Residual(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 8)

    def forward(self, x):
        return x + self.fc(x)


MODELS = {
    "mlp": (Mlp, {"MatMulV2", "Relu", "Transpose"}),  # fp32 adds the bias with Add, fp16 inside MatMulV2
    "softmax": (Softmax, {"SoftmaxV2"}),  # x * 2.0 is Mul in fp32, Muls + Cast in fp16
    "layernorm_gelu": (LayerNormGelu, {"LayerNormV4", "Gelu"}),
    "residual": (Residual, {"MatMulV2", "Add"}),
}


def _compile(torchair, model, dynamic):
    from torchair.configs.compiler_config import CompilerConfig

    torch._dynamo.reset()
    backend = torchair.get_npu_backend(compiler_config=CompilerConfig())
    return torch.compile(model, backend=backend, dynamic=dynamic)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=["fp32", "fp16"])
@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
@pytest.mark.parametrize("name", sorted(MODELS))
def test_model_matches_eager(torchair, name, dynamic, dtype):
    factory, expected_ops = MODELS[name]
    torch.manual_seed(0)
    model = factory().to(dtype).eval()
    compiled = _compile(torchair, model, dynamic)
    with torch.no_grad():
        x = torch.randn(4, 8, dtype=dtype)
        with capture_graphs() as graphs:
            got = compiled(x)
        assert_close(got, model(x))
        assert len(graphs) == 1
        op_types = [op.type for op in graphs[0].op]
        assert expected_ops <= set(op_types), op_types
        assert op_types.count("NetOutput") == 1 and "Data" in op_types

        # A second batch size: a dynamic graph runs again without a new GE graph; a static one recompiles.
        x2 = torch.randn(7, 8, dtype=dtype)
        with capture_graphs() as graphs2:
            got2 = compiled(x2)
        assert_close(got2, model(x2))
        assert len(graphs2) == (0 if dynamic else 1)
        if dynamic:
            dims = data_dims(graphs[0])
            assert any(-1 in d for d in dims), dims


def test_training_forward_with_saved_activations(torchair):
    """With grad enabled AOT returns activations too (LayerNormV4 mean/rstd are graph outputs)."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.LayerNorm(16), torch.nn.GELU(approximate="tanh"))
    compiled = _compile(torchair, model, dynamic=False)
    x = torch.randn(3, 8, requires_grad=True)
    with capture_graphs() as graphs:
        got = compiled(x)
    assert_close(got, model(x))
    net_output = [op for op in graphs[0].op if op.type == "NetOutput"][0]
    assert len(net_output.input) > 1


@pytest.mark.parametrize("keep_torchair", [False, True], ids=["corrected", "torchair_gelu"])
def test_gelu_none_is_eager_exact_by_default_and_tanh_with_torchairs_lowering(keep_torchair):
    """TorchAir lowers gelu(approximate='none') to GE Gelu, which CANN computes with tanh; torch_npu's
    eager gelu is the exact erf form. npugraph lowers to GeluV2(approximate='none') (eager's numbers);
    the torchair_gelu option keeps TorchAir's Gelu, and the simulator then reproduces the NPU's tanh."""
    compiled = Npugraph(torch.nn.GELU(approximate="none"), fullgraph=False, options={"torchair_gelu": keep_torchair})
    x = torch.linspace(-3, 3, 101)
    with capture_graphs() as graphs:
        got = compiled(x)
    types = [op.type for op in graphs[0].op if op.type not in ("Data", "NetOutput", "Const")]
    erf_gelu = torch.nn.functional.gelu(x)
    if keep_torchair:
        assert types == ["Gelu"]
        assert_close(got, torch.nn.functional.gelu(x, approximate="tanh"))
        assert 1e-5 < (got - erf_gelu).abs().max() < 1e-3
    else:
        assert types == ["GeluV2"]
        assert_close(got, erf_gelu)

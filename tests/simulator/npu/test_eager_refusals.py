"""torch_npu ops the CPU simulator defines without an eager kernel (issue 37): an eager call is refused by
name, saying whether graph mode can run the op instead, not with torch's bare "Could not run ... CPU backend".
The Meta functions stay (graph tracing needs them)."""
import pytest
import torch

from op_plugin._simulator.npu import eager_refusals, ops as npu_ops

pytestmark = pytest.mark.usefixtures("torchair")


def test_a_schema_only_op_called_eagerly_names_itself_and_why_graph_mode_cannot_help():
    assert "npu_sort_v2" in npu_ops.schema_only_ops()
    with pytest.raises(NotImplementedError) as caught:
        torch.ops.npu.npu_sort_v2(torch.randn(3, 4))
    message = str(caught.value)
    assert message.startswith("npu::npu_sort_v2: the CPU simulator has no eager kernel for this torch_npu op")
    assert "no Python Meta function" in message and "docs/torch-npu-ops.md" in message
    assert "Could not run" not in message
    with torch._subclasses.FakeTensorMode(), pytest.raises(Exception, match="npu_sort_v2"):  # Meta as before
        torch.ops.npu.npu_sort_v2(torch.empty(2, 2))


def test_an_op_graph_mode_runs_points_to_npugraph_and_npugraph_computes_it():
    """npu_fast_gelu: the wheel's Meta, TorchAir's converter to FastGelu, the simulator's FastGelu kernel. The
    compiled result against CANN's FastGelu formula in float64: x / (1 + exp(-1.702|x|)) * exp(0.851(x - |x|))."""
    x = torch.randn(4, 8)
    with pytest.raises(NotImplementedError, match=r"npu::npu_fast_gelu: .*Graph mode can run it: TorchAir's "
                                                  r"converter \(\w+\.py\) builds FastGelu.*backend=\"npugraph\""):
        torch.ops.npu.npu_fast_gelu(x)
    compiled = torch.compile(lambda t: torch.ops.npu.npu_fast_gelu(t), backend="npugraph")(x)
    d = x.double()
    want = d / (1 + torch.exp(-1.702 * d.abs())) * torch.exp(0.851 * (d - d.abs()))
    torch.testing.assert_close(compiled.double(), want, rtol=1e-6, atol=1e-6)


def test_an_op_whose_ge_type_has_no_kernel_names_the_type():
    note = eager_refusals.graph_mode_note("npu_gelu_quant", traced=True)
    assert "TorchAir's converter (npu_gelu_quant.py) builds GeluQuant" in note
    assert "no GE kernel for GeluQuant" in note


def test_every_op_without_an_eager_kernel_has_the_refusing_cpu_kernel():
    entries = npu_ops.npu_ops_wheel.all_schema_entries(npu_ops.install.simulator_dir() / "torch_npu")
    without = [name for name in entries if name not in npu_ops.CPU_KERNELS and name not in npu_ops.undefined_ops()]
    assert len(without) > 300
    for name in without:
        op = npu_ops.overload_of(name)
        assert torch._C._dispatch_has_kernel_for_dispatch_key(op.name(), "CPU"), name
        note = eager_refusals.graph_mode_note(name, traced=name not in npu_ops.schema_only_ops())
        assert note.startswith(("Graph mode cannot run it either: ", "Graph mode can run it: ", "In graph mode ")), note

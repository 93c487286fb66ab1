"""TorchAir's FX pattern passes take their Ascend-host branches on a CPU host (hosting/graph_passes.py): the
npu_add_rms_norm + cast fusion fires in GE mode as on an NPU, and the CANN-version-gated pass runs; nothing puts
a torch_npu into the real sys.modules."""
import sys

import pytest
import torch

import op_plugin
from op_plugin import _simulator


def _norm_then_cast(x1, x2, gamma):
    y, _, x_out = torch.ops.npu.npu_add_rms_norm(x1, x2, gamma)
    h = y.size(-1)
    return y, x_out, y.view(-1, h).to(torch.float32)


@pytest.mark.parametrize("dynamic", [False, True])
def test_add_rms_norm_then_cast_lowers_to_the_fused_op_as_on_an_ascend_host(dynamic):
    op_plugin.load_torchair()
    args = [torch.randn(4, 8, dtype=torch.float16), torch.randn(4, 8, dtype=torch.float16),
            torch.randn(8, dtype=torch.float16)]
    torch._dynamo.reset()
    with _simulator.capture_graphs() as graphs:
        got = torch.compile(_norm_then_cast, backend=op_plugin.npugraph_backend(compile_cache=False),
                            dynamic=dynamic)(*args)
    types = {op.type for graph in graphs for op in graph.op}
    assert "AddRmsNormCast" in types and "AddRmsNorm" not in types, types
    for a, b in zip(got, _norm_then_cast(*args), strict=True):  # the fused op's float32(y) is eager's cast of y
        assert torch.equal(a, b)
    assert "torch_npu" not in sys.modules


def test_the_cann_version_gated_pass_sees_the_simulated_cann():
    op_plugin.load_torchair()
    from torchair.patterns import _recover_view_inplace_pattern as recover

    from op_plugin._simulator.hosting.converter_torch_npu import converter_call

    with converter_call():
        assert recover._is_supported_cann_version("8.3.RC1")
    assert "torch_npu" not in sys.modules

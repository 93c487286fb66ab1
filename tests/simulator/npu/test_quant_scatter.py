"""torch_npu's npu_quant_scatter of npu/quant_scatter.py (an adapter over QuantUpdateScatter): eager and a
single-op npugraph run one GE kernel, so they agree bit for bit. The oracle comparison (a loop) is in
tests/simulator/test_npu_ops_scatter_more.py."""
import pytest
import torch

from op_plugin._testing_harness import check_compiled

F16, BF16, F32, I8 = torch.float16, torch.bfloat16, torch.float32, torch.int8
npu = torch.ops.npu
pytestmark = pytest.mark.usefixtures("torchair")


def _bit_for_bit(fn, args, ge_type):
    """eager == a single-op npugraph bit for bit: both run the GE kernel of `ge_type`, as on an NPU."""
    run = check_compiled(fn, args, ge_type, kind="npu_ops")
    got, want = torch.utils._pytree.tree_leaves(run.got), torch.utils._pytree.tree_leaves(run.want)
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype and g.shape == w.shape
        assert torch.equal(_bits(g), _bits(w))


def _bits(t):
    """A tensor's bit patterns (floats as same-size ints: -0.0 and NaN payloads count)."""
    if t.is_floating_point():
        return t.view({1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()])
    return t


def test_quant_scatter_eager_is_the_graph_bit_for_bit():
    var = torch.randint(-5, 5, (2, 6, 8), dtype=I8)
    updates, indices = torch.randn(2, 2, 8).to(BF16) * 10, torch.tensor([1, 3])
    scales = (torch.rand(8) + 0.5).to(BF16)
    _bit_for_bit(lambda v, i, u, s: npu.npu_quant_scatter(v, i, u, s, axis=-2, quant_axis=-1),
                 (var, indices, updates, scales), "QuantUpdateScatter")

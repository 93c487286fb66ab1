"""torch_npu's fp8 / int4 quantisers of npu/quant_lowbit.py (adapters over QuantMax, GroupedQuantMax,
RotateQuant, FlatQuant): eager and a single-op npugraph run one GE kernel, so they agree bit for bit. The oracle
comparisons (loops over CANN's formulas, tests/simulator/_lowbit_oracles.py) are in
tests/simulator/test_npu_ops_fp8_int4.py."""
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


@pytest.mark.parametrize("number", (291, 292))
def test_quant_max_eager_is_the_graph_bit_for_bit(number):
    x = torch.randn(4, 16) * 100
    _bit_for_bit(lambda x, s: npu.npu_quant_max(x, s, dst_dtype=number), (x, torch.tensor([3.0])), "QuantMax")


@pytest.mark.parametrize("dst", (torch.int8, torch.quint4x2))
def test_rotate_quant_eager_is_the_graph_bit_for_bit(dst):
    x, rotation = torch.randn(4, 32).half(), torch.randn(16, 16).half()
    _bit_for_bit(lambda x, r: npu.npu_rotate_quant(x, r, dst_dtype=dst), (x, rotation), "RotateQuant")


def test_kronecker_quant_eager_is_the_graph_bit_for_bit():
    x, p1, p2 = torch.randn(2, 4, 16).half(), torch.randn(4, 4).half(), torch.randn(16, 16).half()
    _bit_for_bit(lambda a, p, q: npu.npu_kronecker_quant(a, p, q, 0.8), (x, p1, p2), "FlatQuant")

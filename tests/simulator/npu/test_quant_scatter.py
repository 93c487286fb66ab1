"""torch_npu's npu_quant_scatter and npu_quant_scatter_ of npu/quant_scatter.py (an adapter over
QuantUpdateScatter): eager and a single-op npugraph run one GE kernel, so they agree bit for bit; the kernel
against a loop written from CANN's golden (ops-nn index/quant_update_scatter: quantise in float32 as numpy does,
round half to even, saturate; write slice by slice), compiled against eager, and the refusals of what CANN leaves
undefined (negative or out-of-range indices, overlapping slices)."""
import numpy as np
import pytest
import torch

from op_plugin._simulator.npu import ops as npu_ops
from tests.simulator.npu.graph_equal import assert_eager_equals_graph as _bit_for_bit
from op_plugin._testing_harness import Npugraph, check_compiled, check_dynamic_sizes, run_node

F16, BF16, F32, I8 = torch.float16, torch.bfloat16, torch.float32, torch.int8
npu = torch.ops.npu
pytestmark = pytest.mark.usefixtures("torchair")


def test_quant_scatter_eager_is_the_graph_bit_for_bit():
    var = torch.randint(-5, 5, (2, 6, 8), dtype=I8)
    updates, indices = torch.randn(2, 2, 8).to(BF16) * 10, torch.tensor([1, 3])
    scales = (torch.rand(8) + 0.5).to(BF16)
    _bit_for_bit(lambda v, i, u, s: npu.npu_quant_scatter(v, i, u, s, axis=-2, quant_axis=-1),
                 (var, indices, updates, scales), "QuantUpdateScatter")


def _oracle(var, indices, updates, scales, zero_points, axis):
    """Element by element: q = updates / scale (+ zero point) in float32, rint and saturate to int8, or
    clamp to the fp8 format's largest (448 / 57344) before torch's round-to-nearest-even cast; then the slice
    of updates' row i lands at var[i or idx[i][0], ..., start + k, ...]."""
    out = var.clone().numpy() if var.dtype == torch.int8 else var.float().clone().numpy()
    u = updates.float().numpy()
    s = scales.float().reshape(-1).numpy()
    z = None if zero_points is None else zero_points.float().reshape(-1).numpy()
    axis %= var.dim()
    idx = indices.tolist()
    for pos in np.ndindex(*u.shape):
        value = np.float32(u[pos]) / np.float32(s[pos[-1]])
        if z is not None:
            value = np.float32(value + np.float32(z[pos[-1]]))
        if var.dtype == torch.int8:
            value = min(max(np.rint(value), -128), 127)
        else:
            largest = 448.0 if var.dtype == torch.float8_e4m3fn else 57344.0
            value = min(max(value, -largest), largest)
        row, start = (pos[0], idx[pos[0]]) if indices.dim() == 1 else idx[pos[0]]
        dest = list(pos)
        dest[0], dest[axis] = row, start + pos[axis]
        out[tuple(dest)] = value
    result = torch.from_numpy(out)
    return result if var.dtype == torch.int8 else result.to(var.dtype)


CASES = {  # var, indices, updates, scales, zero points, axis
    "rows_bf16": (torch.randint(-128, 128, (4, 16, 32), dtype=torch.int8),
                  torch.tensor([3, 0, 12, 7], dtype=torch.int32),
                  torch.randn(4, 2, 32).bfloat16() * 40, torch.rand(1, 1, 32).bfloat16() + 0.2,
                  torch.randn(1, 1, 32).bfloat16() * 3, -2),
    "pairs_fp16": (torch.zeros(5, 3, 8, 32, dtype=torch.int8), torch.tensor([[4, 1], [0, 6], [4, 5]]),
                   torch.randn(3, 3, 2, 32).half() * 300, torch.rand(32) + 0.5,
                   torch.randint(-9, 9, (32,), dtype=torch.int32), 2),
    "no_zero_point": (torch.ones(2, 6, 4, 32, dtype=torch.int8), torch.tensor([2, 0], dtype=torch.int32),
                      torch.randn(2, 3, 4, 32).half(), torch.full((32,), 0.01), None, 1),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_quant_scatter_eager_matches_the_loop(name):
    var, indices, updates, scales, zps, axis = CASES[name]
    want = _oracle(var, indices, updates, scales, zps, axis)
    got = npu.npu_quant_scatter(var, indices, updates, scales, zps, axis=axis, quant_axis=-1)
    assert got.dtype == torch.int8 and torch.equal(got, want)
    target = var.clone()
    assert npu.npu_quant_scatter_(target, indices, updates, scales, zps, axis=axis) is target
    assert torch.equal(target, want)


@pytest.mark.parametrize("name", sorted(CASES))
def test_quant_scatter_ge_kernel_matches_the_loop(name):
    var, indices, updates, scales, zps, axis = CASES[name]
    (got,) = run_node("QuantUpdateScatter", [var, indices, updates, scales, zps], [(torch.int8, list(var.shape))],
                      reduce="update", axis=axis, quant_axis=-1)
    assert torch.equal(got, _oracle(var, indices, updates, scales, zps, axis))


@pytest.mark.parametrize("name", sorted(CASES))
def test_quant_scatter_compiled(name):
    var, indices, updates, scales, zps, axis = CASES[name]
    check_compiled(lambda v, i, u, s: npu.npu_quant_scatter(v, i, u, s, zps, axis=axis) + 0,
                   (var, indices, updates, scales), "QuantUpdateScatter", kind="npu_ops")


def test_quant_scatter_in_place_compiled_writes_the_callers_tensor():
    var, indices, updates, scales, zps, axis = CASES["rows_bf16"]

    def step(v, i, u, s):
        npu.npu_quant_scatter_(v, i, u, s, zps, axis=axis)
        return v.float().sum(-1)

    eager_var, graph_var = var.clone(), var.clone()
    want = step(eager_var, indices, updates, scales)
    got = Npugraph(step)(graph_var, indices, updates, scales)
    torch.testing.assert_close(got, want)
    assert torch.equal(graph_var, eager_var)
    assert torch.equal(eager_var, _oracle(var, indices, updates, scales, zps, axis))
    assert "npu_quant_scatter_" in npu_ops.COVERED


def test_quant_scatter_float8_var():
    var = torch.zeros(2, 4, 32).to(torch.float8_e4m3fn)
    indices, updates = torch.tensor([1, 3], dtype=torch.int32), torch.randn(2, 1, 32).half() * 50
    scales = torch.rand(32) + 0.1
    updates[0, 0, 0] = 1000.0   # past float8_e4m3fn's largest: the kernel's SAT cast saturates
    got = npu.npu_quant_scatter(var, indices, updates, scales, dst_type=24)
    assert got.dtype == torch.float8_e4m3fn and float(got.float().abs().max()) == 448.0  # saturated, not NaN
    assert torch.equal(got.view(torch.uint8), _oracle(var, indices, updates, scales, None, -2).view(torch.uint8))


def test_quant_scatter_refusals():
    var, updates, scales = torch.zeros(2, 8, 32, dtype=torch.int8), torch.randn(2, 2, 32).half(), torch.ones(32)
    with pytest.raises(ValueError, match="npu_quant_scatter.*outside"):
        npu.npu_quant_scatter(var, torch.tensor([-1, 0], dtype=torch.int32), updates, scales)
    with pytest.raises(ValueError, match="outside"):
        npu.npu_quant_scatter(var, torch.tensor([0, 7], dtype=torch.int32), updates, scales)
    with pytest.raises(ValueError, match="overlap"):
        npu.npu_quant_scatter(var, torch.tensor([[1, 0], [1, 1]]), updates, scales)
    with pytest.raises(NotImplementedError, match="hifloat8"):
        npu.npu_quant_scatter(var, torch.tensor([0, 1], dtype=torch.int32), updates, scales, dst_type=290)
    with pytest.raises(ValueError, match="quant_axis"):
        npu.npu_quant_scatter(var, torch.tensor([0, 1], dtype=torch.int32), updates, scales, quant_axis=1)
    with pytest.raises(ValueError, match="rint"):
        npu.npu_quant_scatter(var, torch.tensor([0, 1], dtype=torch.int32), updates, scales, round_mode="round")
    with pytest.raises(Exception, match="outside") as error:
        run_node("QuantUpdateScatter", [var, torch.tensor([5, -2], dtype=torch.int32), updates, scales, None],
                 [(torch.int8, [2, 8, 32])], reduce="update", name="quant_write")
    assert "quant_write" in str(error.value)


def test_quant_scatter_compiled_dynamic_batch():
    def make(rows):
        return (torch.zeros(rows, 6, 32, dtype=torch.int8), torch.arange(rows, dtype=torch.int32) % 5,
                torch.randn(rows, 1, 32).half() * 20, torch.rand(32) + 0.3)

    runs = check_dynamic_sizes(lambda v, i, u, s: npu.npu_quant_scatter(v, i, u, s) + 0,
                               [make(2), make(3), make(5)], kind="npu_ops")
    assert "QuantUpdateScatter" in runs[0].ge_types

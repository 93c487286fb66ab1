"""npu_format_cast and npu_top_k_top_p (issue 23 item 4): TorchAir ships no converter for either.
npu_format_cast: eager is a copy with the same values, graph mode lowers through op_plugin's converter
(TensorMove); npu_top_k_top_p: the CPU kernel against CANN's formula written row by row, and graph mode
refused with an error naming the op."""
import math

import pytest
import torch

from op_plugin._testing_harness import Npugraph, check_compiled

npu = torch.ops.npu
pytestmark = pytest.mark.usefixtures("torchair")


@pytest.mark.parametrize("dtype", (torch.float32, torch.float16, torch.bfloat16))
@pytest.mark.parametrize("acl_format", [2, 29])
def test_format_cast_keeps_the_values(acl_format, dtype):
    x = torch.randn(4, 16).to(dtype)
    out = npu.npu_format_cast(x, acl_format)
    assert torch.equal(out, x) and out.data_ptr() != x.data_ptr()
    check_compiled(lambda t: npu.npu_format_cast(t, acl_format) * 2, (x,), "TensorMove", kind="npu_ops")


def test_format_cast_feeding_a_matmul_compiles():
    """The vllm-ascend habit: weights cast to NZ (29), then used by a matmul."""
    x, w = torch.randn(3, 16), torch.randn(8, 16)
    check_compiled(lambda a, b: npu.npu_linear(a, npu.npu_format_cast(b, 29)), (x, w), "MatMul", kind="npu_ops")


def test_format_cast_refuses_a_storage_dtype():
    with pytest.raises(NotImplementedError, match="customize_dtype"):
        npu.npu_format_cast(torch.randn(2, 2), 29, customize_dtype=1)


def _top_k_top_p_oracle(logits, p, k):
    """CANN's formula (ops-nn ApplyTopKTopPWithSorted), row by row in float64."""
    out = torch.empty(logits.shape, dtype=torch.float64)
    for b in range(logits.shape[0]):
        row = [float(v) for v in logits[b]]
        order = sorted(range(len(row)), key=lambda i: row[i])  # ascending, stable
        values = [row[i] for i in order]
        if k is not None:
            threshold = values[len(values) - int(k[b])]
            values = [-math.inf if v < threshold else v for v in values]
        if p is not None:
            top = max(values)
            weights = [math.exp(v - top) if v != -math.inf else 0.0 for v in values]
            total, running = sum(weights), 0.0
            kept = []
            for j, w in enumerate(weights):
                running += w / total
                drop = running <= 1 - float(p[b]) and j != len(values) - 1
                kept.append(-math.inf if drop else values[j])
            values = kept
        for position, index in enumerate(order):
            out[b, index] = values[position]
    return out


@pytest.mark.parametrize("which", ["both", "k_only", "p_only"])
def test_top_k_top_p(which):
    torch.manual_seed(3)
    logits = torch.randn(4, 32)
    p = torch.tensor([0.9, 0.5, 0.1, 1.0]) if which != "k_only" else None
    k = torch.tensor([5, 32, 1, 10], dtype=torch.int32) if which != "p_only" else None
    got = npu.npu_top_k_top_p(logits, p, k)
    want = _top_k_top_p_oracle(logits, p, k).float()
    assert torch.equal(torch.isinf(got), torch.isinf(want))
    torch.testing.assert_close(got[~torch.isinf(got)], want[~torch.isinf(want)])
    assert bool((~torch.isinf(got)).any(dim=1).all())  # every row keeps at least one value


def test_top_k_top_p_refusals():
    with pytest.raises(ValueError, match="both be None"):
        npu.npu_top_k_top_p(torch.randn(2, 4))
    with pytest.raises(ValueError, match=r"\[1, 4\]"):
        npu.npu_top_k_top_p(torch.randn(2, 4), None, torch.tensor([0, 2], dtype=torch.int32))


def test_top_k_top_p_in_graph_mode_is_refused_by_name():
    logits, k = torch.randn(2, 8), torch.tensor([2, 3], dtype=torch.int32)
    with pytest.raises(Exception, match="npu_top_k_top_p: GE mode cannot lower it"):
        Npugraph(lambda a, b: npu.npu_top_k_top_p(a, None, b))(logits, k)

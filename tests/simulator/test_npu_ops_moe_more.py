"""npu_moe_init_routing's row_idx (issue 23): any permutation of 0..N*K-1 gives CANN's documented outputs
(checked against the doc's formula written as a loop: a stable sort by expert, expanded_row_idx[src] = dst,
expanded_x[dst] = x[src % N]); anything else (TorchAir's declared case draws randn cast to int32:
repeats and negatives) is refused by name, because the formula then writes entries twice or outside
the output and leaves others unwritten."""
import pytest
import torch

from op_plugin._testing_harness import run_node

npu = torch.ops.npu
pytestmark = pytest.mark.usefixtures("torchair")


def _oracle(x, row_idx, expert_idx, active_num):
    n, k = expert_idx.shape
    pairs = sorted(range(n * k), key=lambda j: (int(expert_idx.reshape(-1)[j]), j))  # stable by expert
    sources = [int(row_idx.reshape(-1)[j]) for j in pairs]
    expanded_row_idx = [0] * (n * k)
    for dst, src in enumerate(sources):
        expanded_row_idx[src] = dst
    rows = [x[src % n] for src in sources[:min(n, active_num) * k]]
    return torch.stack(rows), torch.tensor(expanded_row_idx, dtype=torch.int32), \
        torch.tensor([int(expert_idx.reshape(-1)[j]) for j in pairs], dtype=torch.int32)


def test_any_permutation_row_idx_follows_the_formula():
    torch.manual_seed(3)
    x, expert_idx = torch.randn(5, 4), torch.randint(0, 4, (5, 2), dtype=torch.int32)
    row_idx = torch.randperm(10).to(torch.int32).reshape(5, 2)
    got = npu.npu_moe_init_routing(x, row_idx, expert_idx, 4)
    for g, w in zip(got, _oracle(x, row_idx, expert_idx, 4), strict=True):
        assert torch.equal(g, w)


def test_a_row_idx_that_is_no_permutation_is_refused():
    x, expert_idx = torch.randn(3, 4), torch.tensor([[1, 2], [0, 1], [0, 2]], dtype=torch.int32)
    row_idx = torch.tensor([[0, 0], [1, -1], [2, 5]], dtype=torch.int32)
    with pytest.raises(ValueError, match="npu_moe_init_routing: row_idx is not a permutation.*unwritten"):
        npu.npu_moe_init_routing(x, row_idx, expert_idx, 3)
    with pytest.raises(Exception, match="not a permutation") as error:
        run_node("MoeInitRouting", [x, row_idx, expert_idx], [(torch.float32, [6, 4]), (torch.int32, [6]),
                                                              (torch.int32, [6])], active_num=3, name="routing")
    assert "routing" in str(error.value)

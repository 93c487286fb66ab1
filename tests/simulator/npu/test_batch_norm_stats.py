"""The op of op_plugin/_simulator/npu/batch_norm_stats.py, batch_norm_gather_stats_update, and the
SyncBatchNormGatherStats GE kernel it runs: against torch.var_mean over the devices' concatenated data
(aclnnSyncBatchNormGatherStats.md) and hand values, and, bit for bit, against the graph TorchAir builds
(Cast + SyncBatchNormGatherStats).

Moved from tests/simulator/test_npu_ops_norm_more.py."""
import pytest
import torch

from op_plugin._testing_harness import check_compiled, run_node

from .graph_equal import assert_eager_equals_graph

npu = torch.ops.npu
pytestmark = pytest.mark.usefixtures("torchair")


def _device_data(devices, channels, dtype):
    return [torch.randn(2 + d, channels, 3, 3).to(dtype) * (1 + d) + d for d in range(devices)]


@pytest.mark.parametrize("dtype", (torch.float32, torch.float16))
def test_batch_norm_gather_stats_update_matches_var_mean_of_all_devices(dtype):
    torch.manual_seed(1)
    parts = _device_data(3, 5, dtype)
    sums = torch.stack([p.float().sum(dim=(0, 2, 3)) for p in parts]).to(dtype)
    squares = torch.stack([p.float().pow(2).sum(dim=(0, 2, 3)) for p in parts]).to(dtype)
    counts = torch.tensor([p.numel() // 5 for p in parts], dtype=torch.float32)
    everything = torch.cat([p.double().transpose(0, 1).reshape(5, -1) for p in parts], dim=1)
    var, mean = torch.var_mean(everything, dim=1, unbiased=False)
    running_mean, running_var = torch.rand(5).to(dtype), torch.rand(5).to(dtype) + 1
    start_mean, start_var = running_mean.double(), running_var.double()
    got_mean, got_invstd = npu.batch_norm_gather_stats_update(parts[0], sums, squares, running_mean, running_var,
                                                              0.1, 1e-5, counts)
    tol = dict(rtol=1e-5, atol=1e-5) if dtype == torch.float32 else dict(rtol=2e-2, atol=2e-2)
    torch.testing.assert_close(got_mean.double(), mean, **tol)
    torch.testing.assert_close(got_invstd.double(), 1 / torch.sqrt(var + 1e-5), **tol)
    # torch_npu's eager writes the running stats back (momentum towards the unbiased variance)
    torch.testing.assert_close(running_mean.double(), 0.9 * start_mean + 0.1 * mean, **tol)
    torch.testing.assert_close(running_var.double(), 0.9 * start_var + 0.1 * everything.var(dim=1), **tol)


def test_batch_norm_gather_stats_update_compiled():
    parts = _device_data(2, 4, torch.float32)
    sums = torch.stack([p.sum(dim=(0, 2, 3)) for p in parts])
    squares = torch.stack([p.pow(2).sum(dim=(0, 2, 3)) for p in parts])
    counts = torch.tensor([p.numel() // 4 for p in parts], dtype=torch.float32)
    check_compiled(lambda x, s, q, rm, rv, c: npu.batch_norm_gather_stats_update(x, s, q, rm, rv, 0.1, 1e-5, c),
                   (parts[0], sums, squares, torch.zeros(4), torch.ones(4), counts), "SyncBatchNormGatherStats",
                   kind="npu_ops")


def test_sync_batch_norm_gather_stats_ge_node_running_outputs():
    sums, squares = torch.tensor([[2.0, 4.0], [6.0, 0.0]]), torch.tensor([[4.0, 10.0], [20.0, 2.0]])
    counts = torch.tensor([2, 2], dtype=torch.int32)
    outs = run_node("SyncBatchNormGatherStats", [sums, squares, counts, torch.zeros(2), torch.ones(2)],
                    [(torch.float32, [2])] * 4, momentum=0.5, eps=0.0)
    # by hand: n = 4; mean = (2, 1); E[x^2] = (6, 3); var = (2, 2); unbiased 8/3
    torch.testing.assert_close(outs[0], torch.tensor([2.0, 1.0]))
    torch.testing.assert_close(outs[1], torch.tensor([2 ** -0.5, 2 ** -0.5]))
    torch.testing.assert_close(outs[2], torch.tensor([1.0, 0.5]))
    torch.testing.assert_close(outs[3], torch.tensor([0.5 + 4 / 3, 0.5 + 4 / 3]))


@pytest.mark.parametrize("dtype", (torch.float32, torch.float16))
def test_batch_norm_gather_stats_update_eager_is_the_graph(dtype):
    """Issue 32: eager composes the graph's GE kernels (Cast, SyncBatchNormGatherStats): the same bits."""
    parts = _device_data(2, 4, dtype)
    sums = torch.stack([p.float().sum(dim=(0, 2, 3)) for p in parts]).to(dtype)
    squares = torch.stack([p.float().pow(2).sum(dim=(0, 2, 3)) for p in parts]).to(dtype)
    counts = torch.tensor([p.numel() / 4 + 0.5 for p in parts], dtype=torch.float32)   # truncated to int32
    assert_eager_equals_graph(
        lambda x, s, q, rm, rv, c: npu.batch_norm_gather_stats_update(x, s, q, rm, rv, 0.1, 1e-5, c),
        (parts[0], sums, squares, torch.zeros(4, dtype=dtype), torch.ones(4, dtype=dtype), counts),
        "SyncBatchNormGatherStats")

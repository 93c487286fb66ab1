"""npu_moe_token_permute / npu_moe_token_unpermute (issue 23): eager against loops from torch_npu's docs
(permuted_tokens[sorted_indices[i]] = tokens[i // topK], tokens sorted by expert, stable; unpermute sums
probs * permuted rows back per token), and compiled through op_plugin's converters (TorchAir has none):
MoeInitRoutingV3 and MoeFinalizeRoutingV2, as the aclnn calls use them on Ascend 950."""
import pytest
import torch

from op_plugin._testing_harness import assert_close, check_compiled

F32, BF16 = torch.float32, torch.bfloat16
npu = torch.ops.npu
pytestmark = pytest.mark.usefixtures("torchair")


def _permute_oracle(tokens, indices):
    topk = indices.shape[1] if indices.dim() == 2 else 1
    flat = indices.reshape(-1).tolist()
    order = sorted(range(len(flat)), key=lambda i: (flat[i], i))
    sorted_indices = [0] * len(flat)
    for position, i in enumerate(order):
        sorted_indices[i] = position
    return torch.stack([tokens[i // topk] for i in order]), sorted_indices


@pytest.mark.parametrize("dtype", (F32, BF16))
@pytest.mark.parametrize("index_dtype,shape", [(torch.int64, (5, 3)), (torch.int32, (6,))])
def test_permute(index_dtype, shape, dtype):
    tokens = torch.randn(shape[0], 4).to(dtype)
    indices = torch.randint(0, 6, shape, dtype=index_dtype)
    permuted, sorted_indices = npu.npu_moe_token_permute(tokens, indices)
    want, want_sorted = _permute_oracle(tokens, indices)
    assert torch.equal(permuted, want) and sorted_indices.tolist() == want_sorted
    cut, _ = npu.npu_moe_token_permute(tokens, indices, num_out_tokens=4)
    assert torch.equal(cut, want[:4])


@pytest.mark.parametrize("dtype", (F32, BF16))
def test_unpermute_restores_the_weighted_tokens(dtype):
    tokens, indices = torch.randn(5, 4).to(dtype), torch.randint(0, 6, (5, 2))
    probs = torch.rand(5, 2).to(dtype)
    permuted, sorted_indices = npu.npu_moe_token_permute(tokens, indices)
    got = npu.npu_moe_token_unpermute(permuted * 3, sorted_indices, probs)
    want = torch.zeros(5, 4)
    for t in range(5):
        for k in range(2):
            want[t] += float(probs[t, k]) * 3 * tokens[t].float()
    assert_close(got, want.to(dtype), "npu_ops")


def test_refusals():
    tokens, indices = torch.randn(2, 4), torch.tensor([[0, 20000], [1, 2]])
    with pytest.raises(ValueError, match="npu_moe_token_permute.*10240"):
        npu.npu_moe_token_permute(tokens, indices)
    with pytest.raises(ValueError, match="padded_mode"):
        npu.npu_moe_token_permute(tokens, indices % 4, padded_mode=True)


@pytest.mark.parametrize("num_out_tokens", [None, 7])
def test_permute_unpermute_compiled(num_out_tokens):
    def fn(tokens, indices, probs):
        permuted, sorted_indices = npu.npu_moe_token_permute(tokens, indices, num_out_tokens)
        out = npu.npu_moe_token_unpermute(permuted * 2, sorted_indices, probs) if num_out_tokens is None else None
        return permuted, sorted_indices, out
    args = (torch.randn(5, 4), torch.randint(0, 6, (5, 2)), torch.rand(5, 2))
    check_compiled(fn, args, "MoeInitRoutingV3", kind="npu_ops")


def test_permute_unpermute_compiled_dynamic_tokens():
    def fn(tokens, indices, probs):
        permuted, sorted_indices = npu.npu_moe_token_permute(tokens, indices)
        return npu.npu_moe_token_unpermute(permuted * 2, sorted_indices, probs)
    for n in (5, 8):
        args = (torch.randn(n, 4), torch.randint(0, 6, (n, 2), dtype=torch.int32), torch.rand(n, 2))
        check_compiled(fn, args, ["MoeInitRoutingV3", "MoeFinalizeRoutingV2"], kind="npu_ops", dynamic=True)

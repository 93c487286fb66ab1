"""torch.library.opcheck on the attention family of issue 23: schema (declared mutations: only the in-place
npu_mla_prolog_v3 writes its caches), FakeTensor (the wheel's Meta against the CPU kernel: shapes, dtypes,
the softmax_lse and empty outputs), the autograd registration (npu_fusion_attention's formula) and AOT
dispatch."""
import pytest
import torch

npu = torch.ops.npu
pytestmark = pytest.mark.usefixtures("torchair")
F16, BF16 = torch.float16, torch.bfloat16


def _paged():
    table = torch.tensor([[2, 0], [1, 3]], dtype=torch.int32)
    return (torch.randn(2, 1, 32).to(F16), torch.randn(4, 4, 16).to(F16), torch.randn(4, 4, 16).to(F16)), table


def _mla(v3=False):
    g = torch.Generator().manual_seed(0)
    x, w_dq, w_uq_qr = (torch.randn(*shape, generator=g) for shape in ((3, 16), (16, 12), (12, 24)))
    w_uk, w_dkv_kr = torch.randn(2, 8, 8, generator=g), torch.randn(16, 12, generator=g)
    tensors = [t.to(BF16) for t in (x, w_dq, w_uq_qr, w_uk, w_dkv_kr, torch.rand(12), torch.rand(8), torch.rand(3, 4),
                                    torch.rand(3, 4))]
    caches = [torch.zeros(2, 4, 1, 8, dtype=BF16), torch.zeros(2, 4, 1, 4, dtype=BF16)]
    index = torch.tensor([5, 0, 2])
    return (*tensors, *caches) if v3 else (*tensors, index, *caches), ({"cache_index": index} if v3 else {})


def _fused_paged():
    args, table = _paged()
    return args, dict(block_table=table, block_size=4, actual_seq_lengths_kv=[6, 3], num_heads=4,
                      num_key_value_heads=2, softmax_lse_flag=True)


def _fused_prompt():
    q, k = torch.randn(2, 4, 3, 8).to(F16), torch.randn(2, 2, 5, 8).to(F16)
    return (q, k, k), dict(actual_seq_lengths=[3, 2], actual_seq_lengths_kv=[5, 4], num_heads=4,
                           num_key_value_heads=2, input_layout="BNSD", sparse_mode=3,
                           atten_mask=torch.ones(2048, 2048, dtype=torch.bool).triu(1))


def _incre_paged():
    args, table = _paged()
    return args, dict(block_table=table, block_size=4, actual_seq_lengths=[6, 3], num_heads=4, num_key_value_heads=2)


def _fusion_grad():
    q = torch.randn(1, 3, 16).to(F16)
    out, smax, ssum, *_ = npu.npu_fusion_attention(q, q, q, 2, "BSH", scale=0.3)
    return (q, q, q, q, 2, "BSH"), dict(softmax_max=smax, softmax_sum=ssum, attention_in=out, scale_value=0.3)


CASES = {
    "npu_fused_infer_attention_score": _fused_paged,
    "npu_fused_infer_attention_score#prompt": _fused_prompt,
    "npu_incre_flash_attention": _incre_paged,
    "npu_prompt_flash_attention": lambda: ((torch.randn(2, 3, 16).to(F16),) * 3,
                                           dict(num_heads=2, actual_seq_lengths=[3, 1], actual_seq_lengths_kv=[2, 3])),
    # float32: opcheck compares eager and AOT gradients at float32 tolerances
    "npu_fusion_attention": lambda: ((torch.randn(1, 3, 16).requires_grad_(),) * 3 + (2, "BSH"), {}),
    "npu_fusion_attention_grad": _fusion_grad,
    "npu_mla_prolog": lambda: _mla(),
    "npu_mla_prolog_v2": lambda: _mla(),
    "npu_mla_prolog_v3": lambda: _mla(v3=True),
    "npu_mla_prolog_v3_functional": lambda: _mla(v3=True),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_opcheck(name):
    args, kwargs = CASES[name]()
    torch.library.opcheck(getattr(npu, name.split("#")[0]).default, args, kwargs)

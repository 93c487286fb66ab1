"""One valid call per npu op with a CPU reference kernel (``ops.COVERED``): the seeds that
npu/test_hostile.py and kernels/test_npu_hostile.py mutate into hostile calls. Each maker returns (args, kwargs),
fresh tensors."""
from __future__ import annotations

import torch

F16, BF16, I32, I64 = torch.float16, torch.bfloat16, torch.int32, torch.int64


def _r(*shape, dtype=torch.float32):
    return torch.randn(*shape).to(dtype)


def _kv():
    return (_r(2, 1, 1, 24, dtype=F16), torch.rand(16).to(F16), torch.rand(2, 1, 1, 8).to(F16),
            torch.rand(2, 1, 1, 8).to(F16), torch.tensor([1, 5]), _r(2, 4, 1, 8, dtype=F16),
            _r(2, 4, 1, 16, dtype=F16)), {"cache_mode": "PA"}


def _pa():
    return (_r(2, 1, 4), _r(2, 1, 4), _r(2, 3, 1, 4), _r(2, 3, 1, 4), torch.tensor([1, 4])), {"cache_mode": "Norm"}


def _mla(v3=False):
    tensors = [_r(*s, dtype=BF16) for s in ((3, 16), (16, 12), (12, 24), (2, 8, 8), (16, 12))]
    tensors += [torch.rand(12).to(BF16), torch.rand(8).to(BF16), torch.rand(3, 4).to(BF16), torch.rand(3, 4).to(BF16)]
    caches = [torch.zeros(2, 4, 1, 8, dtype=BF16), torch.zeros(2, 4, 1, 4, dtype=BF16)]
    index = torch.tensor([5, 0, 2])
    return ((*tensors, *caches), {"cache_index": index}) if v3 else ((*tensors, index, *caches), {})


def _paged_fused():
    table = torch.tensor([[2, 0], [1, 3]], dtype=I32)
    return (_r(2, 1, 32, dtype=F16), _r(4, 4, 16, dtype=F16), _r(4, 4, 16, dtype=F16)), dict(
        block_table=table, block_size=4, actual_seq_lengths_kv=[6, 3], num_heads=4, num_key_value_heads=2)


def _paged_incre():
    args, kwargs = _paged_fused()
    kwargs["actual_seq_lengths"] = kwargs.pop("actual_seq_lengths_kv")
    return args, kwargs


def _paged_v2():
    args, kwargs = _paged_fused()
    return args, dict(block_table=kwargs["block_table"], block_size=4, actual_seq_kvlen=[6, 3], num_query_heads=4,
                      num_key_value_heads=2)


def _fusion_grad():
    q = _r(1, 3, 16, dtype=F16)
    out, smax, ssum, *_ = torch.ops.npu.npu_fusion_attention(q, q, q, 2, "BSH", scale=0.3)
    return (q, q, q, q, 2, "BSH"), dict(softmax_max=smax, softmax_sum=ssum, attention_in=out, scale_value=0.3)


def _routing():
    return (_r(3, 4), torch.arange(6, dtype=I32).reshape(2, 3).t().contiguous(),
            torch.tensor([[0, 2], [1, 0], [2, 1]], dtype=I32), 3), {}


def _finalize():
    rows = torch.tensor([0, 3, 1, 4, 2, 5], dtype=I32)
    return (_r(6, 4), _r(3, 4), None, _r(3, 4), torch.rand(3, 2), rows, torch.tensor([[0, 1], [1, 2], [2, 0]],
                                                                                      dtype=I32)), {}


def _gmm():
    return ([_r(6, 4)], [_r(2, 4, 5)]), dict(group_list=torch.tensor([2, 6]), split_item=2, group_type=0)


def _dequant_swiglu():
    x = torch.randint(-50, 50, (3, 8), dtype=I32)
    return (x,), dict(weight_scale=torch.rand(8), activation_scale=torch.rand(3), quant_scale=torch.rand(4),
                      quant_mode=1)


def _quant_matmul():
    return (torch.randint(-9, 9, (3, 8), dtype=torch.int8), torch.randint(-9, 9, (8, 5), dtype=torch.int8),
            torch.rand(5)), dict(pertoken_scale=torch.rand(3), output_dtype=F16)


def _wqbmm():
    return (_r(3, 8, dtype=F16), torch.randint(-8, 8, (8, 5), dtype=torch.int8), torch.rand(5).to(F16),
            torch.rand(5).to(F16)), {}


VALID = {
    "npu_scatter_nd_update": lambda: ((_r(5, 3), torch.tensor([[1], [3]]), _r(2, 3)), {}),
    "npu_scatter_nd_update_": lambda: ((_r(5, 3), torch.tensor([[1], [3]]), _r(2, 3)), {}),
    "npu_apply_rotary_pos_emb": lambda: ((_r(1, 3, 2, 8), _r(1, 3, 2, 8), _r(1, 3, 1, 8), _r(1, 3, 1, 8)), {}),
    "npu_interleave_rope": lambda: ((_r(2, 2, 3, 8), _r(2, 1, 3, 8), _r(2, 1, 3, 8)), {}),
    "npu_rms_norm": lambda: ((_r(2, 8), torch.rand(8)), {}),
    "npu_add_rms_norm": lambda: ((_r(2, 8), _r(2, 8), torch.rand(8)), {}),
    "npu_rotary_mul": lambda: ((_r(1, 2, 3, 8), _r(1, 2, 1, 8), _r(1, 2, 1, 8)), {}),
    "npu_swiglu": lambda: ((_r(2, 8),), {}),
    "npu_mla_prolog": _mla,
    "npu_mla_prolog_v2": _mla,
    "npu_mla_prolog_v3": lambda: _mla(v3=True),
    "npu_mla_prolog_v3_functional": lambda: _mla(v3=True),
    "npu_fusion_attention": lambda: ((_r(1, 3, 16), _r(1, 3, 16), _r(1, 3, 16), 2, "BSH"), {}),
    "npu_fusion_attention_grad": _fusion_grad,
    "npu_prompt_flash_attention": lambda: ((_r(2, 3, 16, dtype=F16),) * 3, dict(
        num_heads=2, actual_seq_lengths=[3, 1], actual_seq_lengths_kv=[2, 3])),
    "npu_incre_flash_attention": _paged_incre,
    "npu_fused_infer_attention_score": _paged_fused,
    "npu_fused_infer_attention_score_v2": _paged_v2,
    "npu_scatter_pa_kv_cache": _pa,
    "npu_scatter_pa_kv_cache_functional": _pa,
    "npu_kv_rmsnorm_rope_cache": _kv,
    "npu_kv_rmsnorm_rope_cache_v2": _kv,
    "npu_kv_rmsnorm_rope_cache_v2_functional": _kv,
    "npu_format_cast": lambda: ((_r(3, 4), 2), {}),
    "npu_top_k_top_p": lambda: ((_r(2, 8), torch.tensor([0.5, 0.9]), torch.tensor([2, 3], dtype=I32)), {}),
    "npu_gelu": lambda: ((_r(3, 4),), {"approximate": "tanh"}),
    "npu_dtype_cast": lambda: ((_r(3, 4), 1), {}),
    "_npu_dtype_cast": lambda: ((_r(3, 4), F16), {}),
    "npu_linear": lambda: ((_r(3, 4), _r(5, 4), _r(5)), {}),
    "npu_transpose_batchmatmul": lambda: ((_r(3, 2, 4), _r(2, 4, 5)), {"perm_x1": [1, 0, 2]}),
    "npu_moe_gating_top_k_softmax": lambda: ((_r(4, 6), None), {"k": 2}),
    "npu_moe_gating_top_k": lambda: ((_r(4, 8), 2), dict(k_group=2, group_count=4, group_select_mode=1)),
    "npu_moe_init_routing": _routing,
    "npu_moe_init_routing_v2": lambda: ((_r(3, 4), torch.tensor([[0, 2], [1, 0], [2, 1]], dtype=I32)),
                                        dict(active_num=6, expert_num=3)),
    "npu_moe_finalize_routing": _finalize,
    "npu_moe_compute_expert_tokens": lambda: ((torch.tensor([0, 0, 1, 2, 2, 2], dtype=I32), 4), {}),
    "npu_moe_token_permute": lambda: ((_r(3, 4), torch.tensor([[0, 2], [1, 0], [2, 1]])), {}),
    "npu_moe_token_unpermute": lambda: ((_r(6, 4), torch.tensor([1, 3, 0, 5, 2, 4], dtype=I32), torch.rand(3, 2)), {}),
    "npu_grouped_matmul": _gmm,
    "npu_grouped_matmul.List": lambda: (([_r(6, 4)], [_r(2, 4, 5)]), dict(group_list=[2, 6], split_item=2,
                                                                           group_type=0)),
    "npu_dequant_swiglu_quant": _dequant_swiglu,
    "npu_add_rms_norm_dynamic_quant": lambda: ((_r(2, 8, dtype=F16), _r(2, 8, dtype=F16), torch.rand(8).to(F16)), {}),
    "npu_add_rms_norm_quant": lambda: ((_r(2, 8, dtype=F16), _r(2, 8, dtype=F16), torch.rand(8).to(F16),
                                        torch.rand(8).to(F16), torch.zeros(8, dtype=I32)), {}),
    "npu_dynamic_quant": lambda: ((_r(3, 8, dtype=F16),), {}),
    "npu_dynamic_quant_asymmetric": lambda: ((_r(3, 8, dtype=F16),), {}),
    "npu_quantize": lambda: ((_r(3, 4), torch.rand(4) + 0.5, None, torch.qint8, -1, False), {}),
    "npu_quant_max": lambda: ((_r(3, 8, dtype=BF16) * 100, torch.tensor([2.0])), {"dst_dtype": 292}),
    "npu_rotate_quant": lambda: ((_r(2, 32, dtype=F16), _r(16, 16, dtype=F16)), {"dst_dtype": 16}),
    "npu_kronecker_quant": lambda: ((_r(2, 4, 16, dtype=F16), _r(4, 4, dtype=F16), _r(16, 16, dtype=F16), 0.9), {}),
    "npu_dynamic_mx_quant": lambda: ((_r(4, 64, dtype=BF16),), {}),
    "npu_dynamic_mx_quant_with_dual_axis": lambda: ((_r(34, 64, dtype=F16),), {"dst_type": 292}),
    "npu_dynamic_block_mx_quant": lambda: ((_r(34, 64, dtype=F16),), {}),
    "npu_dynamic_dual_level_mx_quant": lambda: ((_r(2, 600, dtype=F16),), {}),
    "npu_rms_norm_dynamic_mx_quant": lambda: ((_r(3, 64, dtype=F16), torch.rand(64).to(F16)), {}),
    "npu_add_rms_norm_dynamic_mx_quant": lambda: ((_r(3, 64, dtype=F16), _r(3, 64, dtype=F16),
                                                   torch.rand(64).to(F16)), {"dst_type": 291}),
    "npu_swiglu_mx_quant": lambda: ((_r(4, 128, dtype=F16),), {}),
    "npu_grouped_dynamic_mx_quant": lambda: ((_r(70, 16, dtype=BF16), torch.tensor([30, 70], dtype=I32)), {}),
    "npu_anti_mx_quant": lambda: ((_r(3, 64).to(torch.float8_e4m3fn), torch.full((3, 1, 2), 127, dtype=torch.uint8)),
                                  {}),
    "npu_add_rms_norm_cast": lambda: ((_r(2, 8, dtype=F16), _r(2, 8, dtype=F16), torch.rand(8).to(F16)), {}),
    "npu_add_rms_norm_v2_functional": lambda: ((_r(2, 8, dtype=F16), _r(2, 8, dtype=F16), torch.rand(8).to(F16)), {}),
    "npu_group_norm_silu": lambda: ((_r(2, 4, 3, 3), torch.rand(4), torch.rand(4), 2), {}),
    "npu_trans_quant_param": lambda: ((torch.rand(4), torch.rand(4)), {}),
    "npu_prefetch": lambda: ((_r(4, 4), None, 64), {}),
    "npu_scatter_list": lambda: (([_r(2, 6, 4) for _ in range(3)], torch.tensor([0, 4, 3], dtype=I32),
                                  _r(3, 2, 2, 4)), {"mask": torch.tensor([1, 0, 7], dtype=torch.uint8)}),
    "npu_masked_softmax_with_rel_pos_bias": lambda: ((_r(2, 3, 2, 4, 5), _r(3, 4, 5), _r(2, 4, 5), 0.5), {}),
    "npu_ffn": lambda: ((_r(2, 4, dtype=F16), _r(4, 8, dtype=F16), _r(8, 4, dtype=F16), "relu"), {}),
    "npu_anti_quant": lambda: ((torch.randint(-8, 8, (3, 4), dtype=torch.int8), torch.rand(4)),
                               {"offset": torch.rand(4)}),
    "npu_quant_matmul": _quant_matmul,
    "npu_weight_quant_batchmatmul": _wqbmm,
    "npu_rms_norm_backward": lambda: ((_r(2, 8), _r(2, 8), torch.rand(8), torch.rand(2, 1)), {}),
    "npu_swiglu_backward": lambda: ((_r(2, 4), _r(2, 8)), {}),
    "npu_rotary_mul_backward": lambda: ((_r(1, 2, 3, 8), _r(1, 2, 3, 8), _r(1, 2, 1, 8), _r(1, 2, 1, 8)), {}),
    "npu_gelu_backward": lambda: ((_r(3), _r(3)), {}),
    "npu_linear_backward": lambda: ((_r(3, 5), _r(3, 4), _r(5, 4)), {}),
    "npu_dtype_cast_backward": lambda: ((_r(3), torch.float32), {}),
    "_npu_dtype_cast_backward": lambda: ((_r(3), torch.float32), {}),
    "_npu_rms_norm_backward_quant": lambda: ((_r(2, 8, dtype=F16), _r(2, 8, dtype=F16), torch.rand(2) + 0.5,
                                              torch.rand(8).to(F16), torch.rand(1) + 0.1), {}),
    "batch_norm_gather_stats_update": lambda: ((_r(4, 3, 2, 2), _r(2, 3), torch.rand(2, 3) + 2, torch.zeros(3),
                                                torch.ones(3), 0.1, 1e-5, torch.tensor([8.0, 8.0])), {}),
    "npu_quant_scatter": lambda: ((torch.zeros(2, 8, 32, dtype=torch.int8), torch.tensor([1, 5], dtype=I32),
                                   _r(2, 2, 32, dtype=F16), torch.rand(32) + 0.5), {}),
    "npu_quant_scatter_": lambda: ((torch.zeros(2, 8, 32, dtype=torch.int8), torch.tensor([1, 5], dtype=I32),
                                    _r(2, 2, 32, dtype=F16), torch.rand(32) + 0.5), {}),
    "attention_worker_scheduler": lambda: ((torch.zeros(1024, dtype=torch.int8),), {}),
    "attention_worker_scheduler_": lambda: ((torch.zeros(1024, dtype=torch.int8),), {}),
    "ffn_worker_scheduler": lambda: ((torch.zeros(1024, dtype=torch.int8),), {"sync_group_size": 1}),
    "ffn_worker_scheduler_": lambda: ((torch.zeros(1024, dtype=torch.int8),), {"sync_group_size": 1}),
}
# MC2 and MoE-distribute ops need a process group (hcom); their hostile cases belong with tests/distributed/test_mc2.py.
NEEDS_PROCESS_GROUP = ("npu_mm_all_reduce_base", "npu_all_gather_base_mm", "npu_mm_reduce_scatter_base",
                       "npu_all_gather_quant_mm", "npu_quant_mm_reduce_scatter",  # test_mc2_quant.py
                       "npu_moe_distribute_dispatch", "npu_moe_distribute_combine",
                       "npu_moe_distribute_dispatch_v2", "npu_moe_distribute_combine_v2")

"""The wheel-Meta reader (op_plugin/_simulator/npu/wheel_meta.py): what counts as a free name, and the
stand-ins for the torch_npu names the wheel's Meta functions use (issue 23, first part).

Every Meta function the wheel registers must compile on a CPU host; the fused-infer-attention Meta
(local annotations, a nested class) and the ones naming torch_npu's dtype constants or
get_cann_version must also run on meta tensors.
"""
import ast
import sys

import pytest
import torch

from op_plugin._simulator.hosting.install import simulator_dir
from op_plugin._simulator.npu import wheel_meta

WHEEL = simulator_dir() / "torch_npu"


def _registered():
    source = (WHEEL / wheel_meta.META_MODULE).read_text()
    body = wheel_meta._resolve_version_branches(ast.parse(source).body)
    return wheel_meta._registered_meta(body)


def test_local_annotations_and_nested_definitions_are_no_free_names():
    tree = ast.parse(
        "def f(query):\n"
        "    class Layout:\n"
        "        def __init__(self, q: str):\n"
        "            self.q = q\n"
        "    def check():\n"
        "        return helper(query)\n"
        "    table: Dict[str, Layout] = {'BSH': Layout('BSH')}\n"
        "    check()\n"
        "    return table\n")
    assert wheel_meta._free_names(tree.body[0]) == {"helper", "str"}  # a parameter's annotation is evaluated
    module_level = ast.parse("X: Dict[str, int] = {}\n").body[0]  # evaluated at module level
    assert "Dict" in wheel_meta._free_names(module_level)


def test_fused_infer_attention_score_meta_is_read_and_runs():
    meta = wheel_meta.meta_functions(WHEEL, ["npu_fused_infer_attention_score"])["npu_fused_infer_attention_score"]
    q = torch.empty(2, 4, 1, 64, dtype=torch.float16, device="meta")
    k = torch.empty(2, 4, 16, 64, dtype=torch.float16, device="meta")
    out, lse = meta(q, k, k, num_heads=4, input_layout="BNSD")
    assert out.shape == (2, 4, 1, 64) and out.dtype == torch.float16


# The ops whose Meta functions name torch_npu's dtype constants (25) or get_cann_version (3).
DTYPE_OR_CANN_OPS = [
    "npu_mla_prolog_v3", "npu_mla_prolog_v3_functional", "npu_quant_mm_reduce_scatter", "npu_quant_gmm_alltoallv",
    "npu_alltoallv_quant_gmm", "npu_all_gather_quant_mm", "npu_moe_init_routing_v2",
    "npu_fused_infer_attention_score_v2", "npu_add_rms_norm_dynamic_quant", "npu_add_rms_norm_dynamic_mx_quant",
    "npu_grouped_matmul", "npu_grouped_matmul.List", "npu_add_quant_gmm_", "npu_add_quant_gmm",
    "npu_weight_quant_batchmatmul", "npu_quant_matmul", "npu_kronecker_quant", "npu_dequant_swiglu_quant",
    "npu_swiglu_mx_quant", "npu_grouped_matmul_swiglu_quant_v2", "npu_dynamic_mx_quant_with_dual_axis",
    "npu_dynamic_block_mx_quant", "npu_rotate_quant", "npu_sparse_flash_attention",
    "npu_sparse_flash_attention_grad", "npu_transpose_batchmatmul",
]


def test_every_registered_meta_function_compiles_without_torch_npu():
    names = list(_registered())
    assert len(names) >= 248
    metas = wheel_meta.meta_functions(WHEEL, names)
    assert all(callable(metas[name]) for name in DTYPE_OR_CANN_OPS)
    assert all(callable(fn) for fn in metas.values())
    assert "torch_npu" not in sys.modules


def test_dtype_constants_are_the_wheels_values():
    stand_in = wheel_meta._STAND_INS["torch_npu"]
    assert stand_in.hifloat8 == 290 and repr(stand_in.hifloat8) == "torch_npu.hifloat8"
    assert (stand_in.int4, stand_in.float8_e8m0fnu, stand_in.float4_e2m1fn_x2) == (285, 293, 296)
    assert stand_in.uint8 is torch.uint8
    # the wheel's own table agrees: every stand-in value maps to a storage dtype or a name there
    source = (WHEEL / wheel_meta.META_MODULE).read_text()
    for name, value in wheel_meta.TORCH_NPU_DTYPES.items():
        assert f"{value}:" in source, name
    with pytest.raises(NotImplementedError, match=r"torch_npu\.npu_format_cast needs torch_npu"):
        _ = stand_in.npu_format_cast


def test_cann_version_stand_in():
    assert wheel_meta._STAND_INS["get_cann_version"]() == wheel_meta.SIMULATED_CANN_VERSION == "8.5.0"
    gte = wheel_meta._STAND_INS["torch_npu"].npu.utils._is_gte_cann_version
    assert gte("8.5.0.alpha003") and gte("8.3.RC1") and gte("8.5.0") and not gte("9.2.0")


def test_meta_functions_using_stand_ins_run():
    metas = wheel_meta.meta_functions(WHEEL, ["npu_quant_matmul", "npu_transpose_batchmatmul",
                                              "npu_dynamic_mx_quant"])
    x1 = torch.empty(8, 32, dtype=torch.int8, device="meta")
    x2 = torch.empty(32, 16, dtype=torch.int8, device="meta")
    scale = torch.empty(16, dtype=torch.float32, device="meta")
    assert metas["npu_quant_matmul"](x1, x2, scale, output_dtype=5).shape == (8, 16)  # 5: float16
    a = torch.empty(4, 2, 32, dtype=torch.float16, device="meta")  # (M, B, K) with perm_x1 [1, 0, 2]
    b = torch.empty(2, 32, 16, dtype=torch.float16, device="meta")
    y = metas["npu_transpose_batchmatmul"](a, b, perm_x1=[1, 0, 2], perm_x2=[0, 1, 2], perm_y=[1, 0, 2])
    assert y.shape[-1] == 16
    x = torch.empty(4, 64, dtype=torch.float16, device="meta")
    y, _ = metas["npu_dynamic_mx_quant"](x, dst_type=wheel_meta._STAND_INS["torch_npu"].float4_e2m1fn_x2)
    assert y.shape == (4, 32) and y.dtype == torch.uint8

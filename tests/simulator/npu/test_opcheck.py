"""torch.library.opcheck on the npu ops of issue 23's cache, dense, backward, format and sampling families:
schema (declared mutations), FakeTensor (the wheel's or op_plugin's Meta against the CPU kernel), the
autograd registration (torch_npu's formulas) and AOT dispatch."""
import pytest
import torch

npu = torch.ops.npu
pytestmark = pytest.mark.usefixtures("torchair")
F16 = torch.float16


def _kv_args():
    return (torch.randn(2, 1, 1, 24).to(F16), torch.rand(16).to(F16), torch.rand(2, 1, 1, 8).to(F16),
            torch.rand(2, 1, 1, 8).to(F16), torch.tensor([1, 5]), torch.randn(2, 4, 1, 8).to(F16),
            torch.randn(2, 4, 1, 16).to(F16))


def _pa_args():
    return (torch.randn(2, 1, 4), torch.randn(2, 1, 4), torch.randn(2, 3, 1, 4), torch.randn(2, 3, 1, 4),
            torch.tensor([1, 4]))


CASES = {
    "npu_scatter_pa_kv_cache": (_pa_args, {"cache_mode": "Norm"}),
    "npu_scatter_pa_kv_cache_functional": (_pa_args, {"cache_mode": "Norm"}),
    "npu_kv_rmsnorm_rope_cache_v2": (_kv_args, {"cache_mode": "PA"}),
    "npu_kv_rmsnorm_rope_cache_v2_functional": (_kv_args, {"cache_mode": "PA_NZ"}),
    "npu_gelu": (lambda: (torch.randn(3, 4, requires_grad=True),), {"approximate": "tanh"}),
    "npu_linear": (lambda: (torch.randn(3, 4, requires_grad=True), torch.randn(5, 4, requires_grad=True),
                            torch.randn(5, requires_grad=True)), {}),
    "npu_dtype_cast": (lambda: (torch.randn(3, requires_grad=True), 5), {}),
    "npu_transpose_batchmatmul": (lambda: (torch.randn(3, 2, 4), torch.randn(2, 4, 5)), {"perm_x1": [1, 0, 2]}),
    "npu_rms_norm": (lambda: (torch.randn(2, 8, requires_grad=True), torch.rand(8, requires_grad=True)), {}),
    "npu_swiglu": (lambda: (torch.randn(2, 8, requires_grad=True),), {}),
    "npu_rotary_mul": (lambda: (torch.randn(1, 2, 3, 8, requires_grad=True),
                                *(torch.randn(1, 2, 1, 8, requires_grad=True) for _ in range(2)), "interleave-half"),
                       {}),
    "npu_rms_norm_backward": (lambda: (torch.randn(2, 8), torch.randn(2, 8), torch.rand(8), torch.rand(2, 1)), {}),
    "npu_swiglu_backward": (lambda: (torch.randn(2, 4), torch.randn(2, 8)), {}),
    "npu_rotary_mul_backward": (lambda: (torch.randn(1, 2, 3, 8), torch.randn(1, 2, 3, 8), torch.randn(1, 2, 1, 8),
                                         torch.randn(1, 2, 1, 8), "quarter"), {}),
    "npu_gelu_backward": (lambda: (torch.randn(3), torch.randn(3)), {}),
    "npu_linear_backward": (lambda: (torch.randn(3, 5), torch.randn(3, 4), torch.randn(5, 4)), {}),
    "npu_format_cast": (lambda: (torch.randn(3, 4), 29), {}),
    "npu_top_k_top_p": (lambda: (torch.randn(2, 8), torch.tensor([0.5, 0.9]), torch.tensor([2, 3], dtype=torch.int32)),
                        {}),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_opcheck(name):
    make, kwargs = CASES[name]
    torch.library.opcheck(getattr(npu, name).default, make(), kwargs)


def test_v1_kv_rmsnorm_rope_cache_mutates_what_its_schema_does_not_declare():
    """The wheel declares npu_kv_rmsnorm_rope_cache without mutations, yet on an NPU it writes its caches
    (the aclnn op's in/out tensors): the CPU kernel does the same, so opcheck's schema test flags it;
    every other check passes."""
    op = npu.npu_kv_rmsnorm_rope_cache.default
    with pytest.raises(Exception, match="k_cache is not defined as mutable but was mutated"):
        torch.library.opcheck(op, _kv_args(), {"cache_mode": "PA"}, test_utils=("test_schema",))
    torch.library.opcheck(op, _kv_args(), {"cache_mode": "PA"},
                          test_utils=("test_autograd_registration", "test_faketensor"))

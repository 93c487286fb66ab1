"""Tests of kernels/norm/layer_norm.py: LayerNorm(V3, V4), LayerNormGradV3.
"""
from __future__ import annotations

import pytest
import torch

from op_plugin._testing_harness import run_node

from tests.simulator.kernels.helpers import _IDS, aten, BF16, check_grad_case, F16, F32


@pytest.mark.parametrize("dtype", [F32, F16, BF16], ids=_IDS.get)
@pytest.mark.parametrize("shape,normalized", [((4, 8), [8]), ((2, 3, 8), [8]), ((2, 3, 4, 5), [4, 5])])
@pytest.mark.parametrize("affine", [True, False], ids=["affine", "no_weight"])
def test_layer_norm_grad(dtype, shape, normalized, affine):
    torch.manual_seed(0)
    x = torch.randn(shape)
    w = torch.randn(normalized) if affine else None
    b = torch.randn(normalized) if affine else None
    _, mean, rstd = aten.native_layer_norm(x, normalized, w, b, 1e-5)
    g = torch.randn(shape)
    def cast(t):
        return None if t is None else t.to(dtype)

    args = (cast(g), cast(x), cast(mean), cast(rstd), cast(w), cast(b))

    mask = [True, affine, affine]  # what AOT asks for a LayerNorm with and without elementwise_affine

    def fn(g, x, mean, rstd, w, b):
        grads = aten.native_layer_norm_backward(g, x, normalized, mean, rstd, w, b, mask)
        return grads if affine else grads[0]

    oracle = None
    check_grad_case(fn, args, "LayerNormGradV3", oracle=oracle, scale=8.0)


# ---- attrs of the pre-existing kernels that were read wrongly ------------------------------------

def test_layer_norm_epsilon_defaults_differ_per_version():
    x, g, b = torch.tensor([[0.0, 1e-3]]), torch.ones(2), torch.zeros(2)
    for op_type, eps in (("LayerNorm", 1e-7), ("LayerNormV3", 1e-5)):
        y = run_node(op_type, [x, g, b], begin_norm_axis=1, begin_params_axis=1)[0]
        torch.testing.assert_close(y, torch.nn.functional.layer_norm(x, [2], g, b, eps))

"""meta/'s worked example: npu_custom_mse_loss has no `outputs:` (its output rule depends on a string),
so its Meta function is the hand-written meta/mse_loss.py, registered when op_plugin is imported.
Checked against the op's reference kernel here; the generated per-sample tests (opcheck, Meta vs
reference for random sizes, symbolic sizes, npugraph == eager, backward) cover it too."""
import importlib

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

from op_plugin import _registry
from op_plugin.testing import specialised_sizes

# meta/ is installed as op_plugin.meta_functions (an editable install maps the root folder there)
example = importlib.import_module("op_plugin.meta_functions.mse_loss")
OP = torch.ops.npu.npu_custom_mse_loss.default


def test_the_example_is_the_registered_meta_of_an_op_without_outputs():
    st = _registry.find("npu_custom_mse_loss")
    assert st.spec.outputs is None
    assert st.meta is example.mse_loss_meta
    assert st.reference is not None


@pytest.mark.parametrize("reduction", example.REDUCTIONS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("shape", [(5,), (3, 4), (2, 3, 4)])
def test_meta_agrees_with_the_reference_kernel(reduction, dtype, shape):
    x, target = torch.randn(shape).to(dtype), torch.randn(shape).to(dtype)
    real = OP(x, target, reduction)
    with FakeTensorMode() as mode:
        fake = OP(mode.from_tensor(x), mode.from_tensor(target), reduction)
    assert (fake.shape, fake.dtype) == (real.shape, real.dtype)
    expected = torch.nn.functional.mse_loss(x.float(), target.float(), reduction=reduction).to(dtype)
    torch.testing.assert_close(real, expected)


@pytest.mark.parametrize("reduction", example.REDUCTIONS)
def test_meta_keeps_sizes_symbolic(reduction):
    x, target = torch.randn(3, 5), torch.randn(3, 5)
    assert specialised_sizes(OP, (x, target, reduction), {}) == []


def test_meta_refuses_what_the_reference_refuses():
    with FakeTensorMode() as mode:
        x = mode.from_tensor(torch.randn(3, 4))
        with pytest.raises(ValueError, match="reduction must be one of"):
            OP(x, x, "max")
        with pytest.raises(RuntimeError, match="must have x's shape"):
            OP(x, mode.from_tensor(torch.randn(3, 5)), "none")
    with pytest.raises(ValueError, match="reduction must be 'none', 'mean' or 'sum'"):
        OP(torch.randn(3), torch.randn(3), "max")


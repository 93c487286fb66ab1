"""npu_anti_quant (CANN AscendAntiQuantV2): y = dst_dtype((x + offset) * scale), eager against an element-by-element
oracle and compiled (TorchAir's converter, the AscendAntiQuantV2 GE kernel) against eager."""
import pytest
import torch

from op_plugin._testing_harness import check_compiled

pytestmark = pytest.mark.usefixtures("torchair")
npu = torch.ops.npu


def _oracle(x, scale, offset, dtype):
    rows = x.reshape(-1, x.shape[-1]).tolist()

    def pick(t, j):
        return float(t[0] if t.numel() == 1 else t[j])

    out = [[(v + (pick(offset, j) if offset is not None else 0.0)) * pick(scale, j) for j, v in enumerate(row)]
           for row in rows]
    return torch.tensor(out, dtype=torch.float64).reshape(x.shape).to(dtype)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("per_channel", [False, True])
@pytest.mark.parametrize("with_offset", [False, True])
def test_anti_quant_matches_the_formula(dtype, per_channel, with_offset):
    x = torch.randint(-128, 128, (3, 4, 8), dtype=torch.int8)
    scale = torch.rand(8 if per_channel else 1) + 0.01
    offset = torch.randn(scale.shape) if with_offset else None
    got = npu.npu_anti_quant(x, scale, offset=offset, dst_dtype=dtype)
    assert got.dtype == dtype and got.shape == x.shape
    torch.testing.assert_close(got, _oracle(x, scale, offset, dtype), rtol=1e-2, atol=1e-3)


def test_anti_quant_defaults_to_float16():
    x = torch.tensor([[1, -2, 3, 127]], dtype=torch.int8)
    got = npu.npu_anti_quant(x, torch.tensor([0.5]), offset=torch.tensor([1.0]))
    assert got.dtype == torch.float16 and got.tolist() == [[1.0, -0.5, 2.0, 64.0]]


def test_anti_quant_refusals():
    x = torch.zeros(2, 8, dtype=torch.int8)
    with pytest.raises(ValueError, match="npu_anti_quant: scale of shape"):
        npu.npu_anti_quant(x, torch.ones(3))
    with pytest.raises(ValueError, match="npu_anti_quant: dst_dtype"):
        npu.npu_anti_quant(x, torch.ones(1), dst_dtype=torch.float32)
    with pytest.raises(NotImplementedError, match="npu_anti_quant: x of dtype torch.uint8"):   # hifloat8 bits
        npu.npu_anti_quant(torch.zeros(2, 8, dtype=torch.uint8), torch.ones(8))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_anti_quant_compiled(dtype):
    x = torch.randint(-128, 128, (4, 16), dtype=torch.int8)
    scale, offset = torch.rand(16) + 0.01, torch.randn(16)
    check_compiled(lambda x, s, o: npu.npu_anti_quant(x, s, offset=o, dst_dtype=dtype), (x, scale, offset),
                   "AscendAntiQuantV2", kind="npu_ops")
    check_compiled(lambda x, s: npu.npu_anti_quant(x, s), (x, scale[:1]), "AscendAntiQuantV2", kind="npu_ops")

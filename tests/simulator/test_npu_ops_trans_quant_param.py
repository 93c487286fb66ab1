"""npu_trans_quant_param (CANN TransQuantParamV2): the packed int64 against the README's bit formula written with
Python ints and struct, and compiled (TorchAir's converter, the GE kernel) against eager."""
import struct

import pytest
import torch

from op_plugin._testing_harness import check_compiled

pytestmark = pytest.mark.usefixtures("torchair")
npu = torch.ops.npu


def _packed(scale: float, offset: float | None) -> int:
    bits = struct.unpack("<I", struct.pack("<f", scale))[0]
    out = (bits & 0xFFFFE000) | (1 << 46)
    if offset is not None:
        nine = max(min(int(round(offset)), 255), -256) & 0x1FF
        out = (out & 0x4000FFFFFFFF) | (nine << 37)
    return out


def test_trans_quant_param_packs_as_the_readme_says():
    scale = torch.tensor([0.1, -3.75, 1e-5, 12345.678])
    offset = torch.tensor([3.2, -300.0, 255.7, -1.4])
    assert npu.npu_trans_quant_param(scale).tolist() == [_packed(s, None) for s in scale.tolist()]
    got = npu.npu_trans_quant_param(scale, offset)
    assert got.dtype == torch.int64
    assert got.tolist() == [_packed(s, o) for s, o in zip(scale.tolist(), offset.tolist(), strict=True)]
    one = npu.npu_trans_quant_param(scale[:1], offset)   # a scale of 1 with n offsets: (n,)
    assert one.tolist() == [_packed(scale[0].item(), o) for o in offset.tolist()]


def test_trans_quant_param_refusals():
    with pytest.raises(NotImplementedError, match="npu_trans_quant_param: round_mode=1"):
        npu.npu_trans_quant_param(torch.ones(2), None, 1)
    with pytest.raises(ValueError, match="halfway"):
        npu.npu_trans_quant_param(torch.ones(2), torch.tensor([0.5, 1.0]))


def test_trans_quant_param_compiled():
    scale, offset = torch.rand(16) * 4, torch.randn(16) * 50
    check_compiled(lambda s: npu.npu_trans_quant_param(s), (scale,), "TransQuantParamV2", kind="npu_ops")
    check_compiled(lambda s, o: npu.npu_trans_quant_param(s, o), (scale, offset), "TransQuantParamV2",
                   kind="npu_ops")

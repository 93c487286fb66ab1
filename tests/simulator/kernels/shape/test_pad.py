"""Tests of kernels/shape/pad.py: PadV3, MirrorPad, PadV3Grad.
"""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from op_plugin._testing_harness import check_compiled, Const, run_node

from tests.simulator.kernels.helpers import aten, F16, F32, I64


# ---- padding --------------------------------------------------------------------------------------------

_PAD_CASES = {
    "constant_nd": (lambda x: aten.constant_pad_nd(x, [0, 0, 0, 1, 2, 0], 1.5), (12, 3, 4), F32),
    "constant_crop": (lambda x: aten.constant_pad_nd(x, [0, -1, 1, -2]), (2, 3, 5, 6), F32),
    "constant_int": (lambda x: aten.constant_pad_nd(x, [1, 2], 7), (3, 4), I64),
    "constant_fp16": (lambda x: aten.constant_pad_nd(x, [2, 1, 1, 0]), (2, 3, 4), F16),
    "replication_1d": (lambda x: aten.replication_pad1d(x, [2, 3]), (1, 3, 4), F32),
    "reflection_2d": (lambda x: aten.reflection_pad2d(x, [1, 2, 3, 0]), (1, 3, 5, 4), F32),
    "reflection_2d_3d_input": (lambda x: aten.reflection_pad2d(x, [3, 3, 3, 3]), (2, 4, 4), F32),
}


@pytest.mark.parametrize("name", list(_PAD_CASES))
def test_pads(name):
    fn, shape, dtype = _PAD_CASES[name]
    x = (torch.randn(shape) * 5).to(dtype)
    check_compiled(fn, (x,), "MirrorPad" if "reflection" in name else "PadV3", kind="kernel")


@pytest.mark.parametrize("mode,torch_mode,pads", [
    ("reflect", "reflect", [1, 2, 2, 1]), ("edge", "replicate", [3, 0, 1, 2]), ("circular", "circular", [2, 1, 0, 3]),
])
@pytest.mark.parametrize("contiguous", [True, False])
def test_pad_v3_modes_hand_built(mode, torch_mode, pads, contiguous):
    """pads are [top, bottom, left, right] on H, W of NCHW; paddings_contiguous picks the layout."""
    torch.manual_seed(0)
    x = torch.randn(1, 2, 4, 5)
    want = F.pad(x, (pads[2], pads[3], pads[0], pads[1]), mode=torch_mode)
    pairs = [(0, 0), (0, 0), (pads[0], pads[1]), (pads[2], pads[3])]
    flat = [v for p in pairs for v in p] if contiguous else [p[0] for p in pairs] + [p[1] for p in pairs]
    (got,) = run_node("PadV3", [x, Const(torch.tensor(flat))], [(F32, list(want.shape))],
                      mode=mode, paddings_contiguous=contiguous)
    torch.testing.assert_close(got, want)


def test_mirror_pad_symmetric_and_refusals():
    x = torch.arange(4.0).reshape(1, 4)
    (got,) = run_node("MirrorPad", [x, Const(torch.tensor([[0, 0], [2, 3]]))], [(F32, [1, 9])],
                      mode="SYMMETRIC")
    assert got.tolist() == [[1.0, 0.0, 0.0, 1.0, 2.0, 3.0, 3.0, 2.0, 1.0]]
    with pytest.raises(Exception, match="MirrorPad.*smaller than the dim size"):
        run_node("MirrorPad", [x, Const(torch.tensor([[0, 0], [4, 0]]))], [(F32, [1, 8])],
                 mode="REFLECT")
    with pytest.raises(Exception, match="PadV3.*negative paddings"):
        run_node("PadV3", [x, Const(torch.tensor([0, 0, -1, 0]))], [(F32, [1, 3])], mode="edge")

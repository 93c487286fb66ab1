"""Tests of kernels/math/compare.py: comparison, logic and bitwise ops (Equal, Less, LogicalAnd, BitwiseAnd,
RightShift, Invert, IsNan, ...).
"""

import pytest
import torch

from op_plugin._testing_harness import run_node

from tests.simulator.kernels.helpers import I32, I64


@pytest.mark.parametrize("x,y", [
    (torch.tensor([-16, 16, 255, 7], dtype=I32), torch.tensor([2, 3, 4, 1], dtype=I32)),
    (torch.tensor([[-128, 127], [64, -1]], dtype=torch.int8), torch.tensor([1, 7], dtype=torch.int8)),
    (torch.tensor([2**40, -(2**40)], dtype=I64), torch.tensor(20, dtype=I64)),
    (torch.tensor([200, 3], dtype=torch.uint8), torch.tensor([3, 1], dtype=torch.uint8)),
])
def test_right_shift_is_arithmetic_and_broadcasts(x, y):
    """TorchAir maps only the in-place bitwise_right_shift_ to RightShift, which functionalization
    never leaves in a compiled graph, so the kernel is tested on hand-built graphs."""
    want = torch.bitwise_right_shift(x, y)
    (got,) = run_node("RightShift", [x, y], [(want.dtype, list(want.shape))])
    torch.testing.assert_close(got, want)

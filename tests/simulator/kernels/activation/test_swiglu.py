"""Tests of kernels/activation/swiglu.py: GLU, GLUGrad, SwiGlu, SwiGluGrad.
"""

import pytest
import torch

from op_plugin._testing_harness import run_node

from tests.simulator.kernels.helpers import F32


def test_glu_refuses_an_odd_dimension():
    with pytest.raises(Exception, match=r"GLU \(node 'op'\): dim 1 .* odd size 3"):
        run_node("GLU", [torch.rand(2, 3)], [(F32, [2, 1])], dim=1)

"""Tests of kernels/math/arithmetic.py: the binary arithmetic ops, AddN, Axpy(V2), Muls, Adds, Sxpy, Addcdiv,
Addcmul, Lerp.
"""

import pytest
import torch

from op_plugin._testing_harness import run_node

from tests.simulator.kernels.helpers import F32, I64


def test_addn_checks_n_against_its_inputs():
    a, b = torch.rand(3), torch.rand(3)
    (got,) = run_node("AddN", [[a, b]], [(F32, [3])], N=2)
    torch.testing.assert_close(got, a + b)
    with pytest.raises(Exception, match=r"AddN \(node 'op'\): attr N is 3 but the node has 2 inputs"):
        run_node("AddN", [[a, b]], [(F32, [3])], N=3)


def test_addcdiv_refuses_integers():
    ints = torch.tensor([4, 6], dtype=I64)
    with pytest.raises(Exception, match=r"Addcdiv \(node 'op'\): integer Addcdiv is not implemented"):
        run_node("Addcdiv", [ints, ints, ints, torch.tensor(1, dtype=I64)], [(I64, [2])])

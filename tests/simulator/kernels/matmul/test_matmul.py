"""Matrix-multiply GE kernels (interpreter/kernels/matmul.py) in hand-built graphs: the types no
TorchAir converter emits (MatMul, MatMulV3, BatchMatMulV3, whose prototypes the kernel module
declares from CANN's ops-nn REG_OP), against torch.matmul in float64 rounded once."""
import pytest
import torch

from op_plugin._testing_harness import assert_close, run_node

F32, F16, BF16 = torch.float32, torch.float16, torch.bfloat16


def _oracle(x1, x2, bias=None, t1=False, t2=False):
    a, b = x1.double(), x2.double()
    a, b = (a.transpose(-1, -2) if t1 else a), (b.transpose(-1, -2) if t2 else b)
    y = a @ b + (0 if bias is None else bias.double())
    return y.to(x1.dtype)


@pytest.mark.parametrize("op_type", ["MatMul", "MatMulV3"])
@pytest.mark.parametrize("dtype", [F32, F16, BF16])
@pytest.mark.parametrize("t1,t2", [(False, False), (True, False), (False, True)])
def test_two_d_matmul_with_bias_and_transposes(op_type, dtype, t1, t2):
    torch.manual_seed(0)
    x1 = torch.randn([5, 4] if t1 else [4, 5]).to(dtype)
    x2 = torch.randn([3, 5] if t2 else [5, 3]).to(dtype)
    bias = torch.randn(3).to(dtype)
    (got,) = run_node(op_type, [x1, x2, bias], [(dtype, [4, 3])],
                      transpose_x1=t1, transpose_x2=t2)
    assert_close(got, _oracle(x1, x2, bias, t1, t2), "kernel")


@pytest.mark.parametrize("dtype", [F32, F16])
def test_batch_matmul_v3_broadcasts_batches_with_adjoints(dtype):
    torch.manual_seed(1)
    x1, x2, bias = torch.randn(2, 1, 5, 4).to(dtype), torch.randn(3, 6, 5).to(dtype), torch.randn(6).to(dtype)
    (got,) = run_node("BatchMatMulV3", [x1, x2, bias], [(dtype, [2, 3, 4, 6])],
                      adj_x1=True, adj_x2=True)
    assert_close(got, _oracle(x1, x2, bias, True, True), "kernel")


def test_batch_matmul_without_bias():
    x1, x2 = torch.randn(2, 3, 4), torch.randn(2, 4, 5)
    (got,) = run_node("BatchMatMul", [x1, x2], [(F32, [2, 3, 5])])
    assert_close(got, _oracle(x1, x2), "kernel")


@pytest.mark.parametrize("op_type", ["MatMulV3", "BatchMatMulV3"])
def test_quantised_offsets_are_refused(op_type):
    x = torch.randn(2, 2)
    with pytest.raises(Exception, match=rf"{op_type} \(node 'op'\): offset_w"):
        run_node(op_type, [x, x, None, torch.zeros(2, dtype=torch.int8)], [(F32, [2, 2])])
    with pytest.raises(Exception, match=rf"{op_type} \(node 'op'\): offset_x=3"):
        run_node(op_type, [x, x], [(F32, [2, 2])], offset_x=3)


def test_v3_takes_the_float_types_of_its_prototype():
    x = torch.ones(2, 2, dtype=torch.int32)
    with pytest.raises(Exception, match=r"MatMulV3 \(node 'op'\): x1 has dtype int32"):
        run_node("MatMulV3", [x, x], [(torch.int32, [2, 2])])

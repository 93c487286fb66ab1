"""npu_scatter_list (CANN ScatterList): eager against an element-by-element loop over the README's windows, and
compiled (TorchAir's converter: TensorMove copies + the ScatterList GE kernel) against eager."""
import pytest
import torch

from op_plugin._testing_harness import check_compiled

pytestmark = pytest.mark.usefixtures("torchair")
npu = torch.ops.npu


def _oracle(var, indices, updates, mask):
    out = [t.clone() for t in var]
    for i, tensor in enumerate(out):
        if mask is not None and int(mask[i]) == 0:
            continue
        start, rows = (int(indices[i][0]), min(int(indices[i][1]), updates.shape[2])) if indices.dim() == 2 \
            else (int(indices[i]), updates.shape[2])
        for b in range(tensor.shape[0]):
            for r in range(rows):
                for d in range(tensor.shape[2]):
                    tensor[b, start + r, d] = updates[i, b, r, d]
    return out


@pytest.mark.parametrize("two_d", [False, True])
@pytest.mark.parametrize("with_mask", [False, True])
def test_scatter_list_writes_each_window(two_d, with_mask):
    var = [torch.randn(2, 6, 4) for _ in range(3)]
    updates = torch.randn(3, 2, 2, 4)
    indices = torch.tensor([[0, 2], [4, 1], [3, 2]] if two_d else [0, 4, 3], dtype=torch.int32)
    mask = torch.tensor([1, 0, 7], dtype=torch.uint8) if with_mask else None
    before = [t.clone() for t in var]
    got = npu.npu_scatter_list(var, indices, updates, mask)
    for g, w in zip(got, _oracle(before, indices, updates, mask), strict=True):
        assert torch.equal(g, w)
    assert all(torch.equal(a, b) for a, b in zip(var, before, strict=True))   # out of place


def test_scatter_list_refuses_out_of_range_windows():
    var = [torch.zeros(1, 4, 2)]
    with pytest.raises(ValueError, match=r"npu_scatter_list: var\[0\]'s window \[-1, 1\)"):
        npu.npu_scatter_list(var, torch.tensor([-1], dtype=torch.int32), torch.ones(1, 1, 2, 2))
    with pytest.raises(ValueError, match=r"window \[3, 5\)"):
        npu.npu_scatter_list(var, torch.tensor([3], dtype=torch.int32), torch.ones(1, 1, 2, 2))


def test_scatter_list_compiled():
    var = [torch.randn(2, 8, 4).half() for _ in range(4)]
    updates = torch.randn(4, 2, 3, 4).half()
    indices = torch.tensor([0, 5, 2, 1], dtype=torch.int32)
    mask = torch.tensor([1, 1, 0, 1], dtype=torch.uint8)
    check_compiled(lambda a, b, c, d, i, u, m: npu.npu_scatter_list([a, b, c, d], i, u, m),
                   (*var, indices, updates, mask), "ScatterList", kind="npu_ops")

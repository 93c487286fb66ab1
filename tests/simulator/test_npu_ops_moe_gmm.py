"""npu_grouped_matmul (issue 23): the eager CPU kernel against products summed element by element in float64
(aclnnGroupedMatmul's y_i = x_i @ w_i + b_i per group), and through npugraph (TorchAir's GroupedMatmul) against
eager, static and with a dynamic token count."""
import pytest
import torch

from op_plugin._testing_harness import assert_close, check_compiled, check_dynamic_sizes

F32, F16, BF16 = torch.float32, torch.float16, torch.bfloat16
npu = torch.ops.npu
pytestmark = pytest.mark.usefixtures("torchair")


def _product(x, w, b=None):
    """x @ w (+ b) as explicit sums over K in float64."""
    y = (x.double().unsqueeze(-1) * w.double()).sum(-2)
    return y + b.double() if b is not None else y


def _group_of_rows(group_list, group_list_type, rows):
    ends, total = [], 0
    for v in group_list:
        total = total + v if group_list_type == 1 else v
        ends.append(total)
    owner = [None] * rows
    start = 0
    for g, end in enumerate(ends):
        for r in range(start, end):
            owner[r] = g
        start = end
    return owner


@pytest.mark.parametrize("dtype", (F32, F16, BF16))
def test_multi_x_multi_weight(dtype):
    xs = [torch.randn(m, 6).to(dtype) for m in (3, 1, 4)]
    ws = [torch.randn(6, n).to(dtype) for n in (5, 2, 3)]
    bias_dtype = F32 if dtype == BF16 else dtype
    bs = [torch.randn(n).to(bias_dtype) for n in (5, 2, 3)]
    got = npu.npu_grouped_matmul(xs, ws, bias=bs, split_item=0, group_type=-1)
    assert len(got) == 3
    for y, x, w, b in zip(got, xs, ws, bs, strict=True):
        assert_close(y, _product(x, w, b).to(dtype), "npu_ops")


@pytest.mark.parametrize("dtype", (F32, BF16))
@pytest.mark.parametrize("group_list_type,group_list", [(1, [2, 0, 3, 1]), (0, [2, 2, 5, 6]), (1, [1, 2, 0, 1])])
def test_rows_grouped_by_group_list(group_list_type, group_list, dtype):
    x, w = torch.randn(6, 8).to(dtype), torch.randn(4, 8, 5).to(dtype)  # one (E, K, N) weight: the MoE layout
    got, = npu.npu_grouped_matmul([x], [w], group_list=torch.tensor(group_list), split_item=2, group_type=0,
                                  group_list_type=group_list_type)
    owner = _group_of_rows(group_list, group_list_type, 6)
    for r in range(6):
        if owner[r] is None:  # past the last group: not written on an NPU, NaN here
            assert bool(got[r].isnan().all())
        else:
            assert_close(got[r], _product(x[r], w[owner[r]]).to(dtype), "npu_ops")


def test_list_overload_and_weight_list():
    x = torch.randn(5, 4)
    ws = [torch.randn(4, 3) for _ in range(2)]
    got, = npu.npu_grouped_matmul.List([x], ws, group_list=[2, 5], split_item=3)
    assert_close(got, torch.cat([_product(x[:2], ws[0]), _product(x[2:], ws[1])]).float(), "npu_ops")


def test_list_overload_compiled():
    """`.List` (an int list group_list) through TorchAir's own converter (the one of `.default`)."""
    def fn(x, w1, w2):
        return npu.npu_grouped_matmul.List([x], [w1, w2], group_list=[2, 5], split_item=3, group_type=0)[0]

    x, ws = torch.randn(5, 4), [torch.randn(4, 3) for _ in range(2)]
    run = check_compiled(fn, (x, *ws), "GroupedMatmul", kind="npu_ops")
    assert_close(run.got, torch.cat([_product(x[:2], ws[0]), _product(x[2:], ws[1])]).float(), "npu_ops")


def test_k_axis_grouped():
    x, w = torch.randn(3, 7), torch.randn(7, 2)
    got, = npu.npu_grouped_matmul([x], [w], group_list=torch.tensor([3, 3, 7]), split_item=3, group_type=2)
    want = torch.stack([_product(x[:, :3], w[:3]), torch.zeros(3, 2, dtype=torch.float64),
                        _product(x[:, 3:], w[3:])])
    assert_close(got, want.float(), "npu_ops")


def test_refusals():
    x, w = torch.randn(2, 4), torch.randn(1, 4, 3)
    with pytest.raises(ValueError, match="npu_grouped_matmul.*scale"):
        npu.npu_grouped_matmul([x], [w], scale=[torch.ones(3)], group_list=torch.tensor([2]), split_item=2,
                               group_type=0)
    with pytest.raises(ValueError, match="act_type"):
        npu.npu_grouped_matmul([x], [w], group_list=torch.tensor([2]), split_item=2, group_type=0, act_type=1)


@pytest.mark.parametrize("dtype", (F32, BF16))
def test_grouped_matmul_compiled(dtype):
    def fn(x, w, group_list, x2, w2):
        y, = npu.npu_grouped_matmul([x], [w], group_list=group_list, split_item=2, group_type=0, group_list_type=1)
        pair = npu.npu_grouped_matmul([x2, x], [w2, w[0]], split_item=0, group_type=-1)
        return y, pair[0], pair[1]
    args = (torch.randn(6, 8).to(dtype), torch.randn(3, 8, 4).to(dtype), torch.tensor([1, 3, 2]),
            torch.randn(2, 8).to(dtype), torch.randn(8, 5).to(dtype))
    check_compiled(fn, args, "GroupedMatmul", kind="npu_ops")


def test_grouped_matmul_compiled_dynamic_tokens():
    def fn(x, w, group_list):
        return npu.npu_grouped_matmul([x], [w], group_list=group_list, split_item=2, group_type=0,
                                      group_list_type=1)[0] * 2
    w = torch.randn(3, 8, 4)
    sizes = [(torch.randn(m, 8), w, torch.tensor(counts)) for m, counts in ((6, [1, 3, 2]), (9, [4, 0, 5]))]
    check_dynamic_sizes(fn, sizes, kind="npu_ops")


def test_multi_x_one_y():
    xs = [torch.randn(m, 6) for m in (2, 3)]
    ws = [torch.randn(6, 4) for _ in range(2)]
    got, = npu.npu_grouped_matmul(xs, ws, split_item=2, group_type=-1)
    assert_close(got, torch.cat([_product(x, w) for x, w in zip(xs, ws, strict=True)]).float(), "npu_ops")
    compiled = check_compiled(lambda a, b, w1, w2: npu.npu_grouped_matmul([a, b], [w1, w2], split_item=3,
                                                                          group_type=-1)[0],
                              (*xs, *ws), "GroupedMatmul", kind="npu_ops")
    assert compiled.got.shape == (5, 4)

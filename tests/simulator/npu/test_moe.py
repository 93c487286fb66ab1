"""torch_npu's MoE ops (npu/moe.py): eager == single-op graph,
bit for bit. Each eager op is an adapter over the GE kernel TorchAir's
converter lowers it to (``ge_op``), so the op called eagerly and compiled with npugraph (one node of that GE
type) must give the same bits, outputs and in-place arguments alike. Seeds: the valid calls of
``_npu_hostile_calls.VALID``.

MoE gating and routing ops (issue 23): eager CPU kernels against loops written index by index from CANN's
formulas (ops-transformer aclnnMoe* docs), and through npugraph (TorchAir's converters: MoeGatingTopKSoftmax,
MoeGatingTopK, MoeInitRouting, MoeInitRoutingV3, MoeFinalizeRouting(V2), MoeComputeExpertTokens) against eager.

npu_grouped_matmul (issue 23): the eager CPU kernel against products summed element by element in float64
(aclnnGroupedMatmul's y_i = x_i @ w_i + b_i per group), and through npugraph (TorchAir's GroupedMatmul) against
eager, static and with a dynamic token count.

npu_moe_init_routing's row_idx (issue 23): any permutation of 0..N*K-1 gives CANN's documented outputs
(checked against the doc's formula written as a loop: a stable sort by expert, expanded_row_idx[src] = dst,
expanded_x[dst] = x[src % N]); anything else (TorchAir's declared case draws randn cast to int32:
repeats and negatives) is refused by name, because the formula then writes entries twice or outside
the output and leaves others unwritten.

npu_moe_token_permute / npu_moe_token_unpermute (issue 23): eager against loops from torch_npu's docs
(permuted_tokens[sorted_indices[i]] = tokens[i // topK], tokens sorted by expert, stable; unpermute sums
probs * permuted rows back per token), and compiled through op_plugin's converters (TorchAir has none):
MoeInitRoutingV3 and MoeFinalizeRoutingV2, as the aclnn calls use them on Ascend 950."""
import math

import pytest
import torch

from op_plugin._testing_harness import assert_close, check_compiled, check_dynamic_sizes, run_node

from .._npu_hostile_calls import VALID
from .graph_equal import assert_op_eager_equals_graph

pytestmark = pytest.mark.usefixtures("torchair")

GE_TYPES = {
    "npu_moe_gating_top_k_softmax": "MoeGatingTopKSoftmax",
    "npu_moe_gating_top_k": "MoeGatingTopK",
    "npu_moe_init_routing": "MoeInitRouting",
    "npu_moe_init_routing_v2": "MoeInitRoutingV3",
    "npu_moe_finalize_routing": "MoeFinalizeRouting",
    "npu_moe_compute_expert_tokens": "MoeComputeExpertTokens",
    "npu_grouped_matmul": "GroupedMatmul",
    "npu_grouped_matmul.List": "GroupedMatmul",
}


@pytest.mark.parametrize("name", sorted(GE_TYPES))
def test_eager_equals_single_op_graph(name):
    # npu_moe_init_routing_v2's valid call leaves active_expert_range out: TorchAir's converter would write its own
    # default None into the node (TypeError: must assign iterable) but for _lowering/schema_defaults.py (issue 34)
    assert_op_eager_equals_graph(name, GE_TYPES[name], VALID[name])


# ---- moved from tests/simulator/test_npu_ops_moe.py ----

F32, F16, BF16 = torch.float32, torch.float16, torch.bfloat16
npu = torch.ops.npu


def _ranked(values):
    """Indices of `values` (a list) largest first, ties to the lower index."""
    return sorted(range(len(values)), key=lambda i: (-values[i], i))


def _softmax_row(row):
    top = max(row)
    exps = [math.exp(v - top) for v in row]
    return [e / sum(exps) for e in exps]


@pytest.mark.parametrize("dtype", (F32, F16, BF16))
@pytest.mark.parametrize("shape", [(5, 8), (2, 3, 6)])
def test_gating_top_k_softmax(shape, dtype):
    x, k = torch.randn(shape).to(dtype), 3
    y, idx, row_idx = npu.npu_moe_gating_top_k_softmax(x, None, k=k)
    flat = x.float().reshape(-1, shape[-1]).tolist()
    n = len(flat)
    want_y, want_idx, want_rows = [], [], []
    for r, row in enumerate(flat):
        probs = _softmax_row(row)
        best = _ranked(probs)[:k]
        want_y.append([probs[i] for i in best])
        want_idx.append(best)
        want_rows.append([j * n + r for j in range(k)])
    assert_close(y, torch.tensor(want_y).to(dtype).reshape(y.shape), "npu_ops")
    assert idx.dtype == torch.int32 and idx.reshape(-1, k).tolist() == want_idx
    assert row_idx.reshape(-1, k).tolist() == want_rows


def test_gating_top_k_softmax_finished_rows_get_expert_e():
    x, finished = torch.randn(4, 6), torch.tensor([False, True, False, True])
    _, idx, _ = npu.npu_moe_gating_top_k_softmax(x, finished, k=2)
    assert idx[1].tolist() == [6, 6] and idx[3].tolist() == [6, 6] and int(idx[0].max()) < 6


def _gating_oracle(row, bias, k, k_group, groups, mode, renorm, norm_type, factor, eps):
    if norm_type == 0:
        norm = _softmax_row(row)
    elif norm_type == 1:
        norm = [1 / (1 + math.exp(-v)) for v in row]
    else:
        norm = [math.sqrt(math.log1p(math.exp(v))) for v in row]
    value = [n + b for n, b in zip(norm, bias, strict=True)]
    size = len(row) // groups
    if groups > 1:
        scores = []
        for g in range(groups):
            members = sorted(value[g * size:(g + 1) * size], reverse=True)
            scores.append(members[0] if mode == 0 else members[0] + members[1])
        chosen = set(_ranked(scores)[:k_group])
        value = [v if i // size in chosen else -math.inf for i, v in enumerate(value)]
    best = _ranked(value)[:k]
    y = [norm[i] for i in best]
    if norm_type in (1, 2) or renorm:
        total = sum(y)
        y = [v / (total + eps) for v in y]
    return [v * factor for v in y], best, norm


@pytest.mark.parametrize("dtype", (F32, BF16))
@pytest.mark.parametrize("norm_type,renorm,groups,k_group,mode", [
    (1, 0, 4, 2, 1),   # DeepSeek-V3: sigmoid, bias, group top-2 sum, renormalised
    (1, 0, 4, 2, 0),
    (0, 0, 1, 1, 0),   # plain softmax top-k
    (0, 1, 2, 1, 0),
    (2, 0, 1, 1, 0),
])
def test_gating_top_k(norm_type, renorm, groups, k_group, mode, dtype):
    x, bias = torch.randn(6, 16).to(dtype), torch.randn(16).to(dtype) * 0.1
    k, factor, eps = 3, 2.5, 1e-20
    y, idx, norm = npu.npu_moe_gating_top_k(x, k, bias=bias, k_group=k_group, group_count=groups,
                                            group_select_mode=mode, renorm=renorm, norm_type=norm_type,
                                            out_flag=True, routed_scaling_factor=factor, eps=eps)
    for r in range(6):
        want_y, want_idx, want_norm = _gating_oracle(x[r].float().tolist(), bias.float().tolist(), k, k_group,
                                                     groups, mode, renorm, norm_type, factor, eps)
        assert idx[r].tolist() == want_idx
        assert_close(y[r], torch.tensor(want_y).to(dtype), "npu_ops")
        assert_close(norm[r], torch.tensor(want_norm), "npu_ops")


def test_gating_top_k_refusals():
    x = torch.randn(2, 8)
    with pytest.raises(NotImplementedError, match="npu_moe_gating_top_k.*hash mode"):
        npu.npu_moe_gating_top_k(x, 2, input_ids=torch.zeros(2, dtype=torch.int32),
                                 tid2eid=torch.zeros(4, 2, dtype=torch.int32))
    with pytest.raises(ValueError, match="k_group"):
        npu.npu_moe_gating_top_k(x, 2, k_group=3, group_count=2)
    assert bool(npu.npu_moe_gating_top_k(x, 2)[2].isnan().all())  # out_flag False: y2 not written


def _routing_oracle_v1(x, row_idx, expert_idx, active_num):
    n, k = expert_idx.shape
    pairs = sorted((int(expert_idx[i, j]), i * k + j, int(row_idx[i, j])) for i in range(n) for j in range(k))
    expanded_row_idx = [0] * (n * k)
    for position, (_, _, src) in enumerate(pairs):
        expanded_row_idx[src] = position
    rows = [x[src % n] for _, _, src in pairs[:min(n, active_num) * k]]
    return torch.stack(rows), expanded_row_idx, [e for e, _, _ in pairs]


@pytest.mark.parametrize("active_num", [5, 3])
def test_init_routing(active_num):
    n, k, e = 5, 2, 4
    x = torch.randn(n, 6)
    _, expert_idx, row_idx = npu.npu_moe_gating_top_k_softmax(torch.randn(n, e), None, k=k)
    got_x, got_rows, got_experts = npu.npu_moe_init_routing(x, row_idx, expert_idx, active_num)
    want_x, want_rows, want_experts = _routing_oracle_v1(x, row_idx, expert_idx, active_num)
    assert torch.equal(got_x, want_x)
    assert got_rows.tolist() == want_rows and got_experts.tolist() == want_experts


def _routing_oracle_v2(x, expert_idx, start, end, active_num):
    n, k = expert_idx.shape
    valid = sorted((int(expert_idx[i, j]), i * k + j) for i in range(n) for j in range(k)
                   if start <= expert_idx[i, j] < end)
    rows = n * k if active_num <= 0 else min(active_num, n * k)
    gather = [-1] * (n * k)
    for position, (_, flat) in enumerate(valid):
        gather[flat] = position
    counts = [sum(1 for ex, _ in valid if ex == ex_id) for ex_id in range(start, end)]
    expanded = [x[flat // k] for _, flat in valid[:rows]]
    return expanded, gather, counts, [flat for _, flat in valid]


@pytest.mark.parametrize("dtype", (F32, BF16))
@pytest.mark.parametrize("start,end,active_num", [(0, 8, -1), (2, 6, -1), (0, 8, 7)])
def test_init_routing_v2_dropless(start, end, active_num, dtype):
    n, k, e = 6, 3, 8
    x, expert_idx = torch.randn(n, 5).to(dtype), torch.randint(0, e, (n, k), dtype=torch.int32)
    scale = torch.rand(n)
    for num_type in (0, 1, 2):
        ex, rows, counts, ex_scale = npu.npu_moe_init_routing_v2(
            x, expert_idx, scale=scale, active_num=active_num, expert_num=e, expert_tokens_num_type=num_type,
            expert_tokens_num_flag=True, active_expert_range=[start, end])
        want_x, want_rows, want_counts, order = _routing_oracle_v2(x, expert_idx, start, end, active_num)
        assert torch.equal(ex[:len(want_x)], torch.stack(want_x)) and rows.tolist() == want_rows
        assert torch.equal(ex_scale[:len(want_x)], torch.stack([scale[f // k] for f in order[:len(want_x)]]))
        if num_type == 1:
            assert counts.tolist() == want_counts
        elif num_type == 0:
            assert counts.tolist() == [sum(want_counts[:i + 1]) for i in range(len(want_counts))]
        else:
            pairs = [[start + i, c] for i, c in enumerate(want_counts) if c]
            assert counts[:len(pairs) + 1].tolist() == pairs + [[0, 0]][:e - len(pairs)]
    _, scatter, _, _ = npu.npu_moe_init_routing_v2(x, expert_idx, expert_num=e, row_idx_type=1,
                                                   active_expert_range=[start, end])
    assert scatter[:len(order)].tolist() == order
    assert bool((scatter[len(order):] == -1).all())  # not written on an NPU


def test_init_routing_v2_drop_pad():
    n, k, e, capacity = 6, 2, 4, 2
    x, expert_idx = torch.randn(n, 3), torch.randint(0, e, (n, k), dtype=torch.int32)
    ex, rows, counts, _ = npu.npu_moe_init_routing_v2(x, expert_idx, expert_num=e, expert_capacity=capacity,
                                                     drop_pad_mode=1, expert_tokens_num_type=1,
                                                     expert_tokens_num_flag=True)
    want = torch.zeros(e, capacity, 3)
    want_rows, fill = [-1] * (n * k), [0] * e
    for _, flat in sorted((int(expert_idx[i, j]), i * k + j) for i in range(n) for j in range(k)):
        ex_id = int(expert_idx.reshape(-1)[flat])
        if fill[ex_id] < capacity:
            want[ex_id, fill[ex_id]] = x[flat // k]
            want_rows[flat] = ex_id * capacity + fill[ex_id]
        fill[ex_id] += 1
    assert torch.equal(ex, want) and rows.tolist() == want_rows and counts.tolist() == fill


def test_init_routing_v2_dynamic_quant():
    n, k, e = 4, 2, 4
    x, expert_idx, smooth = torch.randn(n, 8), torch.randint(0, e, (n, k), dtype=torch.int32), torch.rand(e, 8) + 0.5
    q, _, _, scales = npu.npu_moe_init_routing_v2(x, expert_idx, scale=smooth, expert_num=e, quant_mode=1)
    _, _, _, order = _routing_oracle_v2(x, expert_idx, 0, e, -1)
    for position, flat in enumerate(order):
        row = [v * s for v, s in zip(x[flat // k].tolist(), smooth[int(expert_idx.reshape(-1)[flat])].tolist(),
                                     strict=True)]
        step = max(abs(v) for v in row) / 127
        assert abs(float(scales[position]) - step) < 1e-6
        assert q[position].tolist() == [round(v / step) for v in row]  # Python's round: half to even too


def test_init_routing_v2_refusals():
    x, idx = torch.randn(2, 4), torch.zeros(2, 2, dtype=torch.int32)
    with pytest.raises(NotImplementedError, match="npu_moe_init_routing_v2.*quant_mode 2"):
        npu.npu_moe_init_routing_v2(x, idx, expert_num=2, quant_mode=2)
    with pytest.raises(NotImplementedError, match="x_dtype"):
        npu.npu_moe_init_routing_v2(x, idx, expert_num=2, x_dtype=290)


@pytest.mark.parametrize("dtype", (F32, F16, BF16))
@pytest.mark.parametrize("mode", [0, 2])
def test_finalize_routing(mode, dtype):
    n, k, e, h = 4, 2, 3, 5
    expanded, skip1, skip2 = torch.randn(n * k, h).to(dtype), torch.randn(n, h).to(dtype), torch.randn(n, h).to(dtype)
    bias, scales = torch.randn(e, h).to(dtype), torch.rand(n, k).to(dtype)
    experts, rows = torch.randint(0, e, (n, k), dtype=torch.int32), torch.randperm(n * k).to(torch.int32)
    got = npu.npu_moe_finalize_routing(expanded, skip1, skip2, bias, scales, rows, experts, mode, k)
    want = torch.zeros(n, h)
    for i in range(n):
        for c in range(h):
            total = float(skip1[i, c]) + float(skip2[i, c])
            for j in range(k):
                r = int(rows[i + j * n]) if mode == 0 else int(rows[i * k + j])
                total += float(scales[i, j]) * (float(expanded[r, c]) + float(bias[int(experts[i, j]), c]))
            want[i, c] = total
    assert_close(got, want.to(dtype), "npu_ops")


def test_compute_expert_tokens():
    sorted_experts = torch.tensor([0, 0, 0, 1, 1, 3], dtype=torch.int32)
    got = npu.npu_moe_compute_expert_tokens(sorted_experts, 5)
    assert got.dtype == torch.int32
    assert got.tolist() == [sum(1 for v in sorted_experts.tolist() if v <= e) for e in range(5)]


@pytest.mark.parametrize("dtype", (F32, BF16))
def test_gating_and_routing_compiled(dtype):
    def fn(logits, x, bias):
        w, idx, rows = npu.npu_moe_gating_top_k_softmax(logits, None, k=2)
        ex, ex_rows, ex_experts = npu.npu_moe_init_routing(x, rows, idx, x.shape[0])
        tokens = npu.npu_moe_compute_expert_tokens(ex_experts, 4)
        out = npu.npu_moe_finalize_routing(ex * 2, x, None, bias, w, ex_rows, idx)
        y, topk, norm = npu.npu_moe_gating_top_k(logits, 2, bias=bias[0, :4], k_group=2, group_count=2, norm_type=1,
                                                 group_select_mode=1, out_flag=True, routed_scaling_factor=1.5)
        return out, tokens, y, topk, norm
    args = (torch.randn(6, 4).to(dtype), torch.randn(6, 8).to(dtype), torch.randn(4, 8).to(dtype))
    check_compiled(fn, args, ["MoeGatingTopKSoftmax", "MoeInitRouting", "MoeComputeExpertTokens",
                              "MoeFinalizeRouting", "MoeGatingTopK"], kind="npu_ops")


@pytest.mark.parametrize("drop_pad", [0, 1])
def test_init_routing_v2_compiled(drop_pad):
    def fn(x, expert_idx, scales):
        ex, rows, counts, _ = npu.npu_moe_init_routing_v2(
            x, expert_idx, active_num=x.shape[0] * 2, expert_num=4, expert_capacity=3 if drop_pad else -1,
            drop_pad_mode=drop_pad, expert_tokens_num_type=1, expert_tokens_num_flag=True,
            active_expert_range=[0, 4])
        out = npu.npu_moe_finalize_routing(ex, None, None, None, scales, rows, expert_idx, 3 if drop_pad else 2)
        return ex, rows, counts, out
    args = (torch.randn(5, 8), torch.randint(0, 4, (5, 2), dtype=torch.int32), torch.rand(5, 2))
    check_compiled(fn, args, ["MoeInitRoutingV3", "MoeFinalizeRoutingV2"], kind="npu_ops")


def test_init_routing_v2_dynamic_quant_compiled():
    def fn(x, expert_idx, smooth):
        return npu.npu_moe_init_routing_v2(x, expert_idx, scale=smooth, active_num=x.shape[0] * 2, expert_num=4,
                                           expert_tokens_num_type=1, expert_tokens_num_flag=True,
                                           active_expert_range=[0, 4], quant_mode=1)
    args = (torch.randn(5, 8), torch.randint(0, 4, (5, 2), dtype=torch.int32), torch.rand(4, 8) + 0.5)
    check_compiled(fn, args, "MoeInitRoutingV3", kind="npu_ops")


# ---- moved from tests/simulator/test_npu_ops_moe_gmm.py ----

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
    with pytest.raises(NotImplementedError, match="npu_grouped_matmul.*scale"):
        npu.npu_grouped_matmul([x], [w], scale=[torch.ones(3)], group_list=torch.tensor([2]), split_item=2,
                               group_type=0)
    with pytest.raises(NotImplementedError, match="act_type"):
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


# ---- moved from tests/simulator/test_npu_ops_moe_more.py ----

def _oracle(x, row_idx, expert_idx, active_num):
    n, k = expert_idx.shape
    pairs = sorted(range(n * k), key=lambda j: (int(expert_idx.reshape(-1)[j]), j))  # stable by expert
    sources = [int(row_idx.reshape(-1)[j]) for j in pairs]
    expanded_row_idx = [0] * (n * k)
    for dst, src in enumerate(sources):
        expanded_row_idx[src] = dst
    rows = [x[src % n] for src in sources[:min(n, active_num) * k]]
    return torch.stack(rows), torch.tensor(expanded_row_idx, dtype=torch.int32), \
        torch.tensor([int(expert_idx.reshape(-1)[j]) for j in pairs], dtype=torch.int32)


def test_any_permutation_row_idx_follows_the_formula():
    torch.manual_seed(3)
    x, expert_idx = torch.randn(5, 4), torch.randint(0, 4, (5, 2), dtype=torch.int32)
    row_idx = torch.randperm(10).to(torch.int32).reshape(5, 2)
    got = npu.npu_moe_init_routing(x, row_idx, expert_idx, 4)
    for g, w in zip(got, _oracle(x, row_idx, expert_idx, 4), strict=True):
        assert torch.equal(g, w)


def test_a_row_idx_that_is_no_permutation_is_refused():
    x, expert_idx = torch.randn(3, 4), torch.tensor([[1, 2], [0, 1], [0, 2]], dtype=torch.int32)
    row_idx = torch.tensor([[0, 0], [1, -1], [2, 5]], dtype=torch.int32)
    with pytest.raises(ValueError, match="npu_moe_init_routing: row_idx is not a permutation.*unwritten"):
        npu.npu_moe_init_routing(x, row_idx, expert_idx, 3)
    with pytest.raises(Exception, match="not a permutation") as error:
        run_node("MoeInitRouting", [x, row_idx, expert_idx], [(torch.float32, [6, 4]), (torch.int32, [6]),
                                                              (torch.int32, [6])], active_num=3, name="routing")
    assert "routing" in str(error.value)


# ---- moved from tests/simulator/test_npu_ops_moe_permute.py ----

def _permute_oracle(tokens, indices):
    topk = indices.shape[1] if indices.dim() == 2 else 1
    flat = indices.reshape(-1).tolist()
    order = sorted(range(len(flat)), key=lambda i: (flat[i], i))
    sorted_indices = [0] * len(flat)
    for position, i in enumerate(order):
        sorted_indices[i] = position
    return torch.stack([tokens[i // topk] for i in order]), sorted_indices


@pytest.mark.parametrize("dtype", (F32, BF16))
@pytest.mark.parametrize("index_dtype,shape", [(torch.int64, (5, 3)), (torch.int32, (6,))])
def test_permute(index_dtype, shape, dtype):
    tokens = torch.randn(shape[0], 4).to(dtype)
    indices = torch.randint(0, 6, shape, dtype=index_dtype)
    permuted, sorted_indices = npu.npu_moe_token_permute(tokens, indices)
    want, want_sorted = _permute_oracle(tokens, indices)
    assert torch.equal(permuted, want) and sorted_indices.tolist() == want_sorted
    cut, _ = npu.npu_moe_token_permute(tokens, indices, num_out_tokens=4)
    assert torch.equal(cut, want[:4])


@pytest.mark.parametrize("dtype", (F32, BF16))
def test_unpermute_restores_the_weighted_tokens(dtype):
    tokens, indices = torch.randn(5, 4).to(dtype), torch.randint(0, 6, (5, 2))
    probs = torch.rand(5, 2).to(dtype)
    permuted, sorted_indices = npu.npu_moe_token_permute(tokens, indices)
    got = npu.npu_moe_token_unpermute(permuted * 3, sorted_indices, probs)
    want = torch.zeros(5, 4)
    for t in range(5):
        for k in range(2):
            want[t] += float(probs[t, k]) * 3 * tokens[t].float()
    assert_close(got, want.to(dtype), "npu_ops")


def test_refusals_permute():
    tokens, indices = torch.randn(2, 4), torch.tensor([[0, 20000], [1, 2]])
    with pytest.raises(NotImplementedError, match="npu_moe_token_permute.*10240"):
        npu.npu_moe_token_permute(tokens, indices)
    with pytest.raises(ValueError, match="padded_mode"):
        npu.npu_moe_token_permute(tokens, indices % 4, padded_mode=True)


@pytest.mark.parametrize("num_out_tokens", [None, 7])
def test_permute_unpermute_compiled(num_out_tokens):
    def fn(tokens, indices, probs):
        permuted, sorted_indices = npu.npu_moe_token_permute(tokens, indices, num_out_tokens)
        out = npu.npu_moe_token_unpermute(permuted * 2, sorted_indices, probs) if num_out_tokens is None else None
        return permuted, sorted_indices, out
    args = (torch.randn(5, 4), torch.randint(0, 6, (5, 2)), torch.rand(5, 2))
    check_compiled(fn, args, "MoeInitRoutingV3", kind="npu_ops")


def test_permute_unpermute_compiled_dynamic_tokens():
    def fn(tokens, indices, probs):
        permuted, sorted_indices = npu.npu_moe_token_permute(tokens, indices)
        return npu.npu_moe_token_unpermute(permuted * 2, sorted_indices, probs)
    for n in (5, 8):
        args = (torch.randn(n, 4), torch.randint(0, 6, (n, 2), dtype=torch.int32), torch.rand(n, 2))
        check_compiled(fn, args, ["MoeInitRoutingV3", "MoeFinalizeRoutingV2"], kind="npu_ops", dynamic=True)

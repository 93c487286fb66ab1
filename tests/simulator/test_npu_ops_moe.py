"""MoE gating and routing ops (issue 23): eager CPU kernels against loops written index by index from CANN's
formulas (ops-transformer aclnnMoe* docs), and through npugraph (TorchAir's converters: MoeGatingTopKSoftmax,
MoeGatingTopK, MoeInitRouting, MoeInitRoutingV3, MoeFinalizeRouting(V2), MoeComputeExpertTokens) against eager."""
import math

import pytest
import torch

from op_plugin._testing_harness import assert_close, check_compiled

F32, F16, BF16 = torch.float32, torch.float16, torch.bfloat16
npu = torch.ops.npu
pytestmark = pytest.mark.usefixtures("torchair")


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
    with pytest.raises(ValueError, match="npu_moe_gating_top_k.*hash mode"):
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
    with pytest.raises(ValueError, match="npu_moe_init_routing_v2.*quant_mode 2"):
        npu.npu_moe_init_routing_v2(x, idx, expert_num=2, quant_mode=2)
    with pytest.raises(ValueError, match="x_dtype"):
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

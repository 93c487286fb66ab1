"""Mixture-of-experts routing GE ops (CANN ops-transformer `moe/`): gating top-k, init routing,
finalize routing, expert token counts. torch_npu's eager ops call the same CANN kernels (aclnn), so
`op_plugin._simulator.npu.moe` computes eager results with these functions too.

Semantics (ops-transformer docs `aclnn<Type>.md`, the op-plugin unit tests' numpy goldens):

- MoeGatingTopKSoftmax(x, finished; k): `softmax(x)` in float32, top-k; row_idx[n, j] = j * N + n
  (column-major over the N flattened rows); a finished row's expert indices are E (num_expert); its
  y is not documented (here: the top-k softmax values, as for any row).
- MoeGatingTopK(x, bias; k, k_group, group_count, group_select_mode, renorm, norm_type, ...):
  normOut = softmax / sigmoid / sqrt(softplus) (norm_type 0/1/2) in float32; normValue = normOut +
  bias; with group_count > 1 the experts form group_count groups scored by their max (mode 0) or
  the sum of their top 2 (mode 1), all but the best k_group groups are masked to -inf; expert_idx =
  top-k of normValue; y = normOut[expert_idx], divided by (its sum + eps) for norm_type 1/2 or
  renorm 1, times routed_scaling_factor. y2 is normOut when out_flag, else not written on an NPU
  (here NaN). The hash mode (input_ids, tid2eid) is not in the aclnn doc: refused.
- MoeInitRouting(x, row_idx, expert_idx; active_num): a stable sort of the flattened expert_idx
  carries row_idx along; expanded_row_idx[sorted_row_idx[i]] = i; expanded_x[i] =
  x[sorted_row_idx[i] % N] for the first min(N, active_num) * K rows.
- MoeInitRoutingV3 (torch's npu_moe_init_routing_v2): the same sort over the row-major index i*K+j,
  experts outside active_expert_range last; gather (row_idx_type 0, -1 for the dropped) or scatter
  (1) expanded_row_idx; token counts per expert (cumsum / count / key-value pairs); dropless
  (drop_pad_mode 0, first min(active_num, N*K) rows) or drop-pad ((E, C, H), the first C tokens of
  each expert, zero padding). quant_mode -1 (expanded_scale = scale of each row's token when
  given) and 1 (dynamic int8: per row s = max|x * smooth_scale[expert]| / 127, round half to even
  of x * smooth / s). Rows past the valid ones are not written on an NPU: here NaN (0 for int8; -1
  in scatter indices).
- MoeFinalizeRouting(V2): out = x1 + x2 + sum_k scales[i,k] * (expanded_x[r(i,k)] + bias[expert[i,k]])
  with r(i,k) = expanded_row_idx[i + k*N] (drop_pad_mode 0/1, MoeInitRouting's layout) or
  [i*K + k] (2/3, V2/V3's layout). Rounded as CANN's Ascend910B (A2) kernels round
  (ops-transformer moe/moe_finalize_routing(_v2)/op_kernel/*_fp_db*.h, *_bf16*.h, the SoC the simulator models):
  float16 and float32 compute in their own dtype, step by step, in the kernel's order: out = x1 (+ x2), then for
  k = 0..K-1: t = expanded_x row + bias, t = t * scale, out = out + t, each operation rounded to the dtype (without
  skips the first term starts out); bfloat16 computes the same steps in float32 and rounds once at the end,
  MoeFinalizeRouting (V1) half away from zero (CAST_ROUND), V2 half to even (CAST_RINT). In drop-pad modes (1/3)
  an index -1 (a dropped token) contributes a row of zeros: scale * bias[expert] is still added, as CANN's CPU
  golden computes (moe_finalize_routing_v2/tests/ut/op_kernel/finalize_routing_v2_data/gen_data.py) and the A2
  float16/float32 kernel that splits H (fp_cuth) does. CANN's kernels disagree here: those keeping a row of H in
  one pass (db, all-bias, cut-K, the bfloat16 ones) and Ascend 950's (arch35 h_full_load) skip the row, bias
  included; the simulator follows the golden, CANN's stated semantics (docs/torch-npu-ops.md).
  x2 without x1 is refused as CANN's A2 tiling and aclnn doc refuse it ("x1 not given, x2 may not be given").
- MoeComputeExpertTokens(sorted_experts; num_experts): for each expert e the end row of its run in
  the sorted list (binary search: how many entries are <= e).

Ties in every top-k and sort go to the lower index (the NPU kernels are deterministic; the order of
equal keys is the golden's stable order).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from ....._ge.reg_op import parse_reg_ops
from ...registry import ge_kernel, refuse
from ..common import require_dtype

_FLOATS = (torch.float16, torch.bfloat16, torch.float32)

# TorchAir's converter writes the attr `k` (ops-transformer's moe_finalize_routing_v2 proto spells
# it so); the pinned TorchAir's raw-op table has `K`: the prototype is declared with CANN's spelling.
_FINALIZE_V2 = parse_reg_ops('''
"""REG_OP(MoeFinalizeRoutingV2)
    .INPUT(expanded_x, TensorType({DT_FLOAT, DT_FLOAT16, DT_BF16}))
    .INPUT(expanded_row_idx, TensorType({DT_INT32}))
    .OPTIONAL_INPUT(x1, TensorType({DT_FLOAT, DT_FLOAT16, DT_BF16}))
    .OPTIONAL_INPUT(x2, TensorType({DT_FLOAT, DT_FLOAT16, DT_BF16}))
    .OPTIONAL_INPUT(bias, TensorType({DT_FLOAT, DT_FLOAT16, DT_BF16}))
    .OPTIONAL_INPUT(scales, TensorType({DT_FLOAT, DT_FLOAT16, DT_BF16}))
    .OPTIONAL_INPUT(expert_idx, TensorType({DT_INT32}))
    .OUTPUT(y, TensorType({DT_FLOAT, DT_FLOAT16, DT_BF16}))
    .ATTR(drop_pad_mode, Int, 0)
    .ATTR(k, Int, 1)
    .OP_END_FACTORY_REG(MoeFinalizeRoutingV2)
"""
''')["MoeFinalizeRoutingV2"]


def top_k(values: torch.Tensor, k: int):
    """Top-k along the last axis, largest first, ties to the lower index."""
    order = torch.sort(values, dim=-1, descending=True, stable=True).indices[..., :k]
    return values.gather(-1, order), order


def _unwritten(shape, dtype):
    """A buffer the NPU kernel does not write: NaN for floats, 0 for integers."""
    fill = float("nan") if dtype.is_floating_point else 0
    return torch.full(shape, fill, dtype=dtype)


@ge_kernel("MoeGatingTopKSoftmax")
def gating_top_k_softmax(x, finished, *, k):
    require_dtype("x", x, _FLOATS)
    if x.dim() not in (2, 3):
        refuse(f"x must be 2-D or 3-D, got {list(x.shape)}")
    experts = x.shape[-1]
    if not 0 < k <= min(experts, 1024):
        refuse(f"k {k} is not in (0, min({experts} experts, 1024)]")
    flat = x.reshape(-1, experts)
    rows = flat.shape[0]
    y, idx = top_k(torch.softmax(flat.float(), dim=-1), k)
    if finished is not None:
        if finished.dtype != torch.bool or tuple(finished.shape) != tuple(x.shape[:-1]):
            refuse(f"finished must be bool of shape {list(x.shape[:-1])}, got {finished.dtype} {list(finished.shape)}")
        idx = torch.where(finished.reshape(-1, 1), torch.full_like(idx, experts), idx)
    row_idx = torch.arange(k).unsqueeze(0) * rows + torch.arange(rows).unsqueeze(1)
    shape = (*x.shape[:-1], k)
    return y.to(x.dtype).reshape(shape), idx.to(torch.int32).reshape(shape), row_idx.to(torch.int32).reshape(shape)


def _norm(x, norm_type):
    if norm_type == 0:
        return torch.softmax(x, dim=-1)
    if norm_type == 1:
        return torch.sigmoid(x)
    if norm_type == 2:
        return torch.sqrt(F.softplus(x))
    return refuse(f"norm_type {norm_type} is not 0 (softmax), 1 (sigmoid) or 2 (sqrt softplus)")


@ge_kernel("MoeGatingTopK")
def gating_top_k(x, bias, input_ids, tid2eid, *, k, k_group, group_count, group_select_mode, renorm, norm_type,
                 out_flag, routed_scaling_factor, eps):
    require_dtype("x", x, _FLOATS)
    if input_ids is not None or tid2eid is not None:
        refuse("the hash mode (input_ids, tid2eid) is not in CANN's aclnnMoeGatingTopK doc: not simulated")
    if x.dim() != 2:
        refuse(f"x must be 2-D (tokens, experts), got {list(x.shape)}")
    rows, experts = x.shape
    if group_count <= 0 or experts % group_count or experts // group_count <= group_select_mode:
        refuse(f"{experts} experts do not split into group_count {group_count} groups of more than "
               f"group_select_mode {group_select_mode} experts")
    if not 1 <= k_group <= group_count:
        refuse(f"k_group {k_group} is not in [1, group_count {group_count}]")
    if not 1 <= k <= experts // group_count * k_group:
        refuse(f"k {k} is not in [1, {experts // group_count * k_group}] (experts / group_count * k_group)")
    if group_select_mode not in (0, 1) or renorm not in (0, 1):
        refuse(f"group_select_mode {group_select_mode} / renorm {renorm} must each be 0 or 1")
    norm_out = _norm(x.float(), norm_type)
    value = norm_out
    if bias is not None:
        if tuple(bias.shape) != (experts,):
            refuse(f"bias must have shape [{experts}], got {list(bias.shape)}")
        value = norm_out + bias.float()
    if group_count > 1:
        grouped = value.reshape(rows, group_count, experts // group_count)
        score = grouped.amax(-1) if group_select_mode == 0 else top_k(grouped, 2)[0].sum(-1)
        keep = torch.zeros(rows, group_count, dtype=torch.bool)
        keep.scatter_(1, top_k(score, k_group)[1], True)
        value = grouped.masked_fill(~keep.unsqueeze(-1), float("-inf")).reshape(rows, experts)
    idx = top_k(value, k)[1]
    y = norm_out.gather(1, idx)
    if norm_type in (1, 2) or renorm == 1:
        y = y / (y.sum(-1, keepdim=True) + eps)
    y = y * routed_scaling_factor
    y2 = norm_out if out_flag else _unwritten((rows, experts), torch.float32)
    return y.to(x.dtype), idx.to(torch.int32), y2


def _stable_sort(keys):
    return torch.sort(keys, stable=True)


@ge_kernel("MoeInitRouting", accepts={"x": _FLOATS})
def init_routing(x, row_idx, expert_idx, *, active_num):
    if x.dim() != 2 or expert_idx.dim() != 2 or row_idx.shape != expert_idx.shape or x.shape[0] != expert_idx.shape[0]:
        refuse(f"x {list(x.shape)} must be (N, H) and row_idx {list(row_idx.shape)} / expert_idx "
               f"{list(expert_idx.shape)} both (N, K)")
    if active_num < 0:
        refuse(f"active_num {active_num} is negative")
    require_dtype("row_idx", row_idx, (torch.int32,))
    require_dtype("expert_idx", expert_idx, (torch.int32,))
    rows, k = expert_idx.shape
    flat_rows = row_idx.reshape(-1).long()
    if not torch.equal(torch.sort(flat_rows).values, torch.arange(rows * k)):
        # CANN's formula expanded_row_idx[sorted_row_idx[i]] = i defines every output entry only for a
        # permutation: a repeated value is written twice (which write wins is the kernel's order), a
        # missing one never (the output buffer's old bytes), a negative or too large one outside it.
        refuse("row_idx is not a permutation of 0..N*K-1 (npu_moe_gating_top_k_softmax's row_idx): CANN's "
               "expanded_row_idx[sorted_row_idx[i]] = i then writes some entries twice or outside the output and "
               "leaves others unwritten")
    sorted_expert, order = _stable_sort(expert_idx.reshape(-1).long())
    sorted_row = flat_rows[order]
    expanded_row_idx = torch.empty(rows * k, dtype=torch.int32)
    expanded_row_idx[sorted_row] = torch.arange(rows * k, dtype=torch.int32)
    expanded_x = x[sorted_row[:min(rows, active_num) * k] % rows]
    return expanded_x.contiguous(), expanded_row_idx, sorted_expert.to(torch.int32)


def _token_counts(valid_experts, start, end, expert_num, num_type):
    counts = torch.bincount(valid_experts - start, minlength=end - start).to(torch.int64)
    if num_type == 0:
        return counts.cumsum(0)
    if num_type == 1:
        return counts
    if num_type == 2:  # (expert, count) pairs of the experts with tokens, then one (0, 0) end mark
        present = torch.nonzero(counts).reshape(-1)
        pairs = torch.zeros(expert_num, 2, dtype=torch.int64)
        pairs[:present.numel(), 0] = present + start
        pairs[:present.numel(), 1] = counts[present]
        return pairs
    return refuse(f"expert_tokens_num_type {num_type} is not 0 (cumsum), 1 (count) or 2 (key-value)")


def _dynamic_quant(rows, smooth):
    """Per-row int8 dynamic quantisation: s = max|rows * smooth| / 127, q = round(rows * smooth / s)."""
    scaled = rows * smooth if smooth is not None else rows
    scale = scaled.abs().amax(-1) / 127.0
    quant = torch.round(scaled / scale.unsqueeze(-1)).clamp(-128, 127).to(torch.int8)
    return quant, scale


@ge_kernel("MoeInitRoutingV3", accepts={"expert_idx": (torch.int32,), "scale": (torch.float32,)})
def init_routing_v3(x, expert_idx, scale, offset, *, active_num, expert_capacity, expert_num, drop_pad_mode,
                    expert_tokens_num_type, expert_tokens_num_flag, quant_mode, active_expert_range, row_idx_type):
    if x.dim() != 2 or expert_idx.dim() != 2 or x.shape[0] != expert_idx.shape[0]:
        refuse(f"x {list(x.shape)} must be (N, H) and expert_idx {list(expert_idx.shape)} (N, K)")
    if expert_tokens_num_type not in (0, 1, 2):
        refuse(f"expert_tokens_num_type {expert_tokens_num_type} is not 0 (cumsum), 1 (count) or 2 (key-value)")
    require_dtype("x", x, _FLOATS + ((torch.int8,) if quant_mode == -1 else ()))
    if quant_mode not in (-1, 1):
        refuse(f"quant_mode {quant_mode}: only -1 (none) and 1 (dynamic int8) are simulated; static (0) is "
               "unsupported in torch_npu's doc and the fp8/hifloat8/MX/int4 modes have no CPU format here")
    if offset is not None:
        refuse("offset is given: it is used by static quantisation only, which is not simulated")
    rows, k = expert_idx.shape
    start, end = (list(active_expert_range) or [0, expert_num])[:2]
    if expert_num <= 0 or not 0 <= start < end <= expert_num:
        refuse(f"expert_num {expert_num} / active_expert_range {list(active_expert_range)} do not give "
               "0 <= expert_start < expert_end <= expert_num")
    flat = expert_idx.reshape(-1).long()
    in_range = (flat >= start) & (flat < end)
    available = int(in_range.sum())
    keys = torch.where(flat < start, torch.iinfo(torch.int32).max, flat)  # -1 and below-range sort last
    sorted_expert, order = _stable_sort(keys)
    counts = (_token_counts(sorted_expert[:available], start, end, expert_num, expert_tokens_num_type)
              if expert_tokens_num_flag else torch.zeros((), dtype=torch.int64))
    if drop_pad_mode == 1:
        return _drop_pad(x, scale, sorted_expert[:available], order[:available], k, expert_num, expert_capacity,
                         quant_mode, row_idx_type, counts, (start, end))
    if drop_pad_mode != 0:
        refuse(f"drop_pad_mode {drop_pad_mode} is not 0 (dropless) or 1 (drop-pad)")
    out_rows = rows * k if active_num <= 0 else min(active_num, rows * k)
    valid = min(out_rows, available)
    if row_idx_type == 1:
        expanded_row_idx = order.to(torch.int32)
        expanded_row_idx[available:] = -1  # past the available ones not written on an NPU: -1 shows it
    elif row_idx_type == 0:
        expanded_row_idx = torch.full((rows * k,), -1, dtype=torch.int32)
        expanded_row_idx[order[:available]] = torch.arange(available, dtype=torch.int32)
    else:
        refuse(f"row_idx_type {row_idx_type} is not 0 (gather) or 1 (scatter)")
    tokens = order[:valid] // k
    expanded_scale = _unwritten((out_rows,), torch.float32)
    if quant_mode == 1:
        if x.dtype == torch.int8:
            refuse("x is int8: dynamic quantisation of int8 input is undefined (CANN: outputs meaningless)")
        smooth = _smooth_scales(scale, sorted_expert[:valid] - start, end - start, x.shape[1])
        quant, row_scale = _dynamic_quant(x[tokens].float(), smooth)
        expanded_x = _unwritten((out_rows, x.shape[1]), torch.int8)
        expanded_x[:valid], expanded_scale[:valid] = quant, row_scale
    else:
        expanded_x = _unwritten((out_rows, x.shape[1]), x.dtype)
        expanded_x[:valid] = x[tokens]
        if scale is not None:
            if tuple(scale.shape) != (rows,):
                refuse(f"scale must be (N,) = ({rows},) without quantisation, got {list(scale.shape)}")
            expanded_scale[:valid] = scale.float()[tokens]
    return expanded_x, expanded_row_idx, counts, expanded_scale


def _smooth_scales(scale, experts_from_start, span, hidden):
    if scale is None:
        return None
    if scale.dim() != 2 or scale.shape[1] != hidden or scale.shape[0] not in (1, span):
        refuse(f"dynamic quantisation scale must be (1 or {span}, {hidden}), got {list(scale.shape)}")
    return scale.float()[0] if scale.shape[0] == 1 else scale.float()[experts_from_start]


def _drop_pad(x, scale, sorted_expert, order, k, expert_num, capacity, quant_mode, row_idx_type, counts, span):
    if span != (0, expert_num):
        refuse(f"drop-pad needs active_expert_range [0, expert_num {expert_num}], got {list(span)}")
    if quant_mode != -1 or row_idx_type != 0:
        refuse(f"drop-pad with quant_mode {quant_mode} / row_idx_type {row_idx_type}: only quant_mode -1 with "
               "gather indices (row_idx_type 0) is simulated (the padding rows' scales are undefined)")
    if not 0 < capacity <= x.shape[0]:
        refuse(f"expert_capacity {capacity} is not in (0, N = {x.shape[0]}]")
    slot = torch.arange(sorted_expert.numel()) - torch.searchsorted(sorted_expert, sorted_expert)  # rank in expert
    kept = slot < capacity
    dest = sorted_expert[kept] * capacity + slot[kept]
    expanded_row_idx = torch.full((x.shape[0] * k,), -1, dtype=torch.int32)
    expanded_row_idx[order[kept]] = dest.to(torch.int32)
    expanded_x = torch.zeros(expert_num * capacity, x.shape[1], dtype=x.dtype)
    expanded_x[dest] = x[order[kept] // k]
    expanded_scale = torch.zeros(expert_num * capacity, dtype=torch.float32)
    if scale is not None:
        expanded_scale[dest] = scale.float()[order[kept] // k]
    return expanded_x.reshape(expert_num, capacity, x.shape[1]), expanded_row_idx, counts, expanded_scale


def _round_half_away_bf16(values):
    """float32 -> bfloat16 rounding half away from zero (AscendC CAST_ROUND), NaN kept."""
    bits = values.contiguous().view(torch.int32).to(torch.int64)
    magnitude = ((bits & 0x7FFFFFFF) + 0x8000) & 0x7FFF0000
    rounded = (magnitude | (bits & -0x80000000)).to(torch.int32).view(torch.float32).to(torch.bfloat16)
    return torch.where(torch.isnan(values), values.to(torch.bfloat16), rounded)


def finalize_routing(expanded_x, expanded_row_idx, x1, x2, bias, scales, expert_idx, drop_pad_mode, k, v1=False):
    """out = x1 + x2 + sum_k scales * (expanded_x[row(i, k)] + bias[expert(i, k)]), rounded as A2's kernels
    round (module docstring)."""
    for name, tensor in (("expanded_x", expanded_x), ("x1", x1), ("x2", x2), ("bias", bias), ("scales", scales)):
        if tensor is not None:
            require_dtype(name, tensor, _FLOATS)
    if drop_pad_mode not in (0, 1, 2, 3):
        refuse(f"drop_pad_mode {drop_pad_mode} is not in [0, 3]")
    if x2 is not None and x1 is None:
        refuse("x2 (skip2) is given without x1 (skip1): CANN refuses it (aclnnMoeFinalizeRoutingV2: x2 may not be "
               "given without x1; the A2 tiling checks it)")
    if bias is not None and expert_idx is None:
        refuse("bias needs expert_idx (export_for_source_row)")
    top = scales.shape[1] if scales is not None else k
    total = expanded_row_idx.numel()
    if top <= 0 or total % top:
        refuse(f"expanded_row_idx has {total} entries, not a multiple of K = {top}")
    rows, hidden = total // top, expanded_x.shape[-1]
    if expanded_x.dim() != (2 if drop_pad_mode in (0, 2) else 3):
        refuse(f"expanded_x {list(expanded_x.shape)} must be {'2' if drop_pad_mode in (0, 2) else '3'}-D "
               f"in drop_pad_mode {drop_pad_mode}")
    for name, tensor, want in (("x1", x1, [rows, hidden]), ("x2", x2, [rows, hidden]), ("scales", scales, [rows, top]),
                               ("expert_idx", expert_idx, [rows, top])):
        if tensor is not None and list(tensor.shape) != want:
            refuse(f"{name} {list(tensor.shape)} must be {want} (expanded_row_idx gives {rows} rows and K = {top})")
    if bias is not None and (bias.dim() != 2 or bias.shape[1] != hidden):
        refuse(f"bias {list(bias.shape)} must be (E, {hidden})")
    if expert_idx is not None and expert_idx.numel() and bias is not None and bool(
            ((expert_idx < 0) | (expert_idx >= bias.shape[0])).any()):
        refuse(f"expert_idx has entries outside [0, {bias.shape[0]}) (bias's experts)")
    dtype = expanded_x.dtype
    flat_rows = expanded_x.reshape(-1, hidden)
    index = expanded_row_idx.long()
    pos = index.reshape(top, rows).t() if drop_pad_mode in (0, 1) else index.reshape(rows, top)
    dropped = pos < 0
    if (bool(dropped.any()) and drop_pad_mode in (0, 2)) or bool((pos >= flat_rows.shape[0]).any()):
        refuse(f"expanded_row_idx has entries outside [0, {flat_rows.shape[0]}) (-1 only in drop-pad modes 1/3)")
    # The kernel's arithmetic: float16/float32 in their dtype, each step rounded (float32 ops, then one rounding:
    # exact for float16, whose products and sums of two values float32 rounds correctly); bfloat16 in float32.
    step = dtype if dtype != torch.bfloat16 else torch.float32

    def rounded(value):
        return value.to(step) if step != torch.float32 else value

    out = None
    if x1 is not None:
        out = x1.to(step)
        if x2 is not None:
            out = rounded(out.float() + x2.to(step).float())
    experts = expert_idx.long().reshape(rows, top) if bias is not None else None
    for j in range(top):
        gone = dropped[:, j:j + 1]
        # a dropped token's row is zeros: it still adds scale * bias[expert], as CANN's golden computes
        term = torch.where(gone, torch.zeros((), dtype=step), flat_rows[pos[:, j].clamp(min=0)].to(step))
        if bias is not None:
            term = rounded(term.float() + bias[experts[:, j]].to(step).float())
        if scales is not None:
            term = rounded(term.float() * scales[:, j:j + 1].to(step).float())
        out = term if out is None else rounded(out.float() + term.float())
    if out is None:
        out = torch.zeros(rows, hidden, dtype=step)
    if dtype == torch.bfloat16:
        return _round_half_away_bf16(out) if v1 else out.to(dtype)
    return out.to(dtype)


@ge_kernel("MoeFinalizeRouting",
           accepts={"expanded_row_idx": (torch.int32,), "expanded_expert_idx": (torch.int32,)})
def moe_finalize_routing(expanded_x, x1, x2, bias, scales, expanded_row_idx, expanded_expert_idx):
    return finalize_routing(expanded_x, expanded_row_idx, x1, x2, bias, scales, expanded_expert_idx, 0, 1,
                            v1=True)


@ge_kernel("MoeFinalizeRoutingV2", prototype=_FINALIZE_V2,
           accepts={"expanded_row_idx": (torch.int32,), "expert_idx": (torch.int32,)})
def moe_finalize_routing_v2(expanded_x, expanded_row_idx, x1, x2, bias, scales, expert_idx, *, drop_pad_mode, k):
    return finalize_routing(expanded_x, expanded_row_idx, x1, x2, bias, scales, expert_idx, drop_pad_mode, k)


@ge_kernel("MoeComputeExpertTokens")
def compute_expert_tokens(sorted_experts, *, num_experts):
    if sorted_experts.dim() != 1 or sorted_experts.dtype != torch.int32:
        refuse(f"sorted_experts must be 1-D int32, got {sorted_experts.dtype} {list(sorted_experts.shape)}")
    if not 0 < num_experts <= 2048:
        refuse(f"num_experts {num_experts} is not in (0, 2048]")
    values = sorted_experts.long()
    if values.numel() and (bool((values[1:] < values[:-1]).any()) or int(values.min()) < 0
                           or int(values.max()) >= num_experts):
        refuse(f"sorted_experts is not a non-decreasing list of experts in [0, {num_experts})")
    return torch.searchsorted(values, torch.arange(num_experts), right=True).to(torch.int32)

"""Mixture-of-experts GE ops (CANN ops-transformer `gmm/grouped_matmul`): GroupedMatmul, the
expert matmul.

GroupedMatmul is simulated in its non-quantised form only: every scale, offset and antiquant list
must be empty (TorchAir fills an empty list with one 0-element tensor) and act_type 0. Scenarios
(x / weight / y single or multi tensor, as aclnnGroupedMatmul names them):

- multi-multi-multi (split_item 0/1, group_type -1): y_i = x_i @ w_i + b_i;
- single-multi-single (split_item 2/3, group_type 0): the rows of x are grouped by group_list
  (cumulative ends, group_list_type 0, or counts, type 1); y[rows_i] = x[rows_i] @ w_i + b_i. The
  weights are E 2-D tensors or one (E, K, N) tensor. Rows past the last group are "not updated"
  on the NPU (their contents are whatever the buffer held): here they are NaN, so a graph that
  reads them shows it instead of getting a plausible number.
- multi-multi-single (split_item 2/3, group_type -1, no group_list): y = cat_i(x_i @ w_i + b_i) along M.
- single-single-single (split_item 2/3, group_type 2): the K axis is grouped: one x (M, K) and one
  weight (K, N), y[i] = x[:, ks_i] @ weight[ks_i, :], y of shape (groups, M, N) (the weight
  gradient of a grouped matmul; an empty group gives zeros, the value of an empty sum).

Products accumulate in float32 and round once to x's dtype (bias float32 for bfloat16 x, per the
prototype's dtype table).
"""
from __future__ import annotations

import torch
from ...registry import ge_kernel, refuse
from ..common import opmath, require_dtype

_GMM_FLOATS = (torch.float16, torch.bfloat16, torch.float32)


def _present(tensors):
    return [t for t in tensors or [] if t is not None and t.numel() > 0]


def _group_rows(group_list, group_list_type, rows):
    if group_list_type not in (0, 1):
        refuse(f"group_list_type {group_list_type} is not 0 (cumulative) or 1 (counts)")
    values = [int(v) for v in group_list.reshape(-1).tolist()]
    ends = values if group_list_type == 0 else torch.tensor(values).cumsum(0).tolist()
    starts = [0] + ends[:-1]  # one longer than ends when the list is empty: zip drops that lone 0
    if (any(e < s for s, e in zip(starts, ends, strict=False)) or (ends and ends[-1] > rows)
            or any(v < 0 for v in values)):
        refuse(f"group_list {values} (type {group_list_type}) is not a non-decreasing split of {rows} rows")
    return list(zip(starts, ends, strict=False))


@ge_kernel("GroupedMatmul", layout_only={"tuning_config": "a kernel tiling hint"})
def grouped_matmul(x, weight, bias, scale, offset, antiquant_scale, antiquant_offset, group_list, per_token_scale, *,
                   split_item, dtype, transpose_weight, transpose_x, group_type, group_list_type, act_type):
    """Non-quantised: y_i = x_i @ w_i + b_i per group; groups as x/weight lists (split_item 0/1), x's rows
    by group_list (split_item 2/3, group_type 0; rows past the last group NaN), or the K axis (group_type 2)."""
    xs, weights = list(x), list(weight)
    for name, tensors in (("scale", scale), ("offset", offset), ("antiquant_scale", antiquant_scale),
                          ("antiquant_offset", antiquant_offset)):
        if _present(tensors):
            refuse(f"{name} given: quantised GroupedMatmul is not simulated")
    if per_token_scale is not None:
        refuse("per_token_scale given: quantised GroupedMatmul is not simulated")
    if act_type != 0:
        refuse(f"act_type {act_type}: fused activations are not simulated")
    if transpose_x:
        refuse("transpose_x is not simulated")
    if dtype not in (0, -1):
        refuse(f"dtype {dtype}: an output dtype other than x's is a quantised case")
    if not xs:
        refuse("x is an empty list")
    for t in xs + weights:
        require_dtype("x/weight", t, _GMM_FLOATS)
    if any(w.dtype != xs[0].dtype for w in weights):
        refuse("weight dtypes differ from x's: non-quantised GroupedMatmul takes one dtype")
    if transpose_weight:
        weights = [w.transpose(-1, -2) for w in weights]
    if len(weights) == 1 and weights[0].dim() == 3:
        weights = list(weights[0].unbind(0))
    biases = _present(bias)
    if len(biases) == 1 and biases[0].dim() == 2:
        biases = list(biases[0].unbind(0))
    if biases and len(biases) != len(weights):
        refuse(f"{len(biases)} biases for {len(weights)} weights")
    out_dtype = xs[0].dtype

    def product(rows, i):
        y = opmath(rows) @ opmath(weights[i])
        return y + biases[i].float() if biases else y

    if split_item in (0, 1) and group_type == -1 and group_list is None:
        if len(xs) != len(weights):
            refuse(f"{len(xs)} x tensors for {len(weights)} weights")
        return tuple(product(rows, i).to(out_dtype) for i, rows in enumerate(xs))
    if split_item in (2, 3) and group_type == -1 and group_list is None and len(xs) > 1:
        if len(xs) != len(weights) or any(x.dim() != 2 for x in xs):
            refuse(f"{len(xs)} x tensors for {len(weights)} weights (each x 2-D) when one y joins them")
        return torch.cat([product(rows, i) for i, rows in enumerate(xs)]).to(out_dtype)
    if split_item in (2, 3) and group_type == 0 and len(xs) == 1 and group_list is not None:
        rows = xs[0]
        if rows.dim() != 2:
            refuse(f"x must be 2-D (M, K) when its rows are grouped, got {list(rows.shape)}")
        spans = _group_rows(group_list, group_list_type, rows.shape[0])
        if len(spans) != len(weights):
            refuse(f"group_list has {len(spans)} groups for {len(weights)} weights")
        y = torch.full((rows.shape[0], weights[0].shape[-1]), float("nan"), dtype=torch.float32)
        for i, (start, end) in enumerate(spans):
            y[start:end] = product(rows[start:end], i)
        return y.to(out_dtype)
    if split_item in (2, 3) and group_type == 2 and len(xs) == 1 and len(weights) == 1 and group_list is not None:
        rows, w = xs[0], weights[0]
        if rows.dim() != 2 or w.dim() != 2 or rows.shape[1] != w.shape[0]:
            refuse(f"K-grouped x {list(rows.shape)} and weight {list(w.shape)} must be (M, K) and (K, N)")
        if biases:
            refuse("a bias with K-axis grouping is not simulated")
        spans = _group_rows(group_list, group_list_type, rows.shape[1])
        y = torch.stack([opmath(rows[:, start:end]) @ opmath(w[start:end]) for start, end in spans])
        return y.to(out_dtype)
    refuse(f"split_item {split_item} with group_type {group_type}, {len(xs)} x tensor(s) and "
           f"group_list {'given' if group_list is not None else 'absent'} is not simulated")

"""GroupedMatmul (CANN ops-transformer gmm/grouped_matmul), the mixture-of-experts expert matmul.

GroupedMatmul is simulated in its non-quantised form only: every scale, offset and antiquant list
must be empty (TorchAir fills an empty list with one 0-element tensor) and act_type 0. Scenarios
(x / weight / y single or multi tensor, as aclnnGroupedMatmul names them):

- multi-multi-multi (split_item 0/1, group_type -1): y_i = x_i @ w_i + b_i;
- single-multi-single (split_item 2/3, group_type 0): the rows of x are grouped by group_list
  (cumulative ends, group_list_type 0, or counts, type 1); y[rows_i] = x[rows_i] @ w_i + b_i. The
  weights are E 2-D tensors or one (E, K, N) tensor. Rows past the last group are "not updated"
  on the NPU (their contents are whatever the buffer held): here they are NaN, so a graph that
  reads them shows it instead of getting a plausible number.
- single-single-single (split_item 2/3, group_type 2): the K axis is grouped: one x (M, K) and one
  weight (K, N), y[i] = x[:, ks_i] @ weight[ks_i, :], y of shape (groups, M, N) (the weight
  gradient of a grouped matmul; an empty group gives zeros, the value of an empty sum).

Products accumulate in float32 and round once to x's dtype (bias float32 for bfloat16 x, per the
prototype's dtype table).
"""
from __future__ import annotations

import torch

from .common import check_dtype, fail, opmath
from ..registry import builtin_kernel

_GMM_FLOATS = (torch.float16, torch.bfloat16, torch.float32)


def _named_groups(node, inputs):
    """GE input name prefix -> the tensors fed to it, in order (x0, x1, ... -> "x")."""
    groups: dict[str, list] = {}
    for desc, value in zip(node.input_desc, inputs):
        name = desc.name.rstrip("0123456789") if desc.name not in ("group_list", "per_token_scale") else desc.name
        groups.setdefault(name, []).append(value)
    return groups


def _present(tensors):
    return [t for t in tensors or [] if t is not None and t.numel() > 0]


def _group_rows(node, group_list, group_list_type, rows):
    if group_list_type not in (0, 1):
        fail(node, f"group_list_type {group_list_type} is not 0 (cumulative) or 1 (counts)")
    values = [int(v) for v in group_list.reshape(-1).tolist()]
    ends = values if group_list_type == 0 else torch.tensor(values).cumsum(0).tolist()
    starts = [0] + ends[:-1]
    if any(e < s for s, e in zip(starts, ends)) or (ends and ends[-1] > rows) or any(v < 0 for v in values):
        fail(node, f"group_list {values} (type {group_list_type}) is not a non-decreasing split of {rows} rows")
    return list(zip(starts, ends))


@builtin_kernel("GroupedMatmul", unread_attrs={"tuning_config": "a kernel tiling hint"})
def _grouped_matmul(inputs, attrs, node):
    """Non-quantised: y_i = x_i @ w_i + b_i per group; groups as x/weight lists (split_item 0/1), x's rows
    by group_list (split_item 2/3, group_type 0; rows past the last group NaN), or the K axis (group_type 2)."""
    groups = _named_groups(node, inputs)
    xs, weights = groups.get("x", []), groups.get("weight", [])
    for name in ("scale", "offset", "antiquant_scale", "antiquant_offset"):
        if _present(groups.get(name)):
            fail(node, f"{name} given: quantised GroupedMatmul is not simulated")
    if groups.get("per_token_scale", [None])[0] is not None:
        fail(node, "per_token_scale given: quantised GroupedMatmul is not simulated")
    if attrs.get("act_type", 0) != 0:
        fail(node, f"act_type {attrs['act_type']}: fused activations are not simulated")
    if attrs.get("transpose_x", False):
        fail(node, "transpose_x is not simulated")
    if attrs.get("dtype", 0) not in (0, -1):
        fail(node, f"dtype {attrs['dtype']}: an output dtype other than x's is a quantised case")
    for t in xs + weights:
        check_dtype(node, "x/weight", t, _GMM_FLOATS)
    if any(w.dtype != xs[0].dtype for w in weights):
        fail(node, "weight dtypes differ from x's: non-quantised GroupedMatmul takes one dtype")
    if attrs.get("transpose_weight", False):
        weights = [w.transpose(-1, -2) for w in weights]
    if len(weights) == 1 and weights[0].dim() == 3:
        weights = list(weights[0].unbind(0))
    biases = _present(groups.get("bias"))
    if len(biases) == 1 and biases[0].dim() == 2:
        biases = list(biases[0].unbind(0))
    if biases and len(biases) != len(weights):
        fail(node, f"{len(biases)} biases for {len(weights)} weights")
    out_dtype = xs[0].dtype

    def product(x, i):
        y = opmath(x) @ opmath(weights[i])
        return y + biases[i].float() if biases else y

    split_item, group_type = attrs.get("split_item", 0), attrs.get("group_type", -1)
    group_list = groups.get("group_list", [None])[0]
    if split_item in (0, 1) and group_type == -1 and group_list is None:
        if len(xs) != len(weights):
            fail(node, f"{len(xs)} x tensors for {len(weights)} weights")
        return [product(x, i).to(out_dtype) for i, x in enumerate(xs)]
    if split_item in (2, 3) and group_type == 0 and len(xs) == 1 and group_list is not None:
        x = xs[0]
        if x.dim() != 2:
            fail(node, f"x must be 2-D (M, K) when its rows are grouped, got {list(x.shape)}")
        spans = _group_rows(node, group_list, attrs.get("group_list_type", 0), x.shape[0])
        if len(spans) != len(weights):
            fail(node, f"group_list has {len(spans)} groups for {len(weights)} weights")
        y = torch.full((x.shape[0], weights[0].shape[-1]), float("nan"), dtype=torch.float32)
        for i, (start, end) in enumerate(spans):
            y[start:end] = product(x[start:end], i)
        return [y.to(out_dtype)]
    if split_item in (2, 3) and group_type == 2 and len(xs) == 1 and len(weights) == 1 and group_list is not None:
        x, weight = xs[0], weights[0]
        if x.dim() != 2 or weight.dim() != 2 or x.shape[1] != weight.shape[0]:
            fail(node, f"K-grouped x {list(x.shape)} and weight {list(weight.shape)} must be (M, K) and (K, N)")
        if biases:
            fail(node, "a bias with K-axis grouping is not simulated")
        spans = _group_rows(node, group_list, attrs.get("group_list_type", 0), x.shape[1])
        y = torch.stack([opmath(x[:, start:end]) @ opmath(weight[start:end]) for start, end in spans])
        return [y.to(out_dtype)]
    fail(node, f"split_item {split_item} with group_type {group_type}, {len(xs)} x tensor(s) and "
               f"group_list {'given' if group_list is not None else 'absent'} is not simulated")

"""Tests of kernels/gmm/grouped_matmul.py: GroupedMatmul.
"""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from op_plugin._lowering import registry
from op_plugin._simulator import GeExecutionError
from op_plugin._testing_harness import check_compiled, run_node


def _per_group(x, w, ends):
    """The oracle: rows [ends[g-1], ends[g]) of x times w[g]."""
    out, start = [], 0
    for g, end in enumerate(ends):
        out.append(x[start:end].float() @ w[g].float())
        start = end
    return torch.cat(out).to(x.dtype)


def test_grouped_mm_matches_per_group_matmuls():
    """aten._grouped_mm takes bfloat16 only (its Meta function); float32 MoE code reaches GroupedMatmul
    through transformers' grouped_mm_fallback (the zoo's Mixtral and Qwen2-MoE)."""
    torch.manual_seed(0)
    x, w = torch.randn(10, 8, dtype=torch.bfloat16), torch.randn(3, 8, 16, dtype=torch.bfloat16)
    offs = torch.tensor([3, 3, 10], dtype=torch.int32)  # an empty group in the middle
    check_compiled(lambda x, w, o: F.grouped_mm(x, w, offs=o), (x, w, offs), "GroupedMatmul",
                   oracle=lambda x, w, o: _per_group(x, w, o.tolist()), kind="kernel")


def _empty():
    return torch.empty(0)


def _gmm_inputs(x, w, bias, group_list):
    """GroupedMatmul's inputs as TorchAir feeds them: one tensor in each dynamic input, empty
    tensors for the quantisation inputs, per_token_scale unfed."""
    return {"x": [x], "weight": [w], "bias": [bias], "scale": [_empty()], "offset": [_empty()],
            "antiquant_scale": [_empty()], "antiquant_offset": [_empty()], "group_list": group_list,
            "per_token_scale": None}


_GROUPED = dict(split_item=3, dtype=-1, transpose_weight=False, transpose_x=False, group_type=0, act_type=0)


def test_group_list_as_counts_with_bias_and_rows_past_the_last_group():
    torch.manual_seed(0)
    x, w, bias = torch.randn(7, 4), torch.randn(2, 4, 3), torch.randn(2, 3)
    y, = run_node("GroupedMatmul", _gmm_inputs(x, w, bias, torch.tensor([2, 3])), [(torch.float32, [7, 3])],
                  **_GROUPED, group_list_type=1)
    torch.testing.assert_close(y[:2], x[:2] @ w[0] + bias[0])
    torch.testing.assert_close(y[2:5], x[2:5] @ w[1] + bias[1])
    assert y[5:].isnan().all()  # "not updated" on the NPU: never a plausible number here


def test_token_axis_grouping_gives_per_group_weight_gradients():
    """group_type 2: y[g] = x[:, ks_g] @ w[ks_g, :], the weight gradient of a grouped matmul."""
    torch.manual_seed(0)
    x_t, grad = torch.randn(4, 7), torch.randn(7, 3)  # input^T (K, tokens), grad (tokens, N)
    y, = run_node("GroupedMatmul", _gmm_inputs(x_t, grad, _empty(), torch.tensor([2, 2, 7])),
                  [(torch.float32, [3, 4, 3])], **dict(_GROUPED, group_type=2), group_list_type=0)
    assert y.shape == (3, 4, 3)
    torch.testing.assert_close(y[0], x_t[:, :2] @ grad[:2])
    torch.testing.assert_close(y[1], torch.zeros(4, 3))  # an empty group: the empty sum
    torch.testing.assert_close(y[2], x_t[:, 2:] @ grad[2:])


def test_quantised_grouped_matmul_is_refused():
    x, w = torch.randn(4, 4), torch.randn(2, 4, 3)
    inputs = _gmm_inputs(x, w, _empty(), torch.tensor([2, 4]))
    inputs["scale"] = [torch.ones(2, dtype=torch.int64)]  # a scale
    with pytest.raises(GeExecutionError, match="scale given: quantised GroupedMatmul is not simulated"):
        run_node("GroupedMatmul", inputs, [(torch.float32, [4, 3])], **_GROUPED, group_list_type=0)


def test_a_library_op_imported_after_the_first_compile_gets_its_converter(monkeypatch):
    """transformers registers grouped_mm_fallback when its MoE module is imported, which may be
    after npugraph first installed its converters."""
    check_compiled(lambda x: x + 1, (torch.randn(3),), kind="kernel")  # the installation has run
    lib = torch.library.Library("op_plugin_late_lib", "DEF")
    try:
        lib.define("twice(Tensor x) -> Tensor")
        lib.impl("twice", lambda x: x * 2, "CompositeExplicitAutograd")
        lib.impl("twice", lambda x: torch.empty_like(x), "Meta")

        monkeypatch.setattr(registry, "_ENTRIES", list(registry._ENTRIES))  # the declaration goes after the test

        @registry.library_converter("op_plugin_late_lib::twice")
        def twice(ta, x, meta_outputs=None):
            return ta.ge.Muls(x, value=2.0)

        check_compiled(lambda x: torch.ops.op_plugin_late_lib.twice(x) + 1, (torch.randn(3),), "Muls", kind="kernel")
    finally:
        handle = registry._library_handles.pop("op_plugin_late_lib::twice", None)
        if handle is not None:
            handle.destroy()
        lib._destroy()

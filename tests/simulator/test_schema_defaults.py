"""An argument the FX node leaves out reaches TorchAir's converter as the schema's default, not the
converter's own (op_plugin/_lowering/schema_defaults.py). Oracle: eager on the same call."""
from __future__ import annotations

import pytest
import torch

import op_plugin  # noqa: F401  (defines torch_npu's ops on a CPU host)
from op_plugin._testing_harness import check_compiled


@pytest.fixture(scope="module")
def schema_defaults(torchair):
    from op_plugin._lowering import schema_defaults

    torch.compile(lambda x: x + 1, backend="npugraph")(torch.ones(1))  # installs the converters
    return schema_defaults


def test_the_mismatches_are_found_from_the_schemas(schema_defaults):
    from op_plugin._lowering.torchair_api import registered_wrapper

    def wrapped(op):
        fn = registered_wrapper(op)
        inner = getattr(fn, "__wrapped__", fn)
        return inner.__name__ == "with_schema_defaults", inner

    found = {}
    for op in (torch.ops.npu.npu_group_norm_silu.default, torch.ops.aten._embedding_bag.default):
        is_wrapped, inner = wrapped(op)
        assert is_wrapped, op
        found[str(op)] = {name: default for name, (_, default) in
                          schema_defaults.default_mismatches(op, inner.__wrapped__).items()}
    assert found == {"npu.npu_group_norm_silu.default": {"eps": 1e-5}, "aten._embedding_bag.default": {"mode": 0}}
    assert not wrapped(torch.ops.aten.add.Tensor)[0]  # its converter agrees with its schema


def test_a_default_left_out_by_the_node_computes_what_eager_computes(schema_defaults):
    x, g, b = torch.randn(2, 8, 3, 4).half(), torch.randn(8).half(), torch.randn(8).half()
    check_compiled(lambda x, g, b: torch.ops.npu.npu_group_norm_silu(x, g, b, 4), (x, g, b), "GroupNormSilu",
                   kind="kernel")  # eps=1e-5 dropped by the node: TorchAir's converter would use 1e-4
    weight, indices, offsets = torch.randn(10, 3), torch.tensor([1, 2, 2, 5, 9, 0]), torch.tensor([0, 2, 4])
    check_compiled(lambda w, i, o: torch.ops.aten._embedding_bag(w, i, o)[0], (weight, indices, offsets),
                   "EmbeddingBag", kind="kernel")  # mode=0 (sum) dropped: TorchAir's converter would use mean


def test_a_default_given_explicitly_is_passed_on(schema_defaults):
    x, g, b = torch.randn(2, 8, 3, 4).half(), torch.randn(8).half(), torch.randn(8).half()
    check_compiled(lambda x, g, b: torch.ops.npu.npu_group_norm_silu(x, g, b, 4, 0.5), (x, g, b), "GroupNormSilu",
                   kind="kernel")

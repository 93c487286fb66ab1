"""A GE node's attr that its kernel's prototype does not name is refused by name, unless a rule accepts it.

Oracles: hand-built nodes whose attrs are known; TorchAir's own source (what its generated ops and
its layout helpers write on nodes); torch.topk on the CPU for TopKV2's results.
"""
import re
from pathlib import Path

import pytest
import torch

from op_plugin._ge.values import TORCH_TO_GE
from op_plugin._simulator.interpreter import unnamed_attrs
from op_plugin._simulator.interpreter.binding import prototype_of
from op_plugin._simulator.interpreter.errors import GeExecutionError
from op_plugin._simulator.interpreter.kernels import builtin_entries
from op_plugin._testing_harness import run_node

_X = torch.tensor([[-1.5, 0.0, 2.0], [3.0, -4.0, 0.5]])
_ENTRIES = builtin_entries()


def _torchair_dir(torchair) -> Path:
    return Path(torchair.__file__).parent


def test_an_unknown_attr_is_refused_naming_node_type_attr_and_value():
    with pytest.raises(GeExecutionError) as caught:
        run_node("Relu", [_X], name="relu_7", negative_slope=0.25)
    message = str(caught.value)
    for part in ("'relu_7'", "Relu", "'negative_slope'", "0.25"):
        assert part in message


def test_an_unknown_attr_is_refused_even_on_a_kernel_with_attrs():
    # LeakyRelu names `negative_slope`; `alpha` is no attr of it and must not be dropped silently
    with pytest.raises(GeExecutionError, match="'alpha' = 2"):
        run_node("LeakyRelu", [_X], negative_slope=0.1, alpha=2)


def test_bookkeeping_and_torchair_layout_attrs_are_accepted():
    (y,) = run_node("Relu", [_X], _input_name_key=["x"], _inference_rule="{}", _force_unknown_shape=True,
                    input_layout_info=[0], output_layout_info=[0])
    assert y.tolist() == [[0.0, 0.0, 2.0], [3.0, 0.0, 0.5]]


def test_torchair_writes_the_layout_attrs_the_rule_accepts_and_moves_them_onto_descs(torchair):
    """The accepted names are the ones TorchAir's helper writes and its normaliser reads (not a guess)."""
    utils = (_torchair_dir(torchair) / "_ge_concrete_graph" / "utils.py").read_text()
    converter = (_torchair_dir(torchair) / "_ge_concrete_graph" / "fx2ge_converter.py").read_text()
    for name in unnamed_attrs.TORCHAIR_NODE_ATTRS:
        assert f"op.node.attr['{name}']" in utils
        assert f"op.attr['{name}']" in converter and "desc.layout = layout.decode()" in converter


def test_torchair_scope_data_dump_attr_is_accepted(torchair):
    """torchair.scope.data_dump() writes this name on the scope's nodes and TorchAir's dump-options writer reads
    it (the dump's layer list); it is accepted on any node and changes nothing the node computes (issue 34)."""
    scope = (_torchair_dir(torchair) / "scope" / "__init__.py").read_text()
    converter = (_torchair_dir(torchair) / "_ge_concrete_graph" / "fx2ge_converter.py").read_text()
    for name in unnamed_attrs.TORCHAIR_SCOPE_ATTRS:
        assert f'("{name}", ' in scope and f'"{name}" in attr_map' in converter
    (y,) = run_node("Relu", [_X], torchair_enable_data_dump="True")
    assert y.tolist() == [[0.0, 0.0, 2.0], [3.0, 0.0, 0.5]]


def test_every_table_entry_has_its_reason():
    for name, reason in {**unnamed_attrs.TORCHAIR_NODE_ATTRS, **unnamed_attrs.TORCHAIR_SCOPE_ATTRS}.items():
        assert not name.startswith("_") and len(reason) > 40
    for op_type, table in unnamed_attrs.INERT_ATTRS.items():
        assert op_type in _ENTRIES and all(len(reason) > 40 for reason in table.values())
    for op_type, table in unnamed_attrs.NEWER_DEFAULTS.items():
        assert op_type in _ENTRIES and all(len(entry.source) > 20 for entry in table.values())


def test_an_inert_table_entry_is_accepted_and_only_for_its_type(monkeypatch):
    monkeypatch.setitem(unnamed_attrs.INERT_ATTRS, "Relu", {"tiling_hint": "test entry: never read by Relu"})
    (y,) = run_node("Relu", [_X], tiling_hint=3)
    assert y.tolist() == [[0.0, 0.0, 2.0], [3.0, 0.0, 0.5]]
    with pytest.raises(GeExecutionError, match="'tiling_hint'"):
        run_node("Sigmoid", [_X], tiling_hint=3)


def test_a_newer_prototype_attr_is_accepted_at_its_default_only(monkeypatch):
    newer = unnamed_attrs.NewerDefault(0, "test entry: a newer REG_OP's .ATTR(mode, Int, 0)")
    monkeypatch.setitem(unnamed_attrs.NEWER_DEFAULTS, "Relu", {"mode": newer})
    (y,) = run_node("Relu", [_X], mode=0)
    assert y.tolist() == [[0.0, 0.0, 2.0], [3.0, 0.0, 0.5]]
    with pytest.raises(GeExecutionError, match=r"'mode' = 1; the simulator implements only its default 0"):
        run_node("Relu", [_X], mode=1)


def test_every_attr_torchair_generated_ops_write_is_named_or_accepted(torchair):
    """TorchAir's generated op builders (the ones its converters call) write some attrs no docstring names
    (TopKV2's sort_policy): each one a built-in kernel would see must be named by its prototype or accepted."""
    source = (_torchair_dir(torchair) / "_ge_concrete_graph" / "auto_generated_ge_raw_ops.py").read_text()
    bodies = re.split(r"\n(?=def \w+\()", source)
    unaccepted, seen = [], 0
    for body in bodies:
        match = re.match(r"def (\w+)\(", body)
        if match is None or match.group(1) not in _ENTRIES:
            continue
        op_type = match.group(1)
        named = {p.name for p in prototype_of(_ENTRIES[op_type], op_type).attrs}
        for name in re.findall(r'op\.attr\["(\w+)"\]', body):
            seen += 1
            if name not in named and not unnamed_attrs.accepted(op_type, name, None):
                unaccepted.append((op_type, name))
    assert seen > 500 and unaccepted == []


def test_top_k_v2_takes_torchair_sort_policy_and_honours_indices_dtype():
    x = torch.tensor([[5.0, 1.0, 4.0, 2.0, 3.0], [0.0, -2.0, 7.0, 7.5, 1.0]])
    k = torch.tensor([3], dtype=torch.int32)
    for policy in (0, 1):  # what TorchAir's TopKV2 writes (1) and ops-math's default (0)
        values, indices = run_node("TopKV2", [x, k], sort_policy=policy)
        assert values.tolist() == [[5.0, 4.0, 3.0], [7.5, 7.0, 1.0]]
        assert indices.tolist() == [[0, 2, 4], [3, 2, 4]] and indices.dtype == torch.int32
    values, indices = run_node("TopKV2", [x, k], largest=False, indices_dtype=TORCH_TO_GE[torch.int64])
    assert values.tolist() == [[1.0, 2.0, 3.0], [-2.0, 0.0, 1.0]]
    assert indices.tolist() == [[1, 3, 4], [1, 0, 4]] and indices.dtype == torch.int64
    with pytest.raises(GeExecutionError, match="indices_dtype 0 is neither DT_INT32"):
        run_node("TopKV2", [x, k], indices_dtype=0)


def test_compiled_topk_carries_sort_policy_and_matches_eager(torchair):
    from op_plugin._testing_harness import check_compiled

    x = torch.tensor([[0.25, -1.0, 2.5, 2.0, 0.125, 9.0], [4.0, 3.0, -3.0, 8.0, 1.0, 0.5]])
    run = check_compiled(lambda t: torch.topk(t, 4), (x,))
    nodes = [op for graph in run.graphs for op in graph.op if op.type == "TopKV2"]
    assert nodes and all(op.attr["sort_policy"].i == 1 for op in nodes)
    assert run.got[0].tolist() == [[9.0, 2.5, 2.0, 0.25], [8.0, 4.0, 3.0, 1.0]]

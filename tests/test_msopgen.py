"""op-plugin msopgen: msOpGen JSON for the custom GE ops of YAML files.

The expected format is msOpGen's operator prototype JSON (CANN/MindStudio "msOpGen: create an
operator project"): input_desc/output_desc entries with name, param_type, format, type; format and
type pair up, and position k of every input and output is one supported dtype combination.
"""
import json
from pathlib import Path

import pytest

from op_plugin._registry.load import parse_yaml
from op_plugin._simulator.hosting.builtin_types import builtin_ge_types
from op_plugin._tools.ascend_c.msopgen import check_msopgen_json, msopgen_ops, snake_case
from op_plugin.cli import main

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = sorted(str(p) for p in (ROOT / "yaml").glob("*.yaml"))
MSOPGEN_TYPES = {"float16", "float", "bfloat16", "double", "int8", "int16", "int32", "int64", "uint8", "bool"}


def _shipped():
    return [spec for path in SHIPPED for spec in parse_yaml(path)]


def _by_op(ops):
    return {op["op"]: op for op in ops}


def _columns(op):
    """Position k of every input and output: one dtype combination."""
    descs = op["input_desc"] + op["output_desc"]
    width = len(descs[0]["type"])
    for desc in descs:
        assert len(desc["type"]) == len(desc["format"]) == width, desc
        assert set(desc["format"]) == {"ND"} and set(desc["type"]) <= MSOPGEN_TYPES
    named = [(d["name"], d) for d in op["input_desc"]] + [(d["name"] + ":out", d) for d in op["output_desc"]]
    return [{name: d["type"][k] for name, d in named} for k in range(width)]


def test_shipped_yaml_generates_only_custom_ge_types():
    specs = _shipped()
    result = msopgen_ops(specs)
    builtins = builtin_ge_types()
    assert [op["op"] for op in result.ops] == [s.ge.type for s in specs if s.ge and s.ge.type not in builtins]
    assert {"NpuCustomScaledSoftmax", "NpuCustomKvCacheUpdate"} <= {op["op"] for op in result.ops}
    assert {"RotaryMul", "Add", "AddN", "BatchMatMulV2", "MatMulV2", "RmsNorm", "AddRmsNorm"} <= {
        t for _, t in result.builtin}
    assert "npu_swiglu_mlp" in [s.name for s in result.no_ge]
    assert result.notes == []  # every shipped op states its dtypes and output rules
    check_msopgen_json(result.ops)
    for op in result.ops:
        assert list(op) == ["op", "input_desc", "output_desc", "attr"]
        for desc in op["input_desc"] + op["output_desc"]:
            assert list(desc) == ["name", "param_type", "format", "type"]


def test_scaled_softmax_entry():
    op = _by_op(msopgen_ops(_shipped()).ops)["NpuCustomScaledSoftmax"]
    assert [(d["name"], d["param_type"]) for d in op["input_desc"]] == [("x", "required")]
    assert [(d["name"], d["param_type"]) for d in op["output_desc"]] == [("y", "required")]
    assert _columns(op) == [{"x": t, "y:out": t} for t in ("float16", "bfloat16", "float")]
    assert op["attr"] == [
        {"name": "scale", "param_type": "optional", "type": "float", "default_value": 1.0},
        {"name": "dims", "param_type": "optional", "type": "list_int", "default_value": "{-1}"},
        {"name": "causal", "param_type": "optional", "type": "bool", "default_value": False},
    ]


def test_kv_cache_update_crosses_independent_dtype_sets():
    op = _by_op(msopgen_ops(_shipped()).ops)["NpuCustomKvCacheUpdate"]
    assert [d["name"] for d in op["input_desc"]] == ["cache", "update", "positions"]
    assert [d["name"] for d in op["output_desc"]] == ["cache"]  # the in-place (ref) output
    columns = _columns(op)
    # cache and update accept the same set, so they share a dtype; positions varies on its own.
    combos = {(c["cache"], c["update"], c["positions"], c["cache:out"]) for c in columns}
    assert combos == {(f, f, i, f) for f in ("float16", "bfloat16", "float") for i in ("int32", "int64")}
    assert len(columns) == 6
    assert op["attr"] == [
        {"name": "dim", "param_type": "optional", "type": "int", "default_value": 1},
        {"name": "reduce", "param_type": "optional", "type": "string", "default_value": "update"},
    ]


USER_YAML = """\
ops:
  - func: npu_msop_mix(Tensor x, Tensor[] parts, Tensor? bias, int[] axes, float alpha=0.5, *, \
bool flag=True) -> (Tensor, Tensor)
    outputs:
      - {size: x.shape, dtype: x}
      - {size: x.shape, dtype: int64}
    dtypes: {x: [float32, float16], parts: [float32, float16], bias: [bfloat16]}
    ge:
      type: NpuMsopMix
      inputs: [x, {xs: parts}, bias]
      attrs: {axes: axes, alpha: alpha, flag: flag, N: {len: parts}, mode: {value: "fast"}}
      outputs: [y, idx]
"""


def test_dynamic_and_optional_inputs_and_attr_kinds(tmp_path):
    path = tmp_path / "mix.yaml"
    path.write_text(USER_YAML)
    result = msopgen_ops(parse_yaml(path))
    (op,) = result.ops
    assert op["op"] == "NpuMsopMix"
    assert [(d["name"], d["param_type"]) for d in op["input_desc"]] == [
        ("x", "required"), ("xs", "dynamic"), ("bias", "optional")]
    assert [(d["name"], d["param_type"]) for d in op["output_desc"]] == [("y", "required"), ("idx", "required")]
    columns = _columns(op)
    assert {(c["x"], c["xs"], c["bias"], c["y:out"], c["idx:out"]) for c in columns} == {
        ("float16", "float16", "bfloat16", "float16", "int64"), ("float", "float", "bfloat16", "float", "int64")}
    assert op["attr"] == [
        {"name": "axes", "param_type": "required", "type": "list_int"},
        {"name": "alpha", "param_type": "optional", "type": "float", "default_value": 0.5},
        {"name": "flag", "param_type": "optional", "type": "bool", "default_value": True},
        {"name": "N", "param_type": "required", "type": "int"},
        {"name": "mode", "param_type": "optional", "type": "string", "default_value": "fast"},
    ]
    check_msopgen_json(result.ops)


def test_missing_dtypes_rule_uses_samples_and_says_so(tmp_path):
    path = tmp_path / "nodtypes.yaml"
    path.write_text("ops:\n  - func: npu_msop_plain(Tensor x) -> Tensor\n    outputs: [{size: x.shape, dtype: x}]\n"
                    "    ge: {type: NpuMsopPlain}\n    samples: [{x: [float16, [2]]}, {x: [int32, [2]]}]\n")
    result = msopgen_ops(parse_yaml(path))
    assert result.ops[0]["input_desc"][0]["type"] == ["float16", "int32"]
    assert any("no `dtypes:` for 'x'" in n for n in result.notes)


def test_checker_rejects_misaligned_lists():
    op = {"op": "Bad", "input_desc": [{"name": "x", "param_type": "required", "format": ["ND"], "type": ["float16"]}],
          "output_desc": [{"name": "y", "param_type": "required", "format": ["ND", "ND"],
                           "type": ["float16", "float"]}]}
    with pytest.raises(ValueError, match="dtype combinations"):
        check_msopgen_json([op])
    op["output_desc"][0].update(format=["ND"], type=["float16"], param_type="sometimes")
    with pytest.raises(ValueError, match="param_type"):
        check_msopgen_json([op])


def test_cli_prints_json_and_reports_builtins(capsys):
    assert main(["msopgen", *SHIPPED]) == 0
    captured = capsys.readouterr()
    ops = json.loads(captured.out)  # stdout is exactly the JSON
    assert {"NpuCustomScaledSoftmax", "NpuCustomKvCacheUpdate"} <= {op["op"] for op in ops}
    assert "GE type RmsNorm is a CANN built-in op; it already has a kernel" in captured.err
    assert "npu::npu_swiglu_mlp: no `ge:` mapping" in captured.err


def test_cli_writes_one_file_per_op(tmp_path, capsys):
    out = tmp_path / "msop"
    assert main(["msopgen", str(ROOT / "yaml" / "attention_ops.yaml"), "--out", str(out)]) == 0
    files = sorted(p.name for p in out.iterdir())
    assert files == ["npu_custom_kv_cache_update.json", "npu_custom_scaled_softmax.json"]
    ops = json.loads((out / "npu_custom_scaled_softmax.json").read_text())
    assert [op["op"] for op in ops] == ["NpuCustomScaledSoftmax"]
    text = capsys.readouterr().out
    assert "RotaryMul is a CANN built-in op" in text and "msopgen gen -i" in text
    assert snake_case("NpuCustomKvCacheUpdate") == "npu_custom_kv_cache_update"


def test_cli_reports_yaml_errors(capsys):
    assert main(["msopgen", str(ROOT / "tests" / "broken_yaml" / "ge_bad_type.yaml")]) == 1
    assert "error:" in capsys.readouterr().err

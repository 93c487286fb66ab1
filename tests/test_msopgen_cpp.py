"""msOpGen JSON -> C++: the attribute defaults become valid C++ in the code msOpGen generates.

msOpGen pastes each attr's `default_value` as text into the GE prototype header it writes
(`.ATTR(name, ListInt, <default>)`, MindStudio msopgen `op_file.py`, where a JSON list has its
brackets swapped for braces) and into the Ascend C operator definition
(`this->Attr("name").AttrType(OPTIONAL).ListInt(<default>)`, `op_file_aicore.py`, pasted as is).
Both forms are rendered here from the generated JSON by those rules and compiled with g++: the
REG_OP form against the real `graph/operator_reg.h` of the torch-npu wheel, the OpDef form against
a stand-in declaring Ascend C's `OpAttrDef` setters with their documented signatures (the wheel
does not ship `register/op_def.h`). What only an Ascend host with MindStudio verifies: msOpGen's
own project build (`build.sh`) and the kernel it compiles.
"""
import shutil
import subprocess
from pathlib import Path

import pytest
import torch

from op_plugin._ge.values import TORCH_TO_GE, TORCH_TO_GE_NAME
from op_plugin._registry.load import parse_yaml
from op_plugin._simulator.hosting.install import simulator_dir
from op_plugin._tools.ascend_c.msopgen import check_msopgen_json, msopgen_ops

ROOT = Path(__file__).resolve().parents[1]
INCLUDE = simulator_dir() / "torch_npu" / "include"
pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed")

# msOpGen's INPUT_OUTPUT_DTYPE_MAP (config/transform.json) for the type names op_plugin writes.
_TENSOR_TYPES = {"float16": "DT_FLOAT16", "float": "DT_FLOAT", "bfloat16": "DT_BF16", "double": "DT_DOUBLE",
                 "int8": "DT_INT8", "int16": "DT_INT16", "int32": "DT_INT32", "int64": "DT_INT64",
                 "uint8": "DT_UINT8", "bool": "DT_BOOL"}
# msOpGen's IR_ATTR_TYPE_MAP: JSON attr type -> GE attr type name.
_ATTR_API = {"int": "Int", "float": "Float", "string": "String", "bool": "Bool", "type": "Type",
             "list_int": "ListInt", "list_string": "ListString", "list_bool": "ListBool",
             "list_list_int": "ListListInt", "list_float": "ListFloat", "list_type": "ListType"}

USER_YAML = """\
ops:
  - func: npu_msop_cast(Tensor x, ScalarType dtype=int8, int[] perm=[1, 0], float[] scales=[0.5, 2.0], \
bool[] keep=[True, False], int[] empty=[], float eps=1e-05, str mode="fast", bool flag=False) -> Tensor
    outputs: [{size: x.shape, dtype: x}]
    dtypes: {x: [float16, float32]}
    ge:
      type: NpuMsopCast
      attrs: {dst_type: dtype, perm: perm, scales: scales, keep: keep, empty: empty, eps: eps, mode: mode, flag: flag}
    samples: [{x: [float32, [2, 3]]}]
  - func: npu_msop_fill_(Tensor(a!) x, Tensor(b!) y, float value) -> ()
    dtypes: {x: [float32], y: [float32]}
    ge: {type: NpuMsopFill, attrs: {value: value}}
    samples: [{x: [float32, [2]], y: [float32, [2]], value: 1.5}]
"""


def _user_ops(tmp_path):
    path = tmp_path / "user.yaml"
    path.write_text(USER_YAML)
    return msopgen_ops(parse_yaml(path))


def _shipped_ops():
    return msopgen_ops([spec for path in sorted((ROOT / "yaml").glob("*.yaml")) for spec in parse_yaml(path)])


def _compile(tmp_path, source: str, name: str) -> None:
    path = tmp_path / f"{name}.cpp"
    path.write_text(source)
    done = subprocess.run(["g++", "-std=c++17", "-fsyntax-only", f"-I{INCLUDE}", str(path)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"{name}.cpp does not compile:\n{source}\n{done.stderr[-3000:]}"


def _reg_op(op: dict) -> str:
    """The GE prototype msOpGen's header generator writes for `op` (op_file.py _generate_ir_h)."""
    lines = [f"REG_OP({op['op']})"]
    macro = {"required": "INPUT", "optional": "OPTIONAL_INPUT", "dynamic": "DYNAMIC_INPUT"}
    for desc in op["input_desc"]:
        types = ", ".join(dict.fromkeys(_TENSOR_TYPES[t] for t in desc["type"]))
        lines.append(f"    .{macro[desc['param_type']]}({desc['name']}, TensorType({{{types}}}))")
    for desc in op["output_desc"]:
        types = ", ".join(dict.fromkeys(_TENSOR_TYPES[t] for t in desc["type"]))
        lines.append(f"    .OUTPUT({desc['name']}, TensorType({{{types}}}))")
    for attr in op.get("attr", []):
        api = _ATTR_API[attr["type"]]
        if attr["param_type"] == "optional":
            value = attr["default_value"]
            if isinstance(value, bool):  # op_info_ir_json: _parse_bool_value_for_json
                value = "true" if value else "false"
            if isinstance(value, list):  # op_file: _deal_with_default_value
                value = str(value).replace("[", "{").replace("]", "}")
            if api == "String":
                value = f'"{value}"'
            lines.append(f"    .ATTR({attr['name']}, {api}, {value})")
        else:
            lines.append(f"    .REQUIRED_ATTR({attr['name']}, {api})")
    lines.append(f"    .OP_END_FACTORY_REG({op['op']})")
    return "\n".join(lines)


_OP_ATTR_DEF_STAND_IN = """\
#include <cstdint>
#include <vector>
// Ascend C's OpAttrDef setters as documented (register/op_def.h is not in the wheel); no Type setter.
struct OpAttrDef {
  OpAttrDef &AttrType(int);
  OpAttrDef &Bool(bool); OpAttrDef &Float(float); OpAttrDef &Int(int64_t); OpAttrDef &String(const char *);
  OpAttrDef &ListBool(std::vector<bool>); OpAttrDef &ListFloat(std::vector<float>);
  OpAttrDef &ListInt(std::vector<int64_t>); OpAttrDef &ListListInt(std::vector<std::vector<int64_t>>);
};
const int OPTIONAL = 0;
struct OpDef { OpAttrDef &Attr(const char *); };
"""


def _op_def_attrs(op: dict) -> list[str]:
    """msOpGen's Ascend C attr lines (op_file_aicore.py _generate_cpp_attrs), for optional attrs."""
    lines = []
    for attr in op.get("attr", []):
        if attr["param_type"] != "optional" or attr["type"] in ("type", "list_type"):
            continue
        value = attr["default_value"]
        if isinstance(value, bool):
            value = "true" if value else "false"
        if attr["type"] == "string":
            value = f'"{value}"'
        lines.append(f'    def.Attr("{attr["name"]}").AttrType(OPTIONAL).{_ATTR_API[attr["type"]]}({value});')
    return lines


def test_scalar_type_attr_is_a_ge_datatype_named_by_its_enumerator(tmp_path):
    result = _user_ops(tmp_path)
    attrs = {a["name"]: a for a in result.ops[0]["attr"]}
    assert attrs["dst_type"] == {"name": "dst_type", "param_type": "optional", "type": "type",
                                 "default_value": "DT_INT8"}
    assert attrs["perm"]["default_value"] == "{1, 0}"
    assert attrs["keep"]["default_value"] == "{true, false}"
    assert attrs["empty"]["default_value"] == "{}"
    assert attrs["scales"]["default_value"] == "{0.5, 2.0}"
    assert any("OpAttrDef has no Type setter" in note for note in result.notes)


def test_ge_dtype_names_and_numbers_match_the_wheels_header(tmp_path):
    checks = "\n".join(f'static_assert(ge::{name} == {TORCH_TO_GE[dtype]}, "{name}");'
                       for dtype, name in TORCH_TO_GE_NAME.items())
    _compile(tmp_path, f'#include "graph/types.h"\n{checks}\n', "ge_dtypes")


def test_reg_op_from_the_json_compiles_against_cann_headers(tmp_path):
    ops = _shipped_ops().ops + _user_ops(tmp_path).ops
    assert {"NpuMsopCast", "NpuMsopFill"} <= {op["op"] for op in ops}
    body = "\n".join(_reg_op(op) + ";" for op in ops)
    _compile(tmp_path, f'#include "graph/operator_reg.h"\nnamespace ge {{\n{body}\n}}\n', "reg_ops")


def test_ascend_c_attr_definitions_from_the_json_compile(tmp_path):
    lines = [line for op in _shipped_ops().ops + _user_ops(tmp_path).ops for line in _op_def_attrs(op)]
    assert len(lines) >= 7
    _compile(tmp_path, _OP_ATTR_DEF_STAND_IN + "void define(OpDef &def) {\n" + "\n".join(lines) + "\n}\n", "op_def")


@pytest.mark.parametrize("attr,match", [
    ({"name": "a", "param_type": "optional", "type": "list_int", "default_value": [1, 2]}, "brace"),
    ({"name": "a", "param_type": "optional", "type": "list_bool", "default_value": "{True}"}, "list_bool"),
    ({"name": "a", "param_type": "optional", "type": "type", "default_value": 2}, "ge::DataType name"),
    ({"name": "a", "param_type": "optional", "type": "type", "default_value": "DT_NOPE"}, "type default"),
    ({"name": "a", "param_type": "optional", "type": "float", "default_value": float("inf")}, "float"),
    ({"name": "a", "param_type": "optional", "type": "int", "default_value": True}, "int"),
])
def test_checker_refuses_defaults_msopgen_would_paste_as_invalid_cpp(attr, match):
    op = {"op": "Ok", "input_desc": [{"name": "x", "param_type": "required", "format": ["ND"], "type": ["float"]}],
          "output_desc": [{"name": "y", "param_type": "required", "format": ["ND"], "type": ["float"]}],
          "attr": [attr]}
    with pytest.raises(ValueError, match=match):
        check_msopgen_json([op])


def test_non_finite_float_default_is_refused_at_generation(tmp_path):
    path = tmp_path / "inf.yaml"
    path.write_text(USER_YAML.replace("mode: mode, flag: flag}", "mode: mode, flag: flag, limit: {value: .inf}}"))
    result = msopgen_ops(parse_yaml(path))
    # that op alone, located; the file's other op is generated
    assert [(spec.name, "finite" in message) for spec, message in result.errors] == [("npu_msop_cast", True)]
    assert result.errors[0][1].startswith(f"{path}:2: op 'npu_msop_cast': field 'ge.attrs': attr 'limit'")
    assert [op["op"] for op in result.ops] == ["NpuMsopFill"]


def test_torch_dtype_table_covers_every_yaml_dtype():
    from op_plugin._spec.dtypes import DTYPES, schema_default_dtype

    assert set(DTYPES.values()) <= set(TORCH_TO_GE_NAME)
    default = torch._C.parse_schema("f(ScalarType d=int8) -> ()").arguments[0].default_value
    assert schema_default_dtype(default) is torch.int8

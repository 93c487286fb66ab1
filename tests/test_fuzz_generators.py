"""Fuzzing the YAML front end and the Ascend-side generators with hypothesis (issue 26).

Generated YAML files (op and argument names, schema defaults of every kind, GE types, GE names,
attr constants, `size:` expressions, dtype rules, file names) must either be refused with a located
error (`file:line: ...`, never "cannot validate this op", which is a validator gap) or, accepted,
give generated files that hold: the C++ of `op-plugin opproto` compiles with
`g++ -std=c++17 -Wall -Wextra -Werror` against the wheel's CANN headers, the msOpGen JSON
round-trips through `json` and passes the msOpGen checker, and the REG_OP msOpGen would paste from
it compiles too. An op a generator refuses is refused with its location.

Bounded for `make test`: a fixed seed (derandomize), no example database, a few dozen examples, and
the CANN headers compiled once into a precompiled header. Marked `fuzz` (`-m "not fuzz"` skips them).
"""
from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from op_plugin._base.errors import YamlSpecError
from op_plugin._registry.load import parse_yaml
from op_plugin._simulator.hosting.install import simulator_dir
from op_plugin._tools.ascend_c.msopgen import check_msopgen_json, dumps, msopgen_ops
from op_plugin._tools.ascend_c.opproto import opproto_sources, write_sources
from op_plugin._base.paths import shown

pytestmark = [pytest.mark.fuzz,
              pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed")]

INCLUDE = simulator_dir() / "torch_npu" / "include"
GPP = ["g++", "-std=c++17", "-Wall", "-Wextra", "-Werror"]
FUZZ = settings(derandomize=True, database=None, deadline=None, print_blob=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large])

DTYPE_NAMES = ["float16", "bfloat16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "bool"]
KINDS = ["Tensor", "Tensor?", "Tensor[]", "int", "SymInt", "int[]", "float", "float[]", "bool", "bool[]", "str",
         "ScalarType", "Scalar"]


def mostly(valid, hostile, hostile_share: int):
    """`valid`, or `hostile` about one time in `hostile_share` (1: either, as hypothesis picks)."""
    if hostile_share <= 1:
        return hostile | valid
    # not 0 or the bounds, which hypothesis draws far more often than the others
    return st.integers(0, hostile_share - 1).flatmap(lambda i: hostile if i == hostile_share // 2 else valid)


class Pools:
    """The values one YAML field takes: `share` is how rarely a hostile one is drawn (see `mostly`)."""

    def __init__(self, share: int):
        int64 = st.sampled_from([0, 1, -1, 7, 2 ** 31, -(2 ** 63), 2 ** 63 - 1]) | st.integers(-(2 ** 63), 2 ** 63 - 1)
        self.ints = mostly(int64, st.sampled_from([2 ** 63, -(2 ** 63) - 1, 2 ** 70, -(2 ** 64)]), share)
        float32 = st.sampled_from([0.5, -0.0, 1e-300, -3.4028234663852886e38, 0.1, 1e30]) | st.floats(
            -3.4e38, 3.4e38, allow_nan=False, allow_subnormal=False)
        self.floats = mostly(float32, st.sampled_from([1e300, 3.5e38, float("inf"), float("nan"), float("-inf")]),
                             share)
        # the first value of a sampled_from is the one hypothesis draws most: the nastiest first
        self.text = st.sampled_from(['a"b\n??/c\\', "", "fast", "back\\", "??=", "cr\rlf", "tab\there",
                                    "caf\u00e9 \u4e2d\u6587", "*/ // \\\n#error x", "\x7f\x01", "\U0001F600",
                                    "\\x41\\101"]) | st.text(
            alphabet=st.characters(blacklist_characters="\0", blacklist_categories=("Cs",)), max_size=12)
        self.strings = mostly(self.text, st.sampled_from(["nul\0byte", "\0"]), share)
        # a schema is ASCII: a default string is, but for one in `share`
        ascii_text = st.text(alphabet=st.characters(max_codepoint=127, blacklist_characters="\0"), max_size=12)
        self.schema_strings = mostly(ascii_text | st.sampled_from(["??/", "a\"b", "back\\", "line\nbreak"]),
                                     self.strings, share)
        self.kinds = mostly(st.sampled_from([k for k in KINDS if k != "SymInt"]), st.just("SymInt"), share)
        identifier = st.sampled_from(
            ["x", "int", "class", "N", "ret", "value", "v", "name", "attr_name", "kFailed", "i", "t", "op", "Shape",
             "Operator", "OpInt"]) | st.from_regex(r"\A[A-Za-z_][A-Za-z0-9_]{0,9}\Z")
        macros = st.sampled_from(["EOF", "errno", "NULL", "INPUT", "stdout", "INT64_MAX", "__x", "_X", "linux"])
        self.ge_names = mostly(identifier, st.one_of(macros, macros, macros, st.sampled_from(["x0", "0x", "a-b"]),
                                                     self.text, st.integers(0, 9)), share)
        camel = st.sampled_from(
            ["MyOp", "MyOP", "Myop", "DataType", "Graph", "InferShapeFuncRegister", "Shape", "Add", "Tensor", "Format",
             "GeShape", "Infer", "InferShape", "Common", "Ab" + "c" * 120]) | st.from_regex(
                 r"\A[A-Z][A-Za-z0-9]{0,12}\Z")
        reserved = st.sampled_from(["Operator", "TensorDesc", "AscendString", "OpReg", "N", "EOF", "NULL", "OpInt",
                                    "OpString", "OpPluginInfer", "GRAPH", "INPUT", "P" + "a" * 140])
        self.ge_types = mostly(camel, st.one_of(reserved, reserved, reserved, self.text), share)
        self.share = share

    def default(self, kind: str):
        """A strategy for the text of a schema default of `kind` (None: no default)."""
        scalar = {
            "int": self.ints.map(str), "SymInt": self.ints.map(str), "float": self.floats.map(repr),
            "Scalar": self.floats.map(repr) | self.ints.map(str), "bool": st.sampled_from(["True", "False"]),
            "str": self.schema_strings.map(_schema_string),
            "ScalarType": st.sampled_from(DTYPE_NAMES + ["float", "long"]),
            "int[]": st.lists(self.ints, max_size=3).map(lambda v: "[" + ", ".join(map(str, v)) + "]"),
            "float[]": st.lists(self.floats, max_size=3).map(lambda v: "[" + ", ".join(map(repr, v)) + "]"),
            "bool[]": st.lists(st.booleans(), max_size=3).map(lambda v: "[" + ", ".join(map(str, v)) + "]"),
        }.get(kind)
        return st.none() if scalar is None else st.none() | scalar

    def constant(self):
        # strings first: they are what generated text must escape
        return (self.strings | self.ints | self.strings | self.floats | st.lists(self.ints, min_size=1, max_size=3)
                | st.lists(self.floats, min_size=1, max_size=3) | st.lists(st.booleans(), min_size=1, max_size=2)
                | st.booleans() | mostly(st.just(1), st.none() | st.just([]) | st.just(["a"]), self.share))


def _schema_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t") + '"'


IDENT = st.from_regex(r"\A[a-z_][a-z0-9_]{0,7}\Z")


@st.composite
def arguments(draw, pools: Pools):
    """[(kind, name, default text or None)], tensors first, defaults last, unique names."""
    names = draw(st.lists(IDENT, min_size=1, max_size=5, unique=True))
    args = []
    for index, name in enumerate(names):
        kind = "Tensor" if index == 0 else draw(pools.kinds)
        args.append((kind, name, draw(pools.default(kind)) if index else None))
    return sorted(args, key=lambda a: a[2] is not None)


@st.composite
def size_expr(draw, args, pools: Pools, depth=0):
    tensors = [n for k, n, _ in args if k in ("Tensor", "Tensor?")]
    ints = [n for k, n, _ in args if k == "int"]
    lists = [n for k, n, _ in args if k == "Tensor[]"]
    int_lists = [n for k, n, _ in args if k == "int[]"]
    choices = ["literal"] + (["int"] if ints else []) + (["dim", "index"] if tensors else []) + (
        ["len"] if lists or int_lists else []) + (["item"] if int_lists else []) + (
        ["binop", "minmax"] if depth < 2 else [])
    what = draw(st.sampled_from(choices))
    if what == "literal":
        return str(draw(mostly(st.sampled_from([0, 1, 4, 2 ** 62, 2 ** 63 - 1]),
                               st.sampled_from([2 ** 63, 10 ** 30]), pools.share)))
    if what == "int":
        return draw(st.sampled_from(ints))
    if what == "dim":
        return f"{draw(st.sampled_from(tensors))}.dim()"
    if what == "index":
        return f"{draw(st.sampled_from(tensors))}.shape[{draw(st.integers(-3, 3))}]"
    if what == "item":
        return f"{draw(st.sampled_from(int_lists))}[{draw(st.integers(-2, 2))}]"
    if what == "len":
        return f"len({draw(st.sampled_from(lists + int_lists))})"
    left, right = draw(size_expr(args, pools, depth + 1)), draw(size_expr(args, pools, depth + 1))
    if what == "minmax":
        return f"{draw(st.sampled_from(['max', 'min']))}({left}, {right})"
    return f"({left} {draw(st.sampled_from(['+', '-', '*', '//', '%']))} {right})"


@st.composite
def sizes(draw, args, pools: Pools):
    tensors = [n for k, n, _ in args if k in ("Tensor", "Tensor?")]
    int_lists = [n for k, n, _ in args if k == "int[]"]
    form = draw(mostly(st.sampled_from(["shape", "list", "starred", "int_list", "concat"]), st.just("garbage"),
                       pools.share))
    if form == "shape" and tensors:
        return f"{draw(st.sampled_from(tensors))}.shape"
    if form == "starred" and tensors:
        return f"[*{draw(st.sampled_from(tensors))}.shape[:-1], {draw(size_expr(args, pools))}]"
    if form == "int_list" and int_lists:
        return f"{draw(st.sampled_from(int_lists))}[{draw(st.integers(-2, 2))}:]"
    if form == "concat" and tensors:
        return f"{draw(st.sampled_from(tensors))}.shape[::-1] + [{draw(size_expr(args, pools))}]"
    if form == "garbage":
        return draw(st.sampled_from(["__import__('os')", "x.shape.__class__", "[1.5]", "lambda: 1", "[" * 30, ""]))
    return "[" + ", ".join(draw(st.lists(size_expr(args, pools), min_size=0, max_size=3))) + "]"


@st.composite
def op_entry(draw, index: int, pools: Pools):
    args = draw(arguments(pools))
    name = f"npu_fz_{index}_{draw(IDENT)}"
    returns = draw(st.sampled_from([1, 1, 2]))
    func = f"{name}({', '.join(f'{k} {n}' + (f'={d}' if d is not None else '') for k, n, d in args)}) -> " + (
        "Tensor" if returns == 1 else "(Tensor, Tensor)")
    dtype_sources = [n for k, n, _ in args if k in ("Tensor", "Tensor?", "Tensor[]", "ScalarType")] + DTYPE_NAMES
    entry = {"func": func,
             "outputs": [{"size": draw(sizes(args, pools)), "dtype": draw(st.sampled_from(dtype_sources))}
                         for _ in range(returns)]}
    tensor_names = [n for k, n, _ in args if k.startswith("Tensor")]
    if draw(st.booleans()):
        entry["dtypes"] = draw(st.lists(st.sampled_from(DTYPE_NAMES), min_size=1, max_size=4, unique=True))
    elif draw(st.booleans()):
        entry["dtypes"] = {n: draw(st.lists(st.sampled_from(DTYPE_NAMES), min_size=1, max_size=3, unique=True))
                           for n in tensor_names}
    ge = {"type": draw(pools.ge_types)}
    if draw(st.booleans()):
        ge["inputs"] = [{draw(pools.ge_names): n} if draw(st.booleans()) else n for n in tensor_names]
    attrs = {}
    for kind, arg, default in args:
        if not kind.startswith("Tensor") and (default is None or kind == "SymInt" or draw(st.integers(0, 3))):
            attrs[draw(pools.ge_names) if draw(st.booleans()) else arg] = arg
    for _ in range(draw(st.integers(1, 2))):
        attrs[draw(pools.ge_names)] = {"value": draw(pools.constant())}
    if attrs or draw(st.booleans()):
        ge["attrs"] = attrs
    if draw(st.booleans()):
        ge["outputs"] = [draw(pools.ge_names) for _ in range(returns)]
    entry["ge"] = ge
    return entry


@st.composite
def yaml_files(draw, share: int):
    """(file name, YAML text) of one or two ops; the two may share a GE type or its file name.
    `share`: one value in `share` of each field is hostile (1: every one may be)."""
    pools = Pools(share)
    ops = [draw(op_entry(0, pools))]
    if draw(st.booleans()):
        second = draw(op_entry(1, pools))
        if draw(st.integers(0, 3)) == 0:
            first_type = str(ops[0]["ge"]["type"])
            second["ge"]["type"] = draw(st.sampled_from([first_type, first_type.upper(), first_type.lower()]))
        ops.append(second)
    name = draw(st.text(alphabet=st.characters(blacklist_characters="/\0", blacklist_categories=("Cs",)),
                        min_size=1, max_size=24)).replace(".", "_") + ".yaml"
    return name, yaml.safe_dump({"namespace": "npu", "ops": ops}, allow_unicode=True, sort_keys=False, width=10 ** 6)


def _parse_or_located_error(path: Path):
    """The specs, or None after checking the refusal is located at a line of this file."""
    try:
        return parse_yaml(str(path))
    except YamlSpecError as error:
        location = error.location
        assert location.file == str(path) and 1 <= location.line <= len(path.read_text("utf-8").splitlines()) + 1
        # the file name as messages show it: control characters escaped (_base.paths.shown)
        assert str(error).startswith(f"{shown(path)}:{location.line}:"), str(error)
        assert "cannot validate this op" not in str(error), f"a validator gap: {error}"
        return None


@pytest.fixture(scope="module")
def pch(tmp_path_factory) -> Path:
    """The CANN headers the generated files include, precompiled once (each compile then ~0.3 s)."""
    folder = tmp_path_factory.mktemp("pch")
    header = folder / "op_plugin_fuzz_pch.h"
    header.write_text("#include <algorithm>\n#include <cstdint>\n#include <initializer_list>\n#include <limits>\n"
                      "#include <stdexcept>\n#include <vector>\n#include \"graph/operator_reg.h\"\n"
                      "#include \"graph/types.h\"\n")
    subprocess.run([*GPP, f"-I{INCLUDE}", "-x", "c++-header", str(header), "-o", str(header) + ".gch"],
                   check=True, capture_output=True, timeout=300)
    return header


def _gpp(pch: Path, folder: Path, unit: Path) -> None:
    done = subprocess.run([*GPP, "-fsyntax-only", f"-I{pch.parent}", "-include", pch.name, f"-I{INCLUDE}",
                           f"-I{folder}", str(unit)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, unit.read_text()[-3000:] + "\n" + done.stderr[-4000:]


_MSOPGEN_TYPES = {"float16": "DT_FLOAT16", "float": "DT_FLOAT", "bfloat16": "DT_BF16", "double": "DT_DOUBLE",
                  "int8": "DT_INT8", "int16": "DT_INT16", "int32": "DT_INT32", "int64": "DT_INT64",
                  "uint8": "DT_UINT8", "bool": "DT_BOOL"}
_ATTR_API = {"int": "Int", "float": "Float", "string": "String", "bool": "Bool", "type": "Type",
             "list_int": "ListInt", "list_bool": "ListBool", "list_float": "ListFloat"}


def _msopgen_reg_op(op: dict) -> str:
    """The REG_OP msOpGen's header generator pastes from the JSON (as tests/test_msopgen_cpp.py),
    in a namespace of its own so that it can sit beside op-plugin opproto's prototype of the type."""
    macro = {"required": "INPUT", "optional": "OPTIONAL_INPUT", "dynamic": "DYNAMIC_INPUT"}
    lines = [f"REG_OP({op['op']})"]
    for section, kind in (("input_desc", None), ("output_desc", "OUTPUT")):
        for desc in op[section]:
            types = ", ".join(dict.fromkeys(_MSOPGEN_TYPES[t] for t in desc["type"]))
            lines.append(f"    .{kind or macro[desc['param_type']]}({desc['name']}, TensorType({{{types}}}))")
    for attr in op.get("attr", []):
        api = _ATTR_API[attr["type"]]
        if attr["param_type"] != "optional":
            lines.append(f"    .REQUIRED_ATTR({attr['name']}, {api})")
            continue
        value = attr["default_value"]
        if isinstance(value, bool):
            value = "true" if value else "false"
        elif api == "String":
            value = f'"{value}"'
        lines.append(f"    .ATTR({attr['name']}, {api}, {value})")
    lines.append(f"    .OP_END_FACTORY_REG({op['op']})")
    return "namespace ge {\nnamespace msopgen_paste {\n" + "\n".join(lines) + ";\n}\n}\n"


def _generate(specs):
    """Both generators on accepted specs: refusals located at the op, JSON that round-trips."""
    proto = opproto_sources(specs, builtin_types=set())
    msop = msopgen_ops(specs, builtin_types=set())
    for spec, message in proto.errors + msop.errors:
        assert message.startswith(f"{shown(spec.location.file)}:{spec.location.line}: op '{spec.overload_name}'"), \
            message
    check_msopgen_json(msop.ops)
    assert json.loads(dumps(msop.ops)) == msop.ops
    event(f"generator errors: {bool(proto.errors or msop.errors)}")
    return proto, msop


@settings(FUZZ, max_examples=300)
@given(yaml_files(share=3))
def test_fuzz_the_yaml_front_end_refuses_with_a_location(case):
    """Any YAML the strategies make is accepted or refused at a line of the file; what is accepted
    is generated, or refused by the generators at the op's line."""
    name, text = case
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / name
        path.write_text(text, encoding="utf-8")
        specs = _parse_or_located_error(path)
        if specs is None:
            event("refused by the YAML front end")
        else:
            _generate(specs)


@settings(FUZZ, max_examples=100)
@given(yaml_files(share=10))
def test_fuzz_accepted_yaml_generates_cpp_that_compiles_and_json_that_round_trips(pch, case):
    name, text = case
    with tempfile.TemporaryDirectory() as folder:
        folder = Path(folder)
        path = folder / name
        path.write_text(text, encoding="utf-8")
        specs = _parse_or_located_error(path)
        if specs is None:
            event("refused by the YAML front end")
            return
        proto, msop = _generate(specs)
        out = folder / "out"
        write_sources(proto, out)
        sources = [p.name for p in out.iterdir() if p.suffix == ".cc"]
        # msOpGen pastes an int default as its digits: INT64_MIN is then a g++ warning, which the
        # generator says in a note (docs/msopgen.md); those ops are left out of the pasted unit
        pasted = "".join(_msopgen_reg_op(op) for op in msop.ops if all(
            a["type"] in _ATTR_API and "-9223372036854775808" not in str(a.get("default_value"))
            for a in op.get("attr", [])))
        if not sources and not pasted:
            return
        unit = out / "fuzz_unit.cpp"
        unit.write_text("".join(f'#include "{s}"\n' for s in sorted(sources)) + pasted)
        _gpp(pch, out, unit)
        event("compiled")


"""The Ascend-side files generated from a YAML file (`op-plugin opproto`, `op-plugin msopgen`) carry
nothing the YAML author did not declare, lose no file, and write nowhere but their folder.

Each test here is a regression test of issue 26: file names that collide (MyOp / MyOP, a type named
like the helper header), a YAML file name that ends the `// Generated` comment, string defaults with
line breaks, quotes, `??/` or non-ASCII, INT64_MIN defaults, links planted in `--out`, unwritable
`--out`, GE types that name CANN header classes or macros, and msOpGen output dtypes given by a
ScalarType argument. The names a YAML file may use are checked where it is parsed
(tests/broken_yaml/); what is checked here is what reaches the generated text.
"""
from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from op_plugin._registry.load import parse_yaml
from op_plugin._simulator.hosting.install import simulator_dir
from op_plugin._tools.ascend_c.msopgen import check_msopgen_json, dumps, msopgen_ops
from op_plugin._tools.ascend_c.opproto import opproto_sources, write_sources
from op_plugin.cli import main

INCLUDE = simulator_dir() / "torch_npu" / "include"
needs_gpp = pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed")


def _yaml(tmp_path: Path, text: str, name: str = "ops.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def _compile(folder: Path, sources, *, run: bool = False) -> str:
    """Compile the .cc files together under -Wall -Wextra -Werror (and run the program if `run`)."""
    unit = folder / "unit.cpp"
    unit.write_text("".join(f'#include "{Path(s).name}"\n' for s in sources))
    mode = ["-o", str(folder / "unit")] if run else ["-fsyntax-only"]
    done = subprocess.run(["g++", "-std=c++17", "-Wall", "-Wextra", "-Werror", f"-I{INCLUDE}", f"-I{folder}",
                           str(unit), *mode], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]
    if not run:
        return ""
    return subprocess.run([str(folder / "unit")], capture_output=True, timeout=60, check=True).stdout


def _op(name: str, ge_type: str, extra: str = "") -> str:
    return (f"  - func: {name}(Tensor x) -> Tensor\n    outputs: [{{size: x.shape, dtype: x}}]\n"
            f"    dtypes: [float32]\n    ge: {{type: {ge_type}{extra}}}\n")


# ------------------------------------------------------------------ 1. file names that collide

def test_types_that_share_a_file_name_are_refused_naming_both(tmp_path, capsys):
    path = _yaml(tmp_path, "ops:\n" + _op("npu_gt_first", "MyOp") + _op("npu_gt_second", "MyOP")
                 + _op("npu_gt_helper", "OpPluginInfer") + _op("npu_gt_twice", "MyOp") + _op("npu_gt_fine", "GtFine"))
    out = tmp_path / "proto"
    assert main(["opproto", str(path), "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert f"error: {path}:6: op 'npu_gt_second': field 'ge.type': GE type MyOP would be written to my_op.h, the " \
           f"file of GE type MyOp (npu::npu_gt_first, {path}:2)" in err
    assert f"error: {path}:10: op 'npu_gt_helper': field 'ge.type': GE type OpPluginInfer would be written to " \
           "op_plugin_infer.h" in err
    assert f"{path}:14: op 'npu_gt_twice': field 'ge.type': GE type MyOp is already generated from " \
           "npu::npu_gt_first" in err
    # the first op's prototype is the one written, the others' are not lost silently, the rest is generated
    assert "REG_OP(MyOp)" in (out / "my_op.h").read_text()
    assert "op_plugin_infer" in (out / "op_plugin_infer.h").read_text() and (out / "gt_fine.h").is_file()
    assert sorted(p.name for p in out.iterdir()) == ["gt_fine.cc", "gt_fine.h", "my_op.cc", "my_op.h",
                                                     "op_plugin_infer.h"]

    jsons = tmp_path / "json"
    assert main(["msopgen", str(path), "--out", str(jsons)]) == 1
    captured = capsys.readouterr()
    assert "GE type MyOP would be written to my_op.json, the file of GE type MyOp" in captured.err
    assert captured.out.count("wrote ") == 3  # MyOp, OpPluginInfer (no helper file here) and GtFine
    assert [op["op"] for op in json.loads((jsons / "my_op.json").read_text())] == ["MyOp"]


def test_header_guards_keep_the_types_case(tmp_path):
    """MyOp and Myop are two types (my_op.h, myop.h): their include guards must differ too."""
    result = opproto_sources(parse_yaml(_yaml(tmp_path, "ops:\n" + _op("npu_gt_a", "MyOp") + _op("npu_gt_b", "Myop"))),
                             builtin_types=set())
    assert not result.errors
    guards = {re.search(r"#ifndef (\w+)", result.files[name]).group(1) for name in ("my_op.h", "myop.h")}
    assert len(guards) == 2


# ------------------------------------------------------------------ 3. the YAML file name in comments

@needs_gpp
def test_a_yaml_file_name_cannot_add_code_to_the_generated_files(tmp_path):
    name = "ops\n#error injected through the file name\n\\"
    path = _yaml(tmp_path, "ops:\n" + _op("npu_gt_named", "GtNamed"), name=name + ".yaml")
    out = tmp_path / "proto"
    result = opproto_sources(parse_yaml(str(path)), builtin_types=set())
    write_sources(result, out)
    header = (out / "gt_named.h").read_text()
    assert header.splitlines()[0].startswith("// Generated by op-plugin opproto from npu::npu_gt_named (")
    assert "ops\\n#error injected" in header.splitlines()[0]
    _compile(out, [out / "gt_named.cc"])


# ------------------------------------------------------------------ 9, 10. defaults as C++ text

ESCAPES = (r'''ops:
  - func: "npu_gt_defaults(Tensor x, str mode=\"a\\nb\r??/\\\"q\\\\\", int k=-9223372036854775808, '''
           r'''int[] ks=[-9223372036854775808, 9223372036854775807], float tiny=1e-300) -> Tensor"
    outputs: [{size: x.shape, dtype: x}]
    dtypes: [float32]
    ge:
      type: GtDefaults
      attrs: {mode: mode, k: k, ks: ks, tiny: tiny, s: {value: "tab\there ??= caf\u00e9 \u4e2d 0\x01 end\\"}, '''
           r'''inf: {value: .inf}, low: {value: [0.5, -.inf, .nan]}}
''')


@needs_gpp
def test_string_int64_and_non_finite_defaults_compile_and_keep_their_values(tmp_path):
    spec, = parse_yaml(_yaml(tmp_path, ESCAPES))
    result = opproto_sources([spec], builtin_types=set())
    assert not result.errors, result.errors
    out = tmp_path / "proto"
    write_sources(result, out)
    header = (out / "gt_defaults.h").read_text()
    assert ".ATTR(k, Int, (-9223372036854775807 - 1))" in header
    assert ".ATTR(ks, ListInt, {(-9223372036854775807 - 1), 9223372036854775807})" in header
    assert "std::numeric_limits<float>::infinity()" in header
    _compile(out, [out / "gt_defaults.cc"])

    # the string literals written stand for exactly the YAML's strings
    strings = {"mode": "a\nb\r??/\"q\\", "s": "tab\there ??= caf\u00e9 \u4e2d 0\x01 end\\"}
    for name, value in strings.items():
        literal = re.search(rf"\.ATTR\({name}, String, (\".*\")\)\n", header).group(1)
        program = tmp_path / f"print_{name}.cc"
        program.write_text(f"#include <cstdio>\nint main() {{ static const char s[] = {literal};\n"
                           "  std::fwrite(s, 1, sizeof(s) - 1, stdout); }\n")
        subprocess.run(["g++", "-std=c++17", "-Wall", "-Wextra", "-Werror", str(program),
                        "-o", str(program.with_suffix(""))],
                       check=True, capture_output=True, timeout=120)
        printed = subprocess.run([str(program.with_suffix(""))], capture_output=True, check=True, timeout=60).stdout
        assert printed == value.encode("utf-8"), name


@needs_gpp
def test_msopgen_string_defaults_are_what_msopgen_can_paste(tmp_path):
    """msOpGen pastes a string default between quotes into C++ (REG_OP and OpAttrDef): the JSON
    holds the escaped body, which pasted stands for the YAML's string, and round-trips as JSON."""
    text = ESCAPES.replace(", inf: {value: .inf}, low: {value: [0.5, -.inf, .nan]}", "")
    result = msopgen_ops(parse_yaml(_yaml(tmp_path, text)), builtin_types=set())
    assert not result.errors, result.errors
    (op,) = result.ops
    assert json.loads(dumps(result.ops)) == result.ops
    check_msopgen_json(result.ops)
    attrs = {a["name"]: a for a in op["attr"]}
    assert attrs["mode"]["default_value"] == 'a\\nb\\r\\?\\?/\\"q\\\\'
    assert any("-9223372036854775808" in note and "-Werror" in note for note in result.notes)
    program = tmp_path / "pasted.cc"
    program.write_text("#include <cstdio>\nint main() {\n" + "".join(
        f'  std::fputs("{attrs[n]["default_value"]}", stdout); std::fputs("|", stdout);\n' for n in ("mode", "s"))
        + "}\n")
    subprocess.run(["g++", "-std=c++17", "-Wall", "-Wextra", "-Werror", str(program), "-o", str(tmp_path / "pasted")],
                   check=True, capture_output=True, timeout=120)
    printed = subprocess.run([str(tmp_path / "pasted")], capture_output=True, check=True, timeout=60).stdout
    assert printed == ("a\nb\r??/\"q\\|" + "tab\there ??= caf\u00e9 \u4e2d 0\x01 end\\|").encode("utf-8")


def test_the_msopgen_checker_refuses_a_raw_string_default():
    op = {"op": "Ok", "input_desc": [{"name": "x", "param_type": "required", "format": ["ND"], "type": ["float"]}],
          "output_desc": [{"name": "y", "param_type": "required", "format": ["ND"], "type": ["float"]}],
          "attr": [{"name": "a", "param_type": "optional", "type": "string", "default_value": 'a"\n'}]}
    with pytest.raises(ValueError, match="string is the body of a C\\+\\+ string literal"):
        check_msopgen_json([op])


# ------------------------------------------------------------------ 5, 11. writing into --out

@pytest.mark.parametrize("command", ["opproto", "msopgen"])
def test_out_never_writes_through_a_planted_link(tmp_path, capsys, command):
    path = _yaml(tmp_path, "ops:\n" + _op("npu_gt_linked", "GtLinked"))
    out = tmp_path / "out"
    out.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    target = out / ("gt_linked.h" if command == "opproto" else "gt_linked.json")
    target.symlink_to(victim)
    assert main([command, str(path), "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert f"error: cannot write {target}: is a symbolic link" in err
    assert victim.read_text() == "keep me" and target.is_symlink()
    assert [p.name for p in out.iterdir()] == [target.name]  # all or nothing: no other file either


@pytest.mark.parametrize("command", ["opproto", "msopgen"])
def test_an_unusable_out_is_an_error_line(tmp_path, capsys, command):
    path = _yaml(tmp_path, "ops:\n" + _op("npu_gt_out", "GtOut"))
    a_file = tmp_path / "a_file"
    a_file.write_text("")
    assert main([command, str(path), "--out", str(a_file)]) == 1
    assert f"error: cannot write {a_file}: exists and is not a folder" in capsys.readouterr().err
    assert main([command, str(path), "--out", str(a_file / "below")]) == 1
    assert f"error: cannot write {a_file / 'below'}:" in capsys.readouterr().err
    folder = tmp_path / "out"
    (folder / "gt_out.h").mkdir(parents=True)
    (folder / "gt_out.json").mkdir()
    assert main([command, str(path), "--out", str(folder)]) == 1
    assert "exists and is not a regular file" in capsys.readouterr().err


# ------------------------------------------------------------------ 14. msOpGen: ScalarType output dtypes

CAST = """ops:
  - func: npu_gt_cast(Tensor x, ScalarType dst=int8) -> Tensor
    outputs: [{size: x.shape, dtype: dst}]
    dtypes: [float16, float32, int32]
    ge: {type: GtCast, attrs: {dst_type: dst}}
  - func: npu_gt_nonfinite(Tensor x) -> Tensor
    outputs: [{size: x.shape, dtype: x}]
    dtypes: [float32]
    ge: {type: GtNonFinite, attrs: {limit: {value: .inf}}}
  - func: npu_gt_plain(Tensor x) -> Tensor
    outputs: [{size: x.shape, dtype: x}]
    dtypes: [float32]
    ge: {type: GtPlain}
"""


def test_msopgen_enumerates_the_dtypes_a_scalar_type_argument_names(tmp_path, capsys):
    path = _yaml(tmp_path, CAST)
    result = msopgen_ops(parse_yaml(path), builtin_types=set())
    ops = {op["op"]: op for op in result.ops}
    assert set(ops) == {"GtCast", "GtPlain"}  # one op's limitation does not stop the others ...
    ((failed, message),) = result.errors  # ... and is said, with its place
    assert failed.name == "npu_gt_nonfinite"
    assert message.startswith(f"{path}:6: op 'npu_gt_nonfinite': field 'ge.attrs': attr 'limit' defaults to inf")
    cast = ops["GtCast"]
    columns = {(x, y) for x, y in zip(cast["input_desc"][0]["type"], cast["output_desc"][0]["type"], strict=True)}
    # every source dtype (`dtypes:`) with every destination the YAML bounds: `dtypes:` and the default
    assert columns == {(x, y) for x in ("float16", "float", "int32") for y in ("float16", "float", "int8", "int32")}
    check_msopgen_json(result.ops)
    assert json.loads(dumps(result.ops)) == result.ops

    assert main(["msopgen", str(path)]) == 1
    captured = capsys.readouterr()
    assert {op["op"] for op in json.loads(captured.out)} == {"GtCast", "GtPlain"}
    assert f"error: {path}:6: op 'npu_gt_nonfinite'" in captured.err


def test_msopgen_bounds_the_dtype_combinations(tmp_path):
    """Independent dtype sets multiply: eleven arguments with two dtypes each would be 2048 columns."""
    names = [f"t{i}" for i in range(11)]
    pairs = [["float16", "float32"], ["int8", "int16"], ["int32", "int64"], ["uint8", "bool"], ["float32", "int32"],
             ["float16", "int8"], ["bfloat16", "int16"], ["float64", "int64"], ["float16", "uint8"],
             ["bfloat16", "bool"], ["float64", "int8"]]
    dtypes = ", ".join(f"{n}: [{', '.join(p)}]" for n, p in zip(names, pairs, strict=True))
    text = (f"ops:\n  - func: npu_gt_wide({', '.join(f'Tensor {n}' for n in names)}) -> Tensor\n"
            f"    outputs: [{{size: t0.shape, dtype: t0}}]\n    dtypes: {{{dtypes}}}\n    ge: {{type: GtWide}}\n")
    path = _yaml(tmp_path, text)
    result = msopgen_ops(parse_yaml(path), builtin_types=set())
    ((_, message),) = result.errors
    assert message.startswith(f"{path}:2: op 'npu_gt_wide': field 'dtypes': 2048 dtype combinations")
    assert "more than 1024" in message


# ------------------------------------------------------------------ 8. GE types that name CANN's C++ names

_TYPE_NAME = re.compile(r"\b[A-Z][A-Za-z0-9]*\b")
_CANDIDATE_UNIVERSE = """#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <stdexcept>
#include <vector>
#include "graph/operator_reg.h"
#include "graph/types.h"
"""
# Every macro REG_OP expands (INPUT, OPTIONAL_INPUT, DYNAMIC_INPUT, OUTPUT, REQUIRED_ATTR, ATTR): the
# attr kinds differ only in the `Op<kind>` class each names (all refused) and String's AscendString.
_EVERY_KIND = """  - func: {name}(Tensor x, Tensor? o, Tensor[] d, int r, str s="s", ScalarType t=int8) -> Tensor
    outputs: [{{size: x.shape, dtype: t}}]
    ge: {{type: "{ge_type}"}}
"""
_AFTER = """  - func: npu_gt_after(Tensor x, Tensor? o, Tensor[] d, int r, int a=1, str s="s", int[] l=[1], \
float f=1.0, bool b=True, ScalarType t=int8, float[] lf=[1.0], bool[] lb=[True]) -> Tensor
    outputs: [{size: "[*x.shape, a, len(d), r]", dtype: t}]
    ge: {type: GtAfterEveryCandidate}
"""


@needs_gpp
def test_every_cann_header_name_not_refused_compiles_as_a_ge_type(tmp_path):
    """The names a GE type could collide with are those in the headers the generated code includes
    (preprocessed) and the macros they define. Every one that cann_names does not refuse is
    generated as the type of an op with every kind of input and attr, all in one translation unit
    (so a type that breaks the prototypes after it is found too), and compiled with -Werror."""
    from op_plugin._ge.builtin_prototypes import builtin_prototypes
    from op_plugin._spec.cann_names import RESERVED_GE_TYPES, ge_name_problem

    universe = tmp_path / "universe.cpp"
    universe.write_text(_CANDIDATE_UNIVERSE)
    pre = subprocess.run(["g++", "-std=c++17", "-E", "-P", f"-I{INCLUDE}", str(universe)], capture_output=True,
                         text=True, check=True, timeout=120).stdout
    macros = subprocess.run(["g++", "-std=c++17", "-dM", "-E", f"-I{INCLUDE}", str(universe)], capture_output=True,
                            text=True, check=True, timeout=120).stdout
    macro_names = {m.group(1) for m in re.finditer(r"^#define ([A-Z][A-Za-z0-9]*)\b", macros, re.M)}
    assert not macro_names - RESERVED_GE_TYPES, "macros a GE type could be spelled as, not refused"
    for std in ("c++17", "gnu++17"):  # object-like macros: refused as GE input, attr and output names
        defined = subprocess.run(["g++", f"-std={std}", "-dM", "-E", f"-I{INCLUDE}", str(universe)],
                                 capture_output=True, text=True, check=True, timeout=120).stdout
        objects = {m.group(1) for m in re.finditer(r"^#define ([A-Za-z_][A-Za-z0-9_]*) ", defined, re.M)}
        assert not {name for name in objects if ge_name_problem(name) is None}, std
    builtins = set(builtin_prototypes())
    assert not RESERVED_GE_TYPES & builtins, "a CANN built-in type is refused"
    candidates = sorted(set(_TYPE_NAME.findall(pre)) - RESERVED_GE_TYPES - builtins)
    assert len(candidates) > 100
    text = "ops:\n" + "".join(_EVERY_KIND.format(name=f"npu_gt_c{i}", ge_type=t) for i, t in enumerate(candidates))
    text += _AFTER  # with every attr kind, after them all
    result = opproto_sources(parse_yaml(_yaml(tmp_path, text)), builtin_types=set())
    assert not result.errors, result.errors[:3]
    out = tmp_path / "proto"
    write_sources(result, out)
    _compile(out, sorted(p for p in out.iterdir() if p.suffix == ".cc"))
